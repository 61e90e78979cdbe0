// The process groups of one world, built once and shared by every rank. Group names are c10d's:
// a counter every rank advances on every new_group, member or not, so the n-th group created is
// named "n" on every rank ("0" is WORLD). Ranks that asked for other members under the same
// names keep their own view (an override), as their c10d state would.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/comm/group_batch.hpp"
#include "src/comm/rank_list.hpp"
#include "src/comm/rank_map.hpp"
#include "src/mesh/axis.hpp"

namespace meshsim {

class GroupTable {
 public:
  explicit GroupTable(int64_t world_size);
  ~GroupTable();
  GroupTable(const GroupTable&) = delete;
  GroupTable& operator=(const GroupTable&) = delete;

  int64_t world_size() const { return world_size_; }
  // WORLD's members, 0..world_size-1.
  const RankList& world() const { return world_; }

  // The shared rank map of a mesh: the identity over `n` ranks (init_device_mesh), or equal to
  // `ranks` (an explicit table). Created on first use; MemoryError when it does not fit.
  SharedRankMap identity_map(int64_t n);
  SharedRankMap rank_map(std::span<const int64_t> ranks);
  // The replica groups of `axis` over `map`, computed on first use.
  SharedGroupBatch axis_groups(const Axis& axis, const SharedRankMap& map);
  // One group of these members (sorted, checked), shared by equal requests.
  SharedGroupBatch explicit_group(std::span<const int64_t> sorted_members);

  // Names `batch`'s groups first, first + 1, ... as `rank` sees them. The first rank to define a
  // name defines it for every rank that agrees; a rank with other members keeps its own.
  // `origin` says what created them, for reports: "world.tp" (a mesh dim), "a" (a named group).
  // A new name is charged to the MemoryBudget (a loop creating meshes grows the table): throws
  // its MemoryError, defining nothing, when it does not fit.
  void define(int64_t first, SharedGroupBatch batch, int64_t rank, std::string origin = {});
  // Members of group `id` as `rank` sees it; null when no such group was defined.
  RankList members(int64_t id, int64_t rank) const;
  // How reports name group `id`: "WORLD", "world.tp#6" (the 7th group of a mesh dim's batch),
  // "a" (a batch of one), or the number itself when nothing says what created it.
  std::string label(int64_t id) const;
  // The DeviceMesh dim group `id` belongs to as `rank` sees it ("tp" of "world.tp"); none for
  // WORLD and groups new_group made.
  std::optional<std::string> mesh_dim(int64_t id, int64_t rank) const;
  // The groups `rank` is a member of, WORLD first, in the order they were created, as it sees
  // them (a process's own process groups).
  std::vector<int64_t> groups_of(int64_t rank) const;
  // The newest group below `limit` whose members are `sorted_members`, as `rank` sees it.
  std::optional<int64_t> find(std::span<const int64_t> sorted_members, int64_t limit,
                              int64_t rank) const;

 private:
  struct Entry {
    int64_t first;
    SharedGroupBatch batch;
    std::string origin;
    // How many earlier entries every rank sees came from the same origin (a mesh built twice):
    // the second is labelled "world.tp(2)". Counted once, when defined.
    int64_t earlier_same_origin = 0;
    int64_t end() const { return first + static_cast<int64_t>(batch->count()); }
  };
  // The entry holding `id` in `entries` (sorted by first), or null.
  static const Entry* covering(const std::vector<Entry>& entries, int64_t id);

  // Holds what a new entry costs against the MemoryBudget (the entry, its origin, and a slot per
  // group id in the rendezvous and reports); throws its MemoryError when it does not fit.
  void charge(const GroupBatch& batch, const std::string& origin);

  int64_t world_size_;
  uint64_t charged_ = 0;  // bytes held against the MemoryBudget
  RankList world_;
  std::vector<Entry> entries_;                            // what every agreeing rank sees
  std::unordered_map<std::string, int64_t> origin_uses_;  // entries_ by origin
  std::map<int64_t, std::vector<Entry>> overrides_;       // by rank: names it sees differently
  RankListPool lists_;
  std::map<int64_t, SharedRankMap> identities_;
  RankInterner<RankMap> maps_;
  std::map<std::pair<const RankMap*, std::string>, SharedGroupBatch> axis_batches_;
  std::map<const std::vector<int64_t>*, SharedGroupBatch> explicit_batches_;
};

}  // namespace meshsim
