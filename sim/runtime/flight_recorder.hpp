// A rank's last collectives, as NCCL's Flight Recorder keeps them: for each, the group, its
// sequence numbers, the signature, the call site (scenario line and loop iterations) and how it
// ended. Hang reports show the newest few; `run --fr-dump` writes as many as the buffer holds in
// PyTorch's dump format (docs/flight-recorder.md).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "sim/runtime/call_site.hpp"
#include "sim/runtime/shared_signature.hpp"
#include "src/comm/collective.hpp"
#include "src/enum_names.hpp"
#include "src/tensor/memory_budget.hpp"

namespace meshsim::sim {

struct CollectiveRecord {
  enum class State : uint8_t { kWaiting, kCompleted, kFailed, kAborted };
  int64_t group_id = 0;
  int64_t seq = 0;    // the meeting's: per group for collectives, per direction for send/recv
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

// The newest records of one rank, in a ring that grows only as far as it is used (a rank that
// calls one collective holds one record). A recorder made for a dump also counts the rank's
// calls per group, as c10d numbers them, and holds its ring's growth past kReportDepth records
// against the MemoryBudget.
//
// A record is written on every call and its slot is cold by then (a thousand other ranks ran
// since this one's last call), so slots are kept small: the signature is shared with the rest of
// the meeting, and how the newest call ended is kept beside the ring. Only a call that did not
// complete writes its slot a second time; an older slot still marked waiting completed.
class FlightRecorder {
 public:
  // What hang reports show of each rank, and the capacity unless a dump asks for more.
  static constexpr size_t kReportDepth = 8;

  // The rank's calls on one group, dropped ones included: collectives, and sends and recvs
  // (whatever their peer).
  struct GroupCalls {
    int64_t group_id = 0;
    int64_t collectives = 0;
    int64_t p2p = 0;
  };

  // A hang report's recorder.
  FlightRecorder() = default;
  // A dump's: `capacity` records (TORCH_FR_BUFFER_SIZE), and the calls per group counted.
  static FlightRecorder for_dump(size_t capacity) {
    FlightRecorder r;
    r.capacity_ = capacity ? capacity : 1;
    r.dump_ = std::make_unique<DumpState>();
    return r;
  }
  // A copy is what a hang report keeps: the newest kReportDepth records, as a report's recorder
  // (a dump's whole ring, copied per rank, would double its memory outside the budget).
  FlightRecorder(const FlightRecorder& other)
      : records_(other.newest_slots(kReportDepth)),
        newest_state_(other.newest_state_),
        total_(other.total_) {
    // Those are oldest first; a ring that wrapped holds record i at i % capacity.
    if (total_ > records_.size()) {
      capacity_ = records_.size();
      const auto shift = static_cast<std::ptrdiff_t>(total_ % capacity_);
      std::rotate(records_.begin(), records_.end() - shift, records_.end());
    }
    if (total_ > 0) newest_ = (total_ - 1) % capacity_;
  }
  FlightRecorder& operator=(const FlightRecorder& other) {
    if (this != &other) *this = FlightRecorder(other);
    return *this;
  }
  FlightRecorder(FlightRecorder&&) noexcept = default;
  FlightRecorder& operator=(FlightRecorder&&) noexcept = default;

  // Makes room for the next record: call before a meeting changes any state, since a ring
  // growing past kReportDepth may throw MemoryError here.
  void make_room() {
    if (!dump_ || records_.size() < kReportDepth || records_.size() < records_.capacity() ||
        records_.size() >= capacity_)
      return;
    const size_t grown = std::min(capacity_, records_.size() * 2);
    // At worst every record holds a signature of its own.
    dump_->held = MemoryReservation((grown - kReportDepth) * (sizeof(Slot) + sizeof(Signature)),
                                    "flight recorder buffer (--fr-buffer-size)");
    records_.reserve(grown);
  }
  // A call the rank entered (`peer`: -1 for a collective), still waiting.
  void enter(int64_t group_id, int64_t seq, int64_t peer, SharedSignature signature,
             const CallSite& site, double entered_at,
             CollectiveRecord::State state = CollectiveRecord::State::kWaiting) {
    if (dump_) ++(peer >= 0 ? calls_on(group_id).p2p : calls_on(group_id).collectives);
    Slot slot{std::move(signature), group_id, seq, entered_at, site, peer, state};
    if (records_.size() < capacity_) {
      newest_ = records_.size();
      records_.push_back(std::move(slot));
    } else {
      newest_ = newest_ + 1 == capacity_ ? 0 : newest_ + 1;
      records_[newest_] = std::move(slot);
    }
    newest_state_ = state;
    ++total_;
  }
  void enter(const CollectiveRecord& r) {
    enter(r.group_id, r.seq, r.peer, SharedSignature(r.signature), r.site, r.entered_at, r.state);
  }
  // How the newest record ended.
  void settle(CollectiveRecord::State state) {
    if (total_ == 0) return;
    newest_state_ = state;
    if (state != CollectiveRecord::State::kCompleted) records_[newest_].state = state;
  }
  // The newest `newest` records kept, oldest first.
  std::vector<CollectiveRecord> records(size_t newest = SIZE_MAX) const {
    const size_t n = std::min(newest, records_.size());
    std::vector<CollectiveRecord> out;
    out.reserve(n);
    for (uint64_t i = total_ - n; i < total_; ++i) {
      const Slot& s = records_[i % capacity_];
      CollectiveRecord::State state = s.state;
      if (i + 1 == total_) {
        state = newest_state_;
      } else if (state == CollectiveRecord::State::kWaiting) {
        state = CollectiveRecord::State::kCompleted;
      }
      out.push_back({s.group_id, s.seq, s.peer, *s.signature, s.site, s.entered_at, state});
    }
    return out;
  }
  // Every collective the rank entered, including those the ring has dropped.
  uint64_t total() const { return total_; }
  // A dump's recorder: the rank's calls per group (empty otherwise).
  std::vector<GroupCalls> group_calls() const {
    return dump_ ? dump_->calls : std::vector<GroupCalls>{};
  }

 private:
  struct Slot {
    SharedSignature signature;
    int64_t group_id = 0;
    int64_t seq = 0;
    double entered_at = 0.0;
    CallSite site;
    int64_t peer = -1;
    CollectiveRecord::State state =
        CollectiveRecord::State::kWaiting;  // as entered, or not completed
  };

  struct DumpState {
    std::vector<GroupCalls> calls;
    MemoryReservation held;
  };
  std::vector<Slot> newest_slots(size_t newest) const {
    const size_t n = std::min(newest, records_.size());
    std::vector<Slot> out;
    out.reserve(n);
    for (uint64_t i = total_ - n; i < total_; ++i) out.push_back(records_[i % capacity_]);
    return out;
  }
  // A rank calls on a handful of groups: a linear search beats a map.
  GroupCalls& calls_on(int64_t group_id) {
    for (GroupCalls& c : dump_->calls)
      if (c.group_id == group_id) return c;
    return dump_->calls.emplace_back(GroupCalls{group_id});
  }

  size_t capacity_ = kReportDepth;
  std::vector<Slot> records_;
  size_t newest_ = 0;  // the newest record's slot: (total_ - 1) % capacity_, without dividing
  CollectiveRecord::State newest_state_ = CollectiveRecord::State::kWaiting;
  uint64_t total_ = 0;
  std::unique_ptr<DumpState> dump_;  // only in a recorder made for a dump
};

}  // namespace meshsim::sim
