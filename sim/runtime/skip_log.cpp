#include "sim/runtime/skip_log.hpp"

#include <algorithm>

namespace meshsim::sim {

SkipLog::Trail* SkipLog::bump(const CallSite& site, bool skipped) {
  if (site.step < 0) return nullptr;
  const auto i = static_cast<size_t>(site.step);
  if (i >= counts_.size()) {
    counts_.resize(i + 1);
    trails_.resize(i + 1);
  }
  // A rank makes at most LoopMark::kMaxCount (2^24) loop passes: no count overflows.
  ++(skipped ? counts_[i].skipped : counts_[i].ran);
  // A new pass of the outer loops starts the trail again: the innermost loop's first skip is not
  // between two runs of it.
  const size_t shown = std::min(site.depth(), CallSite::kShownDepth);
  uint64_t outer = site.outer_hash;
  for (size_t k = 0; k + 1 < shown; ++k)
    outer = CallSite::mix(outer, static_cast<uint32_t>(site.iterations[k]));
  Trail& trail = trails_[i];
  if (trail.outer != outer) trail = {outer, -1, false, false, false};
  return &trail;
}

void SkipLog::ran(const CallSite& site) {
  Trail* trail = bump(site, false);
  if (trail == nullptr) return;
  if (trail->last_skipped && trail->skip_after_run && trail->tally >= 0) {
    Tally& t = tallies_[static_cast<size_t>(trail->tally)];
    if (t.isolated++ == 0) {
      t.first_isolated = t.last;
      t.calls_before_isolated = t.calls_before_last;
    }
  }
  trail->last_skipped = false;
  trail->last_ran = true;
}

void SkipLog::add(const PlannedCall& call, const CallSite& site, uint64_t calls_before) {
  Trail* trail = bump(site, true);
  if (trail != nullptr) *trail = {trail->outer, -1, false, true, trail->last_ran};
  if (probe_ && calls_before >= *probe_ && probed_.size() < kMaxProbed) {
    probed_.push_back({call, site, calls_before});
  }
  for (size_t i = 0; i < tallies_.size(); ++i) {
    Tally& t = tallies_[i];
    if (t.first.same_step(site) && t.call.group_id == call.group_id && t.call.peer == call.peer) {
      t.last = site;
      t.calls_before_last = calls_before;
      ++t.count;
      if (trail != nullptr) trail->tally = static_cast<int32_t>(i);
      return;
    }
  }
  if (tallies_.size() == kMaxTallies) return;
  if (trail != nullptr) trail->tally = static_cast<int32_t>(tallies_.size());
  tallies_.push_back({call, site, site, 1, calls_before, calls_before, 0, {}, 0});
}

const SkipLog::Tally* SkipLog::step(const CallSite& site, int64_t group_id) const {
  for (const Tally& t : tallies_) {
    if (t.first.same_step(site) && (group_id < 0 || t.call.group_id == group_id)) return &t;
  }
  return nullptr;
}

bool SkipLog::skipped(const CallSite& site, int64_t group_id) const {
  const Tally* t = step(site, group_id);
  if (t == nullptr) return false;
  if (skipped_at(*t, site) || (t->isolated > 0 && t->first_isolated == site)) return true;
  // Iterations of one step compare in loop order while the loops further out agree.
  const bool same_outer =
      t->first.outer_hash == site.outer_hash && t->last.outer_hash == site.outer_hash;
  return count(site).ran == 0 && same_outer && t->first.iterations <= site.iterations &&
         site.iterations <= t->last.iterations;
}

bool SkipLog::skipped_or_probed(const CallSite& site) const {
  return skipped(site, -1) || std::any_of(probed_.begin(), probed_.end(),
                                          [&](const Probed& p) { return p.site == site; });
}

bool SkipLog::surely_ran(const CallSite& site, uint64_t after_calls) const {
  const Count c = count(site);
  if (c.skipped == 0) return true;
  if (probe_ && *probe_ <= after_calls && probed_.size() < kMaxProbed) {
    return std::none_of(probed_.begin(), probed_.end(),
                        [&](const Probed& p) { return p.site == site; });
  }
  // One tally holds every skip of the step, and all of them come before or after `site` in this
  // pass of the loops.
  const Tally* t = step(site, -1);
  if (t == nullptr || t->count != c.skipped) return false;
  return (t->first.outer_hash == site.outer_hash && site.iterations < t->first.iterations) ||
         (t->last.outer_hash == site.outer_hash && t->last.iterations < site.iterations);
}

std::vector<const SkipLog::Tally*> SkipLog::with_peer(CollectiveOp op, int64_t peer) const {
  std::vector<const Tally*> out;
  for (const Tally& t : tallies_) {
    if (t.call.op == op && t.call.peer == peer) out.push_back(&t);
  }
  return out;
}

}  // namespace meshsim::sim
