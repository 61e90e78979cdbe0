// A rank's calls in order, as a rolling hash with checkpoints: what lets a hang report compare the
// histories of ranks that run the same program (the dp peers of a pipeline stage) and say where
// one departs from the others, in bounded memory however long the run.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "sim/runtime/call_site.hpp"
#include "src/comm/collective.hpp"

namespace meshsim::sim {

class CallHistory {
 public:
  // Hashes kept, evenly spaced: when they fill up, every other one is dropped and the spacing
  // doubles, so checkpoints always cover the whole history.
  static constexpr size_t kCheckpoints = 32;
  // The hashes after each of the newest calls, too: ranks that stopped a few calls apart are
  // compared where they stopped.
  static constexpr size_t kRecent = 8;

  // The rank entered a collective or send/recv `op` at `site` (its group is left out: peers call
  // on their own groups).
  void add(const CallSite& site, CollectiveOp op);
  // Calls made so far.
  uint64_t count() const { return count_; }
  // Calls between two checkpoints (a power of two).
  uint64_t stride() const { return stride_; }
  // The hash of the first `calls` calls, when a checkpoint (or the present) holds it.
  std::optional<uint64_t> hash_at(uint64_t calls) const;

 private:
  // What every call writes first, the checkpoints (written at every stride-th call) last.
  uint64_t count_ = 0;
  uint64_t hash_ = 0;
  uint64_t stride_ = 1;
  size_t kept_ = 0;
  std::array<uint64_t, kRecent> recent_{};  // [c % kRecent]: the hash after c calls, the newest
  std::array<uint64_t, kCheckpoints> checkpoints_{};  // [i]: the hash after (i + 1) * stride_ calls
};

}  // namespace meshsim::sim
