#include "sim/runtime/scheduler.hpp"

#include "sim/runtime/crash_handler.hpp"

namespace meshsim::sim {

uint64_t mix64(uint64_t seed, uint64_t n) {
  uint64_t z = seed + (n + 1) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void ScheduleLog::record(int64_t rank) {
  ++decisions;
  // FNV-1a over the rank's eight bytes, low first. A zero byte only multiplies by the prime, so
  // the four high bytes of a rank below 2^32 are one multiplication by its fourth power.
  constexpr uint64_t kPrimeToTheFourth = kFnv1aPrime * kFnv1aPrime * kFnv1aPrime * kFnv1aPrime;
  auto bytes = static_cast<uint64_t>(rank);
  uint64_t h = digest;
  for (int i = 0; i < 4; ++i, bytes >>= 8) h = (h ^ (bytes & 0xff)) * kFnv1aPrime;
  if (bytes == 0) {
    h *= kPrimeToTheFourth;
  } else {
    for (int i = 0; i < 4; ++i, bytes >>= 8) h = (h ^ (bytes & 0xff)) * kFnv1aPrime;
  }
  digest = h;
}

void DeterministicScheduler::awakened(boost::fibers::context* ctx, RankProps& props) noexcept {
  // A new fiber is awakened before its rank is set, so tell ranks from the driver by context type.
  if (ctx->is_context(boost::fibers::type::pinned_context)) {
    others_.push_back(ctx);
  } else {
    ranks_.push_back({ctx, props.rank});
    log_->ready_ranks = ranks_.size();
  }
}

boost::fibers::context* DeterministicScheduler::pick_next() noexcept {
  // The rank that ran until now has switched out: its stack is checked before anyone else runs.
  if (running_ >= 0) crash::check_stack(running_);
  boost::fibers::context* ctx = nullptr;
  if (!ranks_.empty()) {
    size_t index = 0;
    if (policy_ == SchedulePolicy::kRandom) index = mix64(seed_, log_->decisions) % ranks_.size();
    const ReadyRank picked = ranks_.take(index);
    ctx = picked.context;
    log_->ready_ranks = ranks_.size();
    running_ = picked.rank >= 0 ? picked.rank : properties(ctx).rank;
    log_->record(running_);
  } else if (!others_.empty()) {
    ctx = others_.take(0);
    running_ = -1;
  }
  crash::set_running_rank(running_);
  return ctx;
}

bool DeterministicScheduler::has_ready_fibers() const noexcept {
  return !ranks_.empty() || !others_.empty();
}

}  // namespace meshsim::sim
