#include "src/comm/group_creator.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "src/error.hpp"

namespace meshsim {

std::vector<int64_t> check_group_ranks(std::span<const int64_t> ranks, int64_t world_size) {
  std::vector<int64_t> sorted(ranks.begin(), ranks.end());
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw value_error(fmt::format("ranks list must not contain duplicate entries, got [{}]",
                                  fmt::join(sorted, ", ")));
  }
  if (static_cast<int64_t>(sorted.size()) > world_size) {
    throw value_error(
        "the new group's world size should be less or equal to the world size set by "
        "init_process_group");
  }
  for (int64_t r : sorted) {
    if (r < 0 || r >= world_size) {
      throw value_error(
          fmt::format("Rank {} is out of range. Valid ranks are 0 to {} (world_size={})", r,
                      world_size - 1, world_size));
    }
  }
  return sorted;
}

GroupCreator::GroupCreator(int64_t rank, std::shared_ptr<GroupTable> table)
    : rank_(rank), table_(std::move(table)) {}

std::optional<std::string> GroupCreator::create(const SharedGroupBatch& batch, std::string label) {
  const int64_t first = next_id_;
  creating_ = std::move(label);
  store_barrier(batch, first);
  next_id_ += static_cast<int64_t>(batch->count());
  const int64_t mine = batch->group_of(rank_);
  if (mine < 0) return std::nullopt;
  return std::to_string(first + mine);
}

std::optional<std::string> GroupCreator::new_group(std::span<const int64_t> ranks) {
  const std::vector<int64_t> members = check_group_ranks(ranks, world_size());
  return create(table_->explicit_group(members),
                label_prefix_.empty() ? std::string("new_group") : label_prefix_);
}

std::optional<std::string> GroupCreator::new_groups(const Axis& axis, const SharedRankMap& map,
                                                    const std::string& dim_name) {
  const SharedGroupBatch batch = table_->axis_groups(axis, map);
  std::string label = label_prefix_;
  // "world.tp"; a mesh named after its only dim ("spmd" flattened to "spmd") is just "spmd".
  if (!dim_name.empty() && dim_name != label) label += (label.empty() ? "" : ".") + dim_name;
  if (label.empty()) label = "new_group";
  std::optional<std::string> mine;
  if (batch->count() > 0) mine = create(batch, std::move(label));
  if (!batch->invalid().empty()) throw value_error(batch->invalid());
  return mine;
}

RankList GroupCreator::group_ranks(const std::string& name) const {
  int64_t id = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), id);
  if (ec != std::errc() || end != name.data() + name.size() || id < 0 || id >= next_id_) {
    return nullptr;
  }
  return table_->members(id, rank_);
}

std::optional<std::string> GroupCreator::find_group(std::span<const int64_t> ranks) const {
  std::vector<int64_t> sorted(ranks.begin(), ranks.end());
  std::sort(sorted.begin(), sorted.end());
  const std::optional<int64_t> id = table_->find(sorted, next_id_, rank_);
  if (!id) return std::nullopt;
  return std::to_string(*id);
}

}  // namespace meshsim
