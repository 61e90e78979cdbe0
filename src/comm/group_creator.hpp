// How a rank creates process groups (c10d `new_group`): the seam between the mesh model and the
// runtime. A rank's view of the world's group table, plus the store barrier that makes creation
// a collective over WORLD (the runtime's; nothing when one rank is modelled alone).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "src/comm/group_table.hpp"

namespace meshsim {

// c10d's checks of a new group's ranks, in its order: sorted, no repeats, no more than the world,
// each within it. Returns the sorted members; throws ValueError with c10d's messages.
std::vector<int64_t> check_group_ranks(std::span<const int64_t> ranks, int64_t world_size);

class GroupCreator {
 public:
  GroupCreator(int64_t rank, std::shared_ptr<GroupTable> table);
  virtual ~GroupCreator() = default;

  // The calling rank and the size of WORLD.
  int64_t rank() const { return rank_; }
  int64_t world_size() const { return table_->world_size(); }
  // Name of the default group (c10d names it "0").
  std::string world_group_name() const { return "0"; }
  // The world's shared tables (rank maps, group batches).
  GroupTable& table() { return *table_; }
  const GroupTable& table() const { return *table_; }
  const RankList& world_ranks() const { return table_->world(); }

  // Collective over WORLD: every rank must call it with the same `ranks`, in the same order
  // relative to its other calls. Names come from a per-process counter in creation order, so
  // the counter advances on every rank, member or not. As c10d does by default, the members are
  // sorted: a rank's position in the group (its group rank) follows ascending global rank. Returns
  // the name when the caller is in `ranks`, otherwise nullopt. Throws ValueError, before any
  // communication, for repeated ranks or ranks outside the world (check_group_ranks).
  std::optional<std::string> new_group(std::span<const int64_t> ranks);
  // new_group for every replica group of `axis` over `map`, in order, as one store barrier:
  // what DeviceMesh does for one dim (`dim_name`, "" when the mesh names none). Returns the name
  // of the caller's group. When a group is invalid, the groups before it are created and its
  // ValueError is thrown.
  std::optional<std::string> new_groups(const Axis& axis, const SharedRankMap& map,
                                        const std::string& dim_name = {});

  // What reports call the groups this rank creates next: the scenario's name for the mesh or
  // group being built ("world" makes a dim's groups "world.tp#0", "world.tp#1", ...).
  // `operation` is the PyTorch call that creates them, for reports ("world[\"dp\",
  // \"tp\"]._flatten()").
  void set_label_prefix(std::string prefix, std::string operation = {}) {
    label_prefix_ = std::move(prefix);
    operation_ = std::move(operation);
  }
  void clear_label_prefix() {
    label_prefix_.clear();
    operation_.clear();
  }
  // What the groups being created now are called ("world.tp", or "new_group" with no prefix),
  // and the call creating them (empty when not known).
  const std::string& creating() const { return creating_; }
  const std::string& operation() const { return operation_; }

  // Ranks of a group this rank created or joined, by name; null if unknown.
  RankList group_ranks(const std::string& name) const;
  // The most recently created group with exactly these members (in any order); nullopt if none.
  std::optional<std::string> find_group(std::span<const int64_t> ranks) const;
  // How many groups this rank has created, WORLD included: the next group's name.
  size_t groups_created() const { return static_cast<size_t>(next_id_); }

 protected:
  // c10d's store barrier, which names the groups of `batch` first, first + 1, ... in the world's
  // table once every rank of WORLD has reached it. Throws what the runtime throws for a hang or
  // an abort.
  // creating() says what the groups are called.
  virtual void store_barrier(const SharedGroupBatch& batch, int64_t first) = 0;

 private:
  std::optional<std::string> create(const SharedGroupBatch& batch, std::string label);

  int64_t rank_;
  std::shared_ptr<GroupTable> table_;
  int64_t next_id_ = 1;  // "0" is WORLD
  std::string label_prefix_;
  std::string operation_;
  std::string creating_;
};

// What one rank sees when every rank creates the same groups in the same order, with no
// communication. Ranks that share `table` share its member lists.
class LocalGroupCreator final : public GroupCreator {
 public:
  LocalGroupCreator(int64_t rank, int64_t world_size)
      : GroupCreator(rank, std::make_shared<GroupTable>(world_size)) {}
  LocalGroupCreator(int64_t rank, std::shared_ptr<GroupTable> table)
      : GroupCreator(rank, std::move(table)) {}

 protected:
  // One rank alone: nothing to wait for.
  void store_barrier(const SharedGroupBatch& batch, int64_t first) override {
    table().define(first, batch, rank(), creating());
  }
};

}  // namespace meshsim
