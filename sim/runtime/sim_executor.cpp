#include "sim/runtime/sim_executor.hpp"

#include <algorithm>
#include <exception>

#include <fmt/format.h>

#include "sim/runtime/fiber_stack.hpp"
#include "src/error.hpp"
#include "src/tensor/memory_budget.hpp"

namespace meshsim::sim {

void SimExecutor::execute(Meeting& m) {
  // An error while computing the result (out of memory, sizes that do not fit) belongs to the
  // collective: every member gets it, as every rank of a failed NCCL call would. Time still
  // passes, and the watchdog still watches.
  std::exception_ptr failure;
  try {
    compute_results(m);
  } catch (...) {
    forget_unwound_frames();
    failure = std::current_exception();
  }
  advance_clocks(m);
  if (failure) std::rethrow_exception(failure);
}

void SimExecutor::compute_results(Meeting& m) {
  const size_t n = m.size();
  const Signature& sig = m.signature;
  std::vector<Exchange>& ex = m.exchanges;
  inputs_.clear();
  for (const Exchange& e : ex) {
    if (e.input != nullptr) inputs_.push_back(e.input);
  }
  // Each result is computed once and shared out; only all_gather and all_to_all are per rank.
  switch (sig.op) {
    case CollectiveOp::kAllReduce: {
      const Tensor reduced = reduce_tensors(inputs_, *sig.reduce_op);
      for (Exchange& e : ex) *e.output = reduced;
      break;
    }
    case CollectiveOp::kAllGather:
      check_fan_out(sig, n);
      for (Exchange& e : ex) {
        e.outputs->clear();
        for (const Exchange& from : ex) e.outputs->push_back(*from.input);
      }
      break;
    case CollectiveOp::kAllGatherIntoTensor: {
      const Tensor joined = concat_dim0(inputs_);
      for (Exchange& e : ex) *e.output = joined;
      break;
    }
    case CollectiveOp::kReduceScatter: {
      const Tensor reduced = reduce_tensors(inputs_, *sig.reduce_op);
      for (size_t i = 0; i < n; ++i) {
        *ex[i].output = chunk_dim0(reduced, static_cast<int64_t>(n), static_cast<int64_t>(i));
      }
      break;
    }
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kBroadcastObjectList: {
      const auto root_at = std::lower_bound(m.members->begin(), m.members->end(), *sig.root);
      if (root_at == m.members->end() || *root_at != *sig.root) {
        for (size_t i = 0; i < n; ++i) {
          m.errors[i] = fmt::format("broadcast root {} is not in group {}", *sig.root,
                                    display_group(m.group));
        }
        break;
      }
      const Exchange& root = ex[static_cast<size_t>(root_at - m.members->begin())];
      if (sig.op == CollectiveOp::kBroadcast) {
        const Tensor value = *root.input;  // the root's own output is its input
        for (Exchange& e : ex) *e.output = value;
      } else {
        const std::vector<std::string> value = *root.objects_in;
        for (Exchange& e : ex) *e.objects_out = value;
      }
      break;
    }
    case CollectiveOp::kAllToAll:
      check_fan_out(sig, n);
      for (size_t i = 0; i < n; ++i) {
        ex[i].outputs->clear();
        for (const Exchange& from : ex) ex[i].outputs->push_back(from.inputs->at(i));
      }
      break;
    case CollectiveOp::kAllGatherObject: {
      check_fan_out(sig, n);
      std::vector<std::string> all;
      for (const Exchange& e : ex) all.push_back(e.objects_in->at(0));
      for (Exchange& e : ex) *e.objects_out = all;
      break;
    }
    case CollectiveOp::kSend:
    case CollectiveOp::kRecv:
      // The receiver gets the sender's tensor; the sender gets nothing.
      for (size_t i = 0; i < n; ++i) {
        if (m.signature_of(i).op == CollectiveOp::kSend) *ex[1 - i].output = *ex[i].input;
      }
      break;
    case CollectiveOp::kBarrier:
    case CollectiveOp::kNewGroup:
      break;
  }
}

void SimExecutor::check_fan_out(const Signature& sig, size_t n) {
  // Every member ends up holding n results (each a named tensor or string on the rank): n * n
  // entries in all. The data is shared, the entries are not, so they must fit the budget too.
  constexpr double kBytesPerEntry = 128;
  const double bytes = static_cast<double>(n) * static_cast<double>(n) * kBytesPerEntry;
  const uint64_t limit = MemoryBudget::limit();
  const uint64_t in_use = MemoryBudget::in_use();
  if (bytes > static_cast<double>(limit - std::min(limit, in_use))) {
    throw memory_error(fmt::format(
        "{} over {} ranks gives every rank {} results, {} entries in all (about {}), more than "
        "the memory budget leaves (--max-memory {}); all_gather_into_tensor or reduce_scatter "
        "keep one result per rank",
        collective_op_name(sig.op), n, n, n * n, format_bytes(static_cast<uint64_t>(bytes)),
        format_bytes(limit)));
  }
}

void SimExecutor::advance_clocks(Meeting& m) {
  const size_t n = m.size();
  const Signature& sig = m.signature;
  const std::vector<int64_t>& members = *m.members;
  // Everyone leaves together once the last rank has arrived and the data moved. Bytes are counted
  // in double: meta tensors may hold more than int64 can sum.
  double start = 0.0;
  double bytes = 0;
  for (const Exchange& e : m.exchanges) {
    start = std::max(start, e.arrived_at);
    double mine = 0;
    if (e.input != nullptr) mine += static_cast<double>(e.input->nbytes());
    if (e.inputs != nullptr) {
      for (const Tensor& t : *e.inputs) mine += static_cast<double>(t.nbytes());
    }
    bytes = std::max(bytes, mine);
  }
  const double end = start + cost_.latency_s + bytes / cost_.bandwidth_bytes_per_s;
  double waited = 0.0;
  bool fired = false;
  for (size_t i = 0; i < n; ++i) {
    const double w = start - m.exchanges[i].arrived_at;
    fired = fired || w > cost_.timeout_s;
    waited = std::max(waited, w);
    activity_[static_cast<size_t>(members[i])].clock = end;
  }
  if (!fired) return;
  std::vector<int64_t> timed_out, late;
  for (size_t i = 0; i < n; ++i) {
    if (start - m.exchanges[i].arrived_at > cost_.timeout_s) timed_out.push_back(members[i]);
    if (m.exchanges[i].arrived_at == start) late.push_back(members[i]);
  }
  std::sort(timed_out.begin(), timed_out.end());
  std::sort(late.begin(), late.end());
  if (!timeout_) timeout_ = TimeoutRecord{m.group, m.seq, sig, timed_out, late, waited};
  for (size_t i = 0; i < n; ++i) {
    const bool mine = std::binary_search(timed_out.begin(), timed_out.end(), members[i]);
    m.errors[i] =
        mine ? fmt::format(
                   "Watchdog caught collective operation timeout: {} on group {} seq {} "
                   "waited {:.3f} s for rank(s) {} (timeout {} s)",
                   sig.describe(), display_group(m.group), m.seq, start - m.exchanges[i].arrived_at,
                   fmt::join(late, ", "), cost_.timeout_s)
             : fmt::format(
                   "NCCL communicator of group {} was aborted: the watchdog of rank(s) "
                   "{} timed out in {} seq {}",
                   display_group(m.group), fmt::join(timed_out, ", "), sig.describe(), m.seq);
  }
}

}  // namespace meshsim::sim
