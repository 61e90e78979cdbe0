#include "sim/runtime/rendezvous_backend.hpp"

#include <fmt/format.h>

#include "src/error.hpp"

namespace meshsim::sim {

void RendezvousBackend::all_reduce(Tensor& tensor, ReduceOp op, const Group& group) {
  Signature s = Signature::of(CollectiveOp::kAllReduce, &tensor);
  s.reduce_op = op;
  meet(group, s, {.input = &tensor, .output = &tensor});
}

std::vector<Tensor> RendezvousBackend::all_gather(const Tensor& tensor, const Group& group) {
  std::vector<Tensor> out;
  meet(group, Signature::of(CollectiveOp::kAllGather, &tensor),
       {.input = &tensor, .outputs = &out});
  return out;
}

Tensor RendezvousBackend::all_gather_into_tensor(const Tensor& tensor, const Group& group) {
  Tensor out;
  meet(group, Signature::of(CollectiveOp::kAllGatherIntoTensor, &tensor),
       {.input = &tensor, .output = &out});
  return out;
}

Tensor RendezvousBackend::reduce_scatter(const Tensor& input, ReduceOp op, const Group& group) {
  Signature s = Signature::of(CollectiveOp::kReduceScatter, &input);
  s.reduce_op = op;
  Tensor out;
  meet(group, s, {.input = &input, .output = &out});
  return out;
}

void RendezvousBackend::broadcast(Tensor& tensor, int64_t root, const Group& group) {
  Signature s = Signature::of(CollectiveOp::kBroadcast, &tensor);
  s.root = root;
  meet(group, s, {.input = &tensor, .output = &tensor});
}

std::vector<Tensor> RendezvousBackend::all_to_all(const std::vector<Tensor>& inputs,
                                                  const Group& group) {
  if (static_cast<int64_t>(inputs.size()) != group.size()) {
    throw runtime_error("all_to_all needs one input tensor per group rank");
  }
  std::vector<Tensor> out;
  meet(group, Signature::of(CollectiveOp::kAllToAll, &inputs.at(0)),
       {.inputs = &inputs, .outputs = &out});
  return out;
}

void RendezvousBackend::barrier(const Group& group) {
  meet(group, Signature::of(CollectiveOp::kBarrier), {});
}

namespace {

// c10d refuses point-to-point with oneself before anything is sent (it would never complete).
void check_not_self(int64_t rank, int64_t peer, std::string_view kind) {
  if (rank == peer) {
    throw value_error(fmt::format(
        "Invalid {0} rank: {0} rank should not be the same as the rank of the current process.",
        kind));
  }
}

}  // namespace

void RendezvousBackend::send(const Tensor& tensor, int64_t dst, const Group& group) {
  check_not_self(rank_, dst, "destination");
  Signature s = Signature::of(CollectiveOp::kSend, &tensor);
  s.root = dst;
  rendezvous_.meet_pair(rank_, rank_, dst, group, s, {.input = &tensor}, executor_);
}

Tensor RendezvousBackend::recv(const Tensor& like, int64_t src, const Group& group) {
  check_not_self(rank_, src, "source");
  Signature s = Signature::of(CollectiveOp::kRecv, &like);
  s.root = src;
  Tensor out;
  rendezvous_.meet_pair(rank_, src, rank_, group, s, {.output = &out}, executor_);
  return out;
}

std::vector<std::string> RendezvousBackend::broadcast_object_list(std::vector<std::string> objects,
                                                                  int64_t root,
                                                                  const Group& group) {
  Signature s;
  s.op = CollectiveOp::kBroadcastObjectList;
  s.dtype = DType::kInt64;
  const int64_t count[] = {static_cast<int64_t>(objects.size())};
  s.shape = InlineShape::of(count);
  s.root = root;
  std::vector<std::string> out;
  meet(group, s, {.objects_in = &objects, .objects_out = &out});
  return out;
}

std::vector<std::string> RendezvousBackend::all_gather_object(const std::string& object,
                                                              const Group& group) {
  Signature s;
  s.op = CollectiveOp::kAllGatherObject;
  s.dtype = DType::kInt64;
  const std::vector<std::string> in{object};
  std::vector<std::string> out;
  meet(group, s, {.objects_in = &in, .objects_out = &out});
  return out;
}

}  // namespace meshsim::sim
