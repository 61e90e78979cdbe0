// One collective (or one send/recv pair) as the rendezvous assembles it and an executor completes
// it: who has arrived, with what, and where each member's result goes. Indexed by group position.
#pragma once

#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/runtime/shared_signature.hpp"
#include "src/comm/collective.hpp"
#include "src/comm/group_batch.hpp"
#include "src/comm/group_table.hpp"

namespace meshsim::sim {

// What a rank's new_group asks the store barrier for; it lives in the caller's frame.
struct NewGroupRequest {
  const SharedGroupBatch* batch = nullptr;  // the groups this rank asks for
  int64_t first_group = 0;                  // the name its first group gets
  const std::string* origin = nullptr;      // what reports call them
  const std::string* operation = nullptr;   // the call creating them, or empty
};

// What one rank brings to a collective and where its result goes (its call's buffers), and whether
// and when it arrived: one cache line, written on every call and read by whoever completes the
// meeting. The buffers point into the caller's frame, which stays alive while the rank is parked
// in the rendezvous; the rendezvous forgets a rank's buffers when the rank leaves. Where a member
// called from is its activity's site, which holds still while the member is in the meeting.
struct alignas(64) Exchange : CallBuffers {
  bool arrived = false;
  double arrived_at = 0.0;  // the rank's virtual clock when it arrived
};
static_assert(sizeof(Exchange) == 64, "a member's exchange is one cache line");

struct Meeting {
  int64_t group_id = 0;
  std::string group;                   // c10d's name
  const GroupTable* groups = nullptr;  // what reports call the group (group_label.hpp)
  int64_t seq = 0;
  RankList members;
  bool point_to_point = false;
  Signature signature;                    // the first arrival's
  SharedSignature shared_signature;       // the same, as flight-recorder records hold it
  std::map<size_t, Signature> differing;  // members whose signature differs from it
  std::vector<Exchange> exchanges;
  // new_group's store barrier only: what each member asks for, by position (empty otherwise).
  std::vector<const NewGroupRequest*> new_groups;
  size_t arrived = 0;
  size_t first = 0;  // position of the first arrival
  size_t collected = 0;
  bool done = false;
  bool desynced = false;
  bool sites_differ = false;  // some member came from another call site than the first
  // Filled by the executor: one error for every member, or errors for some.
  std::exception_ptr failure;
  std::map<size_t, std::string> errors;
  // Also the executor's, taken by each member as it leaves, while its own frame and activity are
  // in cache (written for every member by the last arrival, they cost each member's cache lines
  // twice): the virtual time all members leave at, and the tensor every member's output gets
  // when all get the same one.
  std::optional<double> leaves_at;
  std::optional<Tensor> shared_output;

  size_t size() const { return exchanges.size(); }
  // Member `pos` has returned to its frame (or unwound it): keep only that it arrived, and when.
  void forget_frame(size_t pos) {
    static_cast<CallBuffers&>(exchanges[pos]) = CallBuffers{};
    if (!new_groups.empty()) new_groups[pos] = nullptr;
  }
  // The signature member `pos` arrived with.
  const Signature& signature_of(size_t pos) const {
    if (differing.empty()) return signature;
    const auto it = differing.find(pos);
    return it == differing.end() ? signature : it->second;
  }
};

// Completes a meeting once every member has arrived with agreeing signatures: the simulated
// executor computes exact results and advances virtual time; a real one launches every member's
// call at once. Fills each member's results through its exchange, or leaves one result for all
// in `shared_output`; sets `leaves_at`; fills `errors` for some members. An exception thrown here
// reaches every member.
class Executor {
 public:
  virtual ~Executor() = default;
  virtual void execute(Meeting& meeting) = 0;
};

}  // namespace meshsim::sim
