#include "sim/runtime/backend_decorators.hpp"

#include <fmt/format.h>

#include "sim/runtime/fiber_stack.hpp"
#include "src/error.hpp"

namespace meshsim::sim {

namespace {

Signature with_reduce_op(Signature s, ReduceOp op) {
  s.reduce_op = op;
  return s;
}

Signature with_root(Signature s, int64_t root) {
  s.root = root;
  return s;
}

}  // namespace

template <typename Call>
auto ForwardingBackend::around(const Signature& signature, const Group& group, Call&& call) {
  before(signature, group);
  try {
    if constexpr (std::is_void_v<decltype(call())>) {
      call();
      after(signature, group);
    } else {
      auto out = call();
      after(signature, group);
      return out;
    }
  } catch (const Error&) {
    forget_unwound_frames();  // ASan: the frames the exception left may be reused by after()
    after(signature, group);
    throw;
  }
}

void ForwardingBackend::all_reduce(Tensor& tensor, ReduceOp op, const Group& group) {
  around(with_reduce_op(Signature::of(CollectiveOp::kAllReduce, &tensor), op), group,
         [&] { inner_->all_reduce(tensor, op, group); });
}

std::vector<Tensor> ForwardingBackend::all_gather(const Tensor& tensor, const Group& group) {
  return around(Signature::of(CollectiveOp::kAllGather, &tensor), group,
                [&] { return inner_->all_gather(tensor, group); });
}

Tensor ForwardingBackend::all_gather_into_tensor(const Tensor& tensor, const Group& group) {
  return around(Signature::of(CollectiveOp::kAllGatherIntoTensor, &tensor), group,
                [&] { return inner_->all_gather_into_tensor(tensor, group); });
}

Tensor ForwardingBackend::reduce_scatter(const Tensor& input, ReduceOp op, const Group& group) {
  return around(with_reduce_op(Signature::of(CollectiveOp::kReduceScatter, &input), op), group,
                [&] { return inner_->reduce_scatter(input, op, group); });
}

void ForwardingBackend::broadcast(Tensor& tensor, int64_t root, const Group& group) {
  around(with_root(Signature::of(CollectiveOp::kBroadcast, &tensor), root), group,
         [&] { inner_->broadcast(tensor, root, group); });
}

std::vector<Tensor> ForwardingBackend::all_to_all(const std::vector<Tensor>& inputs,
                                                  const Group& group) {
  return around(Signature::of(CollectiveOp::kAllToAll, inputs.empty() ? nullptr : &inputs[0]),
                group, [&] { return inner_->all_to_all(inputs, group); });
}

void ForwardingBackend::barrier(const Group& group) {
  around(Signature::of(CollectiveOp::kBarrier), group, [&] { inner_->barrier(group); });
}

void ForwardingBackend::send(const Tensor& tensor, int64_t dst, const Group& group) {
  around(with_root(Signature::of(CollectiveOp::kSend, &tensor), dst), group,
         [&] { inner_->send(tensor, dst, group); });
}

Tensor ForwardingBackend::recv(const Tensor& like, int64_t src, const Group& group) {
  return around(with_root(Signature::of(CollectiveOp::kRecv, &like), src), group,
                [&] { return inner_->recv(like, src, group); });
}

std::vector<std::string> ForwardingBackend::broadcast_object_list(std::vector<std::string> objects,
                                                                  int64_t root,
                                                                  const Group& group) {
  return around(with_root(Signature::of(CollectiveOp::kBroadcastObjectList), root), group,
                [&] { return inner_->broadcast_object_list(std::move(objects), root, group); });
}

std::vector<std::string> ForwardingBackend::all_gather_object(const std::string& object,
                                                              const Group& group) {
  return around(Signature::of(CollectiveOp::kAllGatherObject), group,
                [&] { return inner_->all_gather_object(object, group); });
}

void FaultInjectingBackend::before(const Signature& signature, const Group&) {
  const int64_t k = ++calls_;
  for (const Fault* f : faults_at(faults_, rank_, Fault::Trigger::kCollective, k)) {
    switch (f->kind) {
      case Fault::Kind::kStall:
        activity_.clock += f->seconds;
        break;
      case Fault::Kind::kCrash:
        throw InjectedCrash{fmt::format("injected crash entering {} ({}, {})", signature.describe(),
                                        f->describe(), f->where.to_string())};
      case Fault::Kind::kStackOverflow:
        overflow_fiber_stack();
      case Fault::Kind::kBackendError:
        throw runtime_error(fmt::format(
            "DistBackendError: NCCL error in {}: unhandled system error (injected: {}, {})",
            signature.describe(), f->describe(), f->where.to_string()));
    }
  }
}

void TracingBackend::after(const Signature& signature, const Group& group) {
  // A call refused before it met anyone (bad arguments, not a member) is not a collective.
  if (activity_.meetings_entered == meetings_before_) return;
  trace_.meeting(rank_, activity_.site, signature, group.id, group.size(), activity_.last_seq,
                 entered_at_, activity_.clock);
}

}  // namespace meshsim::sim
