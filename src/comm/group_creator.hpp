// How a rank creates process groups (c10d `new_group`): the seam between the mesh model and the
// runtime. The runtime's implementation makes creation a collective over WORLD.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "src/comm/rank_list.hpp"

namespace meshsim {

class GroupCreator {
 public:
  virtual ~GroupCreator() = default;

  // The calling rank and the size of WORLD.
  virtual int64_t rank() const = 0;
  virtual int64_t world_size() const = 0;
  // Name of the default group (c10d names it "0").
  virtual std::string world_group_name() const = 0;

  // Collective over WORLD: every rank must call it with the same `ranks`, in the same order
  // relative to its other calls. Names come from a per-process counter in creation order, so
  // the counter advances on every rank, member or not. As c10d does by default, the members are
  // sorted: a rank's position in the group (its group rank) follows ascending global rank. Returns
  // the name when the caller is in `ranks`, otherwise nullopt. Throws ValueError, before any
  // communication, for repeated ranks or ranks outside the world (check_group_ranks).
  virtual std::optional<std::string> new_group(std::span<const int64_t> ranks) = 0;

  // Ranks of a group this rank created or joined, by name; null if unknown.
  virtual RankList group_ranks(const std::string& name) const = 0;

  // The most recently created group with exactly these members (in any order); nullopt if none.
  virtual std::optional<std::string> find_group(std::span<const int64_t> ranks) const = 0;
};

// c10d's checks of a new group's ranks, in its order: sorted, no repeats, no more than the world,
// each within it. Returns the sorted members; throws ValueError with c10d's messages.
std::vector<int64_t> check_group_ranks(std::span<const int64_t> ranks, int64_t world_size);

// A rank's own counter and group table, with no communication: what one rank sees when every
// rank creates the same groups in the same order. Ranks that share `pool` share member lists.
class LocalGroupCreator final : public GroupCreator {
 public:
  LocalGroupCreator(int64_t rank, int64_t world_size,
                    std::shared_ptr<RankListPool> pool = std::make_shared<RankListPool>());

  int64_t rank() const override { return rank_; }
  int64_t world_size() const override { return world_size_; }
  std::string world_group_name() const override { return "0"; }
  std::optional<std::string> new_group(std::span<const int64_t> ranks) override;
  RankList group_ranks(const std::string& name) const override;
  std::optional<std::string> find_group(std::span<const int64_t> ranks) const override;

  // Every group created so far, in creation order (WORLD first).
  const std::vector<RankList>& groups() const { return groups_; }

 private:
  int64_t rank_;
  int64_t world_size_;
  std::shared_ptr<RankListPool> pool_;
  std::vector<RankList> groups_;  // index = group name
};

}  // namespace meshsim
