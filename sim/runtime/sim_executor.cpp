#include "sim/runtime/sim_executor.hpp"

#include <algorithm>
#include <exception>

#include <fmt/format.h>

#include "sim/runtime/fiber_stack.hpp"
#include "sim/runtime/group_label.hpp"
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
  time_.advance(m);
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
  // Members whose signatures all agree hold inputs of one dtype and shape.
  const InputLayouts layouts =
      m.differing.empty() ? InputLayouts::kKnownSame : InputLayouts::kCheck;
  switch (sig.op) {
    case CollectiveOp::kAllReduce:
      m.shared_output = reduce_tensors(inputs_, *sig.reduce_op, layouts);
      break;
    case CollectiveOp::kAllGather:
      check_fan_out(sig, n);
      for (Exchange& e : ex) {
        e.outputs->clear();
        for (const Exchange& from : ex) e.outputs->push_back(*from.input);
      }
      break;
    case CollectiveOp::kAllGatherIntoTensor:
      m.shared_output = concat_dim0(inputs_);
      break;
    case CollectiveOp::kReduceScatter: {
      const Tensor reduced = reduce_tensors(inputs_, *sig.reduce_op, layouts);
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
          m.errors[i] =
              fmt::format("broadcast root {} is not in group {}", *sig.root, meeting_label(m));
        }
        break;
      }
      const Exchange& root = ex[static_cast<size_t>(root_at - m.members->begin())];
      if (sig.op == CollectiveOp::kBroadcast) {
        m.shared_output = *root.input;  // the root's own output is its input
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

namespace {

class SimWorldBackend final : public WorldBackend {
 public:
  explicit SimWorldBackend(VirtualTime& time) : executor_(time) {}
  Executor& executor() override { return executor_; }

 private:
  SimExecutor executor_;
};

}  // namespace

void register_sim_backend(BackendRegistry& registry) {
  registry.add({.name = "sim",
                .summary = "simulated collectives with exact results in virtual time",
                .simulated = true,
                .make = [](const BackendContext& context) -> std::unique_ptr<WorldBackend> {
                  return std::make_unique<SimWorldBackend>(context.time);
                }});
}

}  // namespace meshsim::sim
