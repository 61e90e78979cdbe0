#include "sim/runtime/call_history.hpp"

namespace meshsim::sim {

void CallHistory::add(const CallSite& site, CollectiveOp op) {
  // Two 32-bit values per word, one multiply and one shift per word: this runs on every call of
  // every rank. Each fold is a bijection of the running hash, so histories that agree so far and
  // then differ in a word differ from there on.
  const auto pair = [](int32_t low, int32_t high) {
    return static_cast<uint64_t>(static_cast<uint32_t>(low)) |
           static_cast<uint64_t>(static_cast<uint32_t>(high)) << 32;
  };
  const auto fold = [](uint64_t h, uint64_t word) {
    h = (h ^ word) * 0x9e3779b97f4a7c15ULL;
    return h ^ (h >> 29);
  };
  static_assert(CallSite::kShownDepth == 4);
  uint64_t h = fold(hash_, pair(site.step, static_cast<int32_t>(op)));
  h = fold(h, site.outer_hash);
  h = fold(h, pair(site.iterations[0], site.iterations[1]));
  hash_ = fold(h, pair(site.iterations[2], site.iterations[3]));
  ++count_;
  recent_[count_ % kRecent] = hash_;
  // The stride is a power of two: a mask instead of a division on every call.
  if ((count_ & (stride_ - 1)) != 0) return;
  if (kept_ == kCheckpoints) {
    // Keep the hashes at even multiples of the stride: (i + 1) * stride for odd i.
    for (size_t i = 0; i < kCheckpoints / 2; ++i) checkpoints_[i] = checkpoints_[2 * i + 1];
    kept_ = kCheckpoints / 2;
    stride_ *= 2;
    if ((count_ & (stride_ - 1)) != 0) return;
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
