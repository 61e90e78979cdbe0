#include "src/comm/group_table.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "src/error.hpp"
#include "src/tensor/memory_budget.hpp"

namespace meshsim {

GroupTable::GroupTable(int64_t world_size) : world_size_(world_size) {
  std::vector<int64_t> all(static_cast<size_t>(world_size));
  std::iota(all.begin(), all.end(), 0);
  world_ = lists_.intern(all);
  entries_.push_back({0, GroupBatch::of_members(world_), "WORLD"});
  origin_uses_["WORLD"] = 1;
}

GroupTable::~GroupTable() {
  MemoryBudget::release(charged_);
}

void GroupTable::charge(const GroupBatch& batch, const std::string& origin) {
  constexpr uint64_t kBytesPerGroupId = 16;
  // An origin seen for the first time is held twice: in the entry and as a key counting uses.
  const bool new_origin = !origin.empty() && !origin_uses_.contains(origin);
  const uint64_t bytes =
      sizeof(Entry) + (new_origin ? 2 : 1) * origin.size() + kBytesPerGroupId * batch.count();
  MemoryBudget::reserve(bytes, "process groups");
  charged_ += bytes;
}

SharedRankMap GroupTable::identity_map(int64_t n) {
  SharedRankMap& slot = identities_[n];
  if (!slot) {
    std::vector<int64_t> ranks(static_cast<size_t>(n));
    std::iota(ranks.begin(), ranks.end(), 0);
    slot = std::make_shared<const RankMap>(std::move(ranks), world_size_);
  }
  return slot;
}

SharedRankMap GroupTable::rank_map(std::span<const int64_t> ranks) {
  return maps_.intern(
      ranks, [](const RankMap& m) { return m.ranks(); },
      [this](std::span<const int64_t> r) {
        return std::make_shared<const RankMap>(std::vector<int64_t>(r.begin(), r.end()),
                                               world_size_);
      });
}

SharedGroupBatch GroupTable::axis_groups(const Axis& axis, const SharedRankMap& map) {
  SharedGroupBatch& slot = axis_batches_[{map.get(), axis.to_string()}];
  if (!slot) slot = GroupBatch::of_axis(axis, map, world_size_);
  return slot;
}

SharedGroupBatch GroupTable::explicit_group(std::span<const int64_t> sorted_members) {
  const RankList members = lists_.intern(sorted_members);
  SharedGroupBatch& slot = explicit_batches_[members.get()];
  if (!slot) slot = GroupBatch::of_members(members);
  return slot;
}

const GroupTable::Entry* GroupTable::covering(const std::vector<Entry>& entries, int64_t id) {
  const auto it = std::upper_bound(entries.begin(), entries.end(), id,
                                   [](int64_t v, const Entry& e) { return v < e.first; });
  if (it == entries.begin()) return nullptr;
  const Entry& e = *std::prev(it);
  return id < e.end() ? &e : nullptr;
}

void GroupTable::define(int64_t first, SharedGroupBatch batch, int64_t rank, std::string origin) {
  if (batch->count() == 0) return;
  const int64_t end = entries_.back().end();
  if (first == end) {
    charge(*batch, origin);
    const int64_t earlier = origin.empty() ? 0 : origin_uses_[origin]++;
    entries_.push_back({first, std::move(batch), std::move(origin), earlier});
    return;
  }
  MESHSIM_ASSERT(first < end,
                 fmt::format("rank {} names group {} before group {} exists", rank, first, end));
  const Entry* e = covering(entries_, first);
  if (e != nullptr && e->first == first && e->batch->same_groups(*batch)) return;
  std::vector<Entry>& mine = overrides_[rank];
  if (!mine.empty() && mine.back().first == first && mine.back().batch->same_groups(*batch)) return;
  MESHSIM_ASSERT(mine.empty() || mine.back().end() <= first,
                 fmt::format("rank {} names group {} twice", rank, first));
  charge(*batch, origin);
  mine.push_back({first, std::move(batch), std::move(origin)});
}

std::string GroupTable::label(int64_t id) const {
  if (id == 0) return "WORLD";
  const Entry* e = covering(entries_, id);
  if (e == nullptr || e->origin.empty()) return std::to_string(id);
  // Another batch created earlier under the same name (a mesh built twice, unnamed new_groups)
  // makes this one "world.tp(2)", so that labels stay unique.
  const std::string origin = e->earlier_same_origin == 0
                                 ? e->origin
                                 : fmt::format("{}({})", e->origin, e->earlier_same_origin + 1);
  if (e->batch->count() == 1) return origin;
  return fmt::format("{}#{}", origin, id - e->first);
}

std::optional<std::string> GroupTable::mesh_dim(int64_t id, int64_t rank) const {
  const Entry* e = nullptr;
  if (const auto mine = overrides_.find(rank); mine != overrides_.end())
    e = covering(mine->second, id);
  if (e == nullptr && id != 0) e = covering(entries_, id);
  if (e == nullptr || !e->batch->of_mesh_dim()) return std::nullopt;
  // Labels are "mesh.dim", or the dim alone for a mesh named after its only dim.
  const size_t dot = e->origin.rfind('.');
  return dot == std::string::npos ? e->origin : e->origin.substr(dot + 1);
}

std::vector<int64_t> GroupTable::groups_of(int64_t rank) const {
  const auto mine = overrides_.find(rank);
  const std::vector<Entry>* own = mine == overrides_.end() ? nullptr : &mine->second;
  std::vector<int64_t> out;
  for (const Entry& e : entries_) {
    const int64_t g = e.batch->group_of(rank);
    if (g >= 0 && (own == nullptr || covering(*own, e.first + g) == nullptr))
      out.push_back(e.first + g);
  }
  if (own != nullptr) {
    for (const Entry& e : *own)
      if (const int64_t g = e.batch->group_of(rank); g >= 0) out.push_back(e.first + g);
    std::sort(out.begin(), out.end());
  }
  return out;
}

RankList GroupTable::members(int64_t id, int64_t rank) const {
  if (!overrides_.empty()) {
    const auto it = overrides_.find(rank);
    if (it != overrides_.end()) {
      if (const Entry* e = covering(it->second, id)) {
        return e->batch->members(static_cast<size_t>(id - e->first));
      }
    }
  }
  const Entry* e = covering(entries_, id);
  return e == nullptr ? nullptr : e->batch->members(static_cast<size_t>(id - e->first));
}

std::optional<int64_t> GroupTable::find(std::span<const int64_t> sorted_members, int64_t limit,
                                        int64_t rank) const {
  if (sorted_members.empty()) return std::nullopt;
  std::optional<int64_t> best;
  const auto consider = [&](const std::vector<Entry>& entries) {
    for (const Entry& e : entries) {
      const int64_t g = e.batch->group_of(sorted_members.front());
      if (g < 0) continue;
      const int64_t id = e.first + g;
      if (id >= limit || (best && *best >= id)) continue;
      const RankList seen = members(id, rank);
      if (seen && std::ranges::equal(*seen, sorted_members)) best = id;
    }
  };
  consider(entries_);
  if (const auto it = overrides_.find(rank); it != overrides_.end()) consider(it->second);
  return best;
}

}  // namespace meshsim
