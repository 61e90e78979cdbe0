#include "sim/runtime/sim_backend.hpp"

#include <fmt/format.h>

#include "src/error.hpp"

namespace meshsim::sim {

namespace {

Signature signature_of(CollectiveOp op, const std::vector<Tensor>& tensors) {
  Signature s{op,           tensors.empty() ? DType::kFloat32 : tensors[0].dtype(),
              {},           std::nullopt,
              std::nullopt, {}};
  for (const Tensor& t : tensors) s.shapes.push_back(t.shape());
  return s;
}

}  // namespace

void SimBackend::all_reduce(Tensor& tensor, ReduceOp op, const Group& group) {
  Signature s = signature_of(CollectiveOp::kAllReduce, {tensor});
  s.reduce_op = op;
  tensor = c_.collective(rank_, group, s, Payload{{tensor}}).tensors.at(0);
}

std::vector<Tensor> SimBackend::all_gather(const Tensor& tensor, const Group& group) {
  return c_
      .collective(rank_, group, signature_of(CollectiveOp::kAllGather, {tensor}), Payload{{tensor}})
      .tensors;
}

Tensor SimBackend::all_gather_into_tensor(const Tensor& tensor, const Group& group) {
  return c_
      .collective(rank_, group, signature_of(CollectiveOp::kAllGatherIntoTensor, {tensor}),
                  Payload{{tensor}})
      .tensors.at(0);
}

Tensor SimBackend::reduce_scatter(const Tensor& input, ReduceOp op, const Group& group) {
  Signature s = signature_of(CollectiveOp::kReduceScatter, {input});
  s.reduce_op = op;
  return c_.collective(rank_, group, s, Payload{{input}}).tensors.at(0);
}

void SimBackend::broadcast(Tensor& tensor, int64_t root, const Group& group) {
  Signature s = signature_of(CollectiveOp::kBroadcast, {tensor});
  s.root = root;
  tensor = c_.collective(rank_, group, s, Payload{{tensor}}).tensors.at(0);
}

std::vector<Tensor> SimBackend::all_to_all(const std::vector<Tensor>& inputs, const Group& group) {
  if (static_cast<int64_t>(inputs.size()) != group.size()) {
    throw runtime_error("all_to_all needs one input tensor per group rank");
  }
  return c_
      .collective(rank_, group, signature_of(CollectiveOp::kAllToAll, {inputs.at(0)}),
                  Payload{inputs})
      .tensors;
}

void SimBackend::barrier(const Group& group) {
  c_.collective(rank_, group, signature_of(CollectiveOp::kBarrier, {}), Payload{});
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

void SimBackend::send(const Tensor& tensor, int64_t dst, const Group& group) {
  check_not_self(rank_, dst, "destination");
  c_.send(rank_, dst, group, tensor);
}

Tensor SimBackend::recv(const Tensor& like, int64_t src, const Group& group) {
  check_not_self(rank_, src, "source");
  return c_.recv(rank_, src, group, like);
}

std::vector<std::string> SimBackend::broadcast_object_list(std::vector<std::string> objects,
                                                           int64_t root, const Group& group) {
  Signature s{CollectiveOp::kBroadcastObjectList,
              DType::kInt64,
              {{static_cast<int64_t>(objects.size())}},
              root,
              std::nullopt,
              {}};
  return c_.collective(rank_, group, s, Payload{{}, std::move(objects)}).objects;
}

std::vector<std::string> SimBackend::all_gather_object(const std::string& object,
                                                       const Group& group) {
  const Signature s{
      CollectiveOp::kAllGatherObject, DType::kInt64, {}, std::nullopt, std::nullopt, {}};
  return c_.collective(rank_, group, s, Payload{{}, {object}}).objects;
}

}  // namespace meshsim::sim
