// Virtual time of the simulated runtime: every member of a meeting leaves once the last has arrived
// and the data has moved (latency + bytes / bandwidth), and NCCL's watchdog fires, in virtual
// seconds, for a member that waited longer than the timeout.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/runtime/meeting.hpp"

namespace meshsim::sim {

struct CostModel {
  double latency_s = 5e-6;
  double bandwidth_bytes_per_s = 100e9;
  // NCCL's watchdog: a rank that waits longer than this (virtual) fails.
  double timeout_s = 600.0;
};

// A collective where some rank waited longer than the timeout.
struct TimeoutRecord {
  std::string group;     // what reports call it (group_label.hpp)
  std::string channel;   // the same, with the direction of a send/recv: "WORLD p2p 0→1"
  std::string group_id;  // c10d's name
  int64_t seq = 0;
  Signature signature;
  std::vector<int64_t> timed_out;  // ranks whose watchdog fired
  std::vector<int64_t> late;       // ranks that arrived last
  double waited_s = 0.0;
};

class VirtualTime {
 public:
  explicit VirtualTime(CostModel cost) : cost_(cost) {}

  // Sets the meeting's end (`leaves_at`: every member's clock as it leaves); a member whose
  // watchdog fired gets its error in `meeting.errors`, and so do the others (their communicator
  // is aborted).
  void advance(Meeting& meeting);
  // The first collective whose watchdog fired.
  const std::optional<TimeoutRecord>& timeout() const { return timeout_; }

 private:
  CostModel cost_;
  std::optional<TimeoutRecord> timeout_;
};

}  // namespace meshsim::sim
