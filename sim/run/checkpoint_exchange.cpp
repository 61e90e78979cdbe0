#include "sim/run/checkpoint_exchange.hpp"

namespace meshsim::sim {

CheckpointExchange::Slot& CheckpointExchange::next_slot(int64_t rank) {
  if (calls_made_.empty()) calls_made_.assign(static_cast<size_t>(world_size_), 0);
  const int64_t call = calls_made_[static_cast<size_t>(rank)]++;
  return slots_.try_emplace(call, world_size_).first->second;
}

void CheckpointExchange::finish(int64_t rank) {
  const int64_t call = calls_made_[static_cast<size_t>(rank)] - 1;
  const auto slot = slots_.find(call);
  if (slot != slots_.end() && ++slot->second.finished == world_size_) slots_.erase(slot);
}

}  // namespace meshsim::sim
