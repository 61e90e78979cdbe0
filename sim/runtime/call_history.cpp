#include "sim/runtime/call_history.hpp"

namespace meshsim::sim {

void CallHistory::add(const CallSite& site, CollectiveOp op) {
  uint64_t h = CallSite::mix(static_cast<uint64_t>(site.step), site.outer_hash);
  h = CallSite::mix(h, static_cast<uint64_t>(op));
  for (const int32_t i : site.iterations) h = CallSite::mix(h, static_cast<uint32_t>(i));
  hash_ = CallSite::mix(hash_, h);
  ++count_;
  recent_[count_ % kRecent] = hash_;
  if (count_ % stride_ != 0) return;
  if (kept_ == kCheckpoints) {
    // Keep the hashes at even multiples of the stride: (i + 1) * stride for odd i.
    for (size_t i = 0; i < kCheckpoints / 2; ++i) checkpoints_[i] = checkpoints_[2 * i + 1];
    kept_ = kCheckpoints / 2;
    stride_ *= 2;
    if (count_ % stride_ != 0) return;
  }
  checkpoints_[kept_++] = hash_;
}

std::optional<uint64_t> CallHistory::hash_at(uint64_t calls) const {
  if (calls == count_) return hash_;
  if (calls == 0) return 0;
  if (calls < count_ && count_ - calls < kRecent) return recent_[calls % kRecent];
  if (calls % stride_ != 0 || calls / stride_ > kept_) return std::nullopt;
  return checkpoints_[calls / stride_ - 1];
}

}  // namespace meshsim::sim
