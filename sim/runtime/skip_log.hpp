// The calls a rank's program reached but did not make because a step's `when` was false: the
// evidence that lets a hang report say "rank 24 did not post the send at line 40 in i=1" instead
// of blaming the ranks that wait for it. Bounded per rank, whatever the loops run.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "sim/runtime/call_site.hpp"
#include "src/comm/collective.hpp"

namespace meshsim::sim {

// A call a step would make: its op, its group, and for send/recv the global rank of its peer.
struct PlannedCall {
  CollectiveOp op = CollectiveOp::kBarrier;
  int64_t group_id = -1;  // -1: not known on this rank (its mesh is not there)
  int64_t peer = -1;      // -1: not a send/recv, or a peer outside the world
};

class SkipLog {
 public:
  // Distinct (step, group, peer) kept; skips of further ones are not recorded.
  static constexpr size_t kMaxTallies = 64;

  // Every skip of one step with one group and peer.
  struct Tally {
    PlannedCall call;
    CallSite first;
    CallSite last;
    int64_t count = 0;
    uint64_t calls_before_first = 0;  // the calls the rank had made (CallHistory) at each
    uint64_t calls_before_last = 0;
    // Skips between two runs of the step (run, skip, run): a `when` false once inside a stretch
    // of runs, which first and last do not show when the step's rule skips it elsewhere too.
    int64_t isolated = 0;
    CallSite first_isolated;  // the first of them
    uint64_t calls_before_isolated = 0;
  };

  // The rank ran the communicating step at `site`, or skipped it (its `when` false) planning
  // `call`, having made `calls_before` calls.
  void ran(const CallSite& site);
  void add(const PlannedCall& call, const CallSite& site, uint64_t calls_before);
  // Whether this rank skips the step at `site` more often than it runs it.
  bool usually_skips(const CallSite& site) const {
    const Count c = count(site);
    return c.skipped > c.ran;
  }
  struct Count {
    uint32_t ran = 0;
    uint32_t skipped = 0;
  };
  // This rank's runs and skips of the step at `site`, every iteration together.
  Count count(const CallSite& site) const {
    const auto i = static_cast<size_t>(site.step);
    return site.step >= 0 && i < counts_.size() ? counts_[i] : Count{};
  }
  const std::vector<Tally>& tallies() const { return tallies_; }
  // The skips of the step at `site` (any iteration) on `group_id` (or any group for -1), or null.
  const Tally* step(const CallSite& site, int64_t group_id) const;
  // Whether this rank's `when` was false at exactly `site` (that step and iteration) on
  // `group_id` (-1: any): it is the first or last skip kept, or lies between them on a rank that
  // never ran the step.
  bool skipped(const CallSite& site, int64_t group_id) const;
  // Whether skipped(site, -1), or a probed second run recorded a skip at `site`.
  bool skipped_or_probed(const CallSite& site) const;
  // Whether this rank, if its program reached `site` with at least `after_calls` calls made,
  // surely ran it: a probe from there on recorded every skip and not this one; it never skipped
  // that step; or only before or after `site` in the same pass of the loops around it.
  // (skipped() can be false for an iteration between the first and last skips kept.)
  bool surely_ran(const CallSite& site, uint64_t after_calls) const;
  // Record every skip made with at least `from` calls made (from where a hang report found this
  // rank's history departing from its peers'), the first kMaxProbed of them: a deterministic
  // second run names the skip that tallies merged with others.
  static constexpr size_t kMaxProbed = 64;
  struct Probed {
    PlannedCall call;
    CallSite site;
    uint64_t calls_before = 0;
  };
  void probe(uint64_t from) { probe_ = from; }
  const std::vector<Probed>& probed() const { return probed_; }
  bool probing() const { return probe_.has_value(); }
  // The skipped sends (op kSend) or recvs to `peer`, every step, in the order first skipped.
  std::vector<const Tally*> with_peer(CollectiveOp op, int64_t peer) const;

 private:
  // The last passes of one step in one pass of its outer loops: whether the latest was a skip
  // that came right after a run, and its tally (whose `last` it is).
  struct Trail {
    uint64_t outer = 0;  // the iterations of the loops around the innermost, hashed
    int32_t tally = -1;  // -1: not kept
    bool last_ran = false;
    bool last_skipped = false;
    bool skip_after_run = false;
  };
  Trail* bump(const CallSite& site, bool skipped);  // null for a call outside the program

  std::vector<Tally> tallies_;  // grows only as far as the rank skips
  std::vector<Count> counts_;   // by step index, up to the last communicating step run
  std::vector<Trail> trails_;   // the same
  std::optional<uint64_t> probe_;
  std::vector<Probed> probed_;
};

// Whether `site` is one of the iterations a tally counted: its first or last (the ones kept).
inline bool skipped_at(const SkipLog::Tally& t, const CallSite& site) {
  return t.first == site || t.last == site;
}

}  // namespace meshsim::sim
