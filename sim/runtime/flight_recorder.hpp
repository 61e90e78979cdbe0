// A rank's last collectives, as NCCL's Flight Recorder keeps them: for each, the group, its
// sequence number, the signature, the call site (scenario line and loop iterations) and how it
// ended. Hang reports show them.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/runtime/call_site.hpp"
#include "src/comm/collective.hpp"
#include "src/enum_names.hpp"

namespace meshsim::sim {

struct CollectiveRecord {
  enum class State : uint8_t { kWaiting, kCompleted, kFailed, kAborted };
  int64_t group_id = 0;
  int64_t seq = 0;
  int64_t peer = -1;  // send/recv: the other rank
  Signature signature;
  CallSite site;            // the scenario step that called it, and its loop iterations
  double entered_at = 0.0;  // virtual seconds
  State state = State::kWaiting;
};

inline constexpr EnumName<CollectiveRecord::State> kRecordStateNames[] = {
    {CollectiveRecord::State::kWaiting, "waiting"},
    {CollectiveRecord::State::kCompleted, "completed"},
    {CollectiveRecord::State::kFailed, "failed"},
    {CollectiveRecord::State::kAborted, "aborted"},
};

inline std::string_view record_state_name(CollectiveRecord::State s) {
  return name_in(kRecordStateNames, s);
}

// The newest kCapacity records of one rank, in a ring that grows only as far as it is used (a
// rank that calls one collective holds one record).
class FlightRecorder {
 public:
  static constexpr size_t kCapacity = 8;

  void enter(const CollectiveRecord& record) {
    if (records_.size() < kCapacity) {
      records_.push_back(record);
    } else {
      records_[total_ % kCapacity] = record;
    }
    ++total_;
  }
  // How the newest record ended.
  void settle(CollectiveRecord::State state) {
    if (total_ > 0) records_[(total_ - 1) % kCapacity].state = state;
  }
  // Oldest first.
  std::vector<CollectiveRecord> records() const {
    std::vector<CollectiveRecord> out;
    out.reserve(records_.size());
    const size_t start = records_.size() < kCapacity ? 0 : total_ % kCapacity;
    for (size_t i = 0; i < records_.size(); ++i)
      out.push_back(records_[(start + i) % records_.size()]);
    return out;
  }
  // Every collective the rank entered, including those the ring has dropped.
  uint64_t total() const { return total_; }

 private:
  std::vector<CollectiveRecord> records_;
  uint64_t total_ = 0;
};

}  // namespace meshsim::sim
