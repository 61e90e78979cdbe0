#include "sim/runtime/virtual_time.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sim/runtime/group_label.hpp"

namespace meshsim::sim {

void VirtualTime::advance(Meeting& m) {
  const size_t n = m.size();
  const Signature& sig = m.signature;
  const std::vector<int64_t>& members = *m.members;
  // Everyone leaves together once the last rank has arrived and the data moved. Bytes are counted
  // in double: meta tensors may hold more than int64 can sum.
  // Members whose signatures agree bring inputs of one size (their dtype and shape are in it), so
  // one member's tells, without reading every member's tensor (each in another rank's frame).
  const bool same_inputs = m.differing.empty() && sig.op != CollectiveOp::kAllToAll;
  double start = 0.0;
  double bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const Exchange& e = m.exchanges[i];
    start = std::max(start, e.arrived_at);
    if (same_inputs && i > 0) continue;
    double mine = 0;
    if (e.input != nullptr) mine += static_cast<double>(e.input->nbytes());
    if (e.inputs != nullptr) {
      for (const Tensor& t : *e.inputs) mine += static_cast<double>(t.nbytes());
    }
    bytes = std::max(bytes, mine);
  }
  // Each member takes it as it leaves (Rendezvous::leave).
  m.leaves_at = start + cost_.latency_s + bytes / cost_.bandwidth_bytes_per_s;
  double waited = 0.0;
  bool fired = false;
  for (size_t i = 0; i < n; ++i) {
    const double w = start - m.exchanges[i].arrived_at;
    fired = fired || w > cost_.timeout_s;
    waited = std::max(waited, w);
  }
  if (!fired) return;
  std::vector<int64_t> timed_out, late;
  for (size_t i = 0; i < n; ++i) {
    if (start - m.exchanges[i].arrived_at > cost_.timeout_s) timed_out.push_back(members[i]);
    if (m.exchanges[i].arrived_at == start) late.push_back(members[i]);
  }
  std::sort(timed_out.begin(), timed_out.end());
  std::sort(late.begin(), late.end());
  const std::string label = meeting_label(m);
  if (!timeout_) {
    timeout_ =
        TimeoutRecord{meeting_group_label(m), label, m.group, m.seq, sig, timed_out, late, waited};
  }
  for (size_t i = 0; i < n; ++i) {
    const bool mine = std::binary_search(timed_out.begin(), timed_out.end(), members[i]);
    m.errors[i] = mine ? fmt::format(
                             "Watchdog caught collective operation timeout: {} on group {} seq {} "
                             "waited {:.3f} s for rank(s) {} (timeout {} s)",
                             sig.describe(), label, m.seq, start - m.exchanges[i].arrived_at,
                             fmt::join(late, ", "), cost_.timeout_s)
                       : fmt::format(
                             "NCCL communicator of group {} was aborted: the watchdog of rank(s) "
                             "{} timed out in {} seq {}",
                             label, fmt::join(timed_out, ", "), sig.describe(), m.seq);
  }
}

}  // namespace meshsim::sim
