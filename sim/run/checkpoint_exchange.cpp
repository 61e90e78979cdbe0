#include "sim/run/checkpoint_exchange.hpp"

namespace meshsim::sim {

CheckpointExchange::Slot& CheckpointExchange::next_slot(const Group& group) {
  GroupCalls& calls = groups_[group.id];
  if (calls.calls_made.empty()) calls.calls_made.assign(static_cast<size_t>(group.size()), 0);
  const int64_t call = calls.calls_made[static_cast<size_t>(group.position)]++;
  return calls.slots.try_emplace(call, group.size()).first->second;
}

void CheckpointExchange::finish(const Group& group) {
  GroupCalls& calls = groups_.at(group.id);
  const int64_t call = calls.calls_made[static_cast<size_t>(group.position)] - 1;
  const auto slot = calls.slots.find(call);
  if (slot != calls.slots.end() && ++slot->second.finished == group.size()) calls.slots.erase(slot);
}

std::optional<std::pair<std::string, std::string>> CheckpointExchange::claim_directory(
    const std::string& dir, const Group& group, const std::string& label) {
  const auto [claim, added] = directories_.try_emplace(dir, Claim{group.id, label});
  if (added || claim->second.group_id == group.id) return std::nullopt;
  std::pair<std::string, std::string> both{claim->second.label, label};
  if (claim->second.group_id > group.id) std::swap(both.first, both.second);
  claim->second = Claim{group.id, label};
  return both;
}

}  // namespace meshsim::sim
