// The typed collective calls, each reduced to the one Backend::call its implementations provide.
#include "src/comm/collective.hpp"

namespace meshsim {

namespace {

Signature reducing(CollectiveOp op, const Tensor& tensor, ReduceOp reduce_op) {
  Signature s = Signature::of(op, &tensor);
  s.reduce_op = reduce_op;
  return s;
}

Signature rooted(Signature s, int64_t root) {
  s.root = root;
  return s;
}

// Object collectives are checked like a collective over int64 counts.
Signature over_objects(CollectiveOp op) {
  Signature s;
  s.op = op;
  s.dtype = DType::kInt64;
  return s;
}

}  // namespace

void Backend::all_reduce(Tensor& tensor, ReduceOp op, const Group& group) {
  call(reducing(CollectiveOp::kAllReduce, tensor, op), {.input = &tensor, .output = &tensor},
       group);
}

std::vector<Tensor> Backend::all_gather(const Tensor& tensor, const Group& group) {
  std::vector<Tensor> out;
  call(Signature::of(CollectiveOp::kAllGather, &tensor), {.input = &tensor, .outputs = &out},
       group);
  return out;
}

Tensor Backend::all_gather_into_tensor(const Tensor& tensor, const Group& group) {
  Tensor out;
  call(Signature::of(CollectiveOp::kAllGatherIntoTensor, &tensor),
       {.input = &tensor, .output = &out}, group);
  return out;
}

Tensor Backend::reduce_scatter(const Tensor& input, ReduceOp op, const Group& group) {
  Tensor out;
  call(reducing(CollectiveOp::kReduceScatter, input, op), {.input = &input, .output = &out}, group);
  return out;
}

void Backend::broadcast(Tensor& tensor, int64_t root, const Group& group) {
  call(rooted(Signature::of(CollectiveOp::kBroadcast, &tensor), root),
       {.input = &tensor, .output = &tensor}, group);
}

std::vector<Tensor> Backend::all_to_all(const std::vector<Tensor>& inputs, const Group& group) {
  std::vector<Tensor> out;
  call(Signature::of(CollectiveOp::kAllToAll, inputs.empty() ? nullptr : &inputs[0]),
       {.inputs = &inputs, .outputs = &out}, group);
  return out;
}

void Backend::barrier(const Group& group) {
  call(Signature::of(CollectiveOp::kBarrier), {}, group);
}

void Backend::send(const Tensor& tensor, int64_t dst, const Group& group) {
  call(rooted(Signature::of(CollectiveOp::kSend, &tensor), dst), {.input = &tensor}, group);
}

Tensor Backend::recv(const Tensor& like, int64_t src, const Group& group) {
  Tensor out;
  call(rooted(Signature::of(CollectiveOp::kRecv, &like), src), {.output = &out}, group);
  return out;
}

std::vector<std::string> Backend::broadcast_object_list(std::vector<std::string> objects,
                                                        int64_t root, const Group& group) {
  Signature s = rooted(over_objects(CollectiveOp::kBroadcastObjectList), root);
  const int64_t count[] = {static_cast<int64_t>(objects.size())};
  s.shape = InlineShape::of(count);
  std::vector<std::string> out;
  call(s, {.objects_in = &objects, .objects_out = &out}, group);
  return out;
}

std::vector<std::string> Backend::all_gather_object(const std::string& object, const Group& group) {
  const std::vector<std::string> in{object};
  std::vector<std::string> out;
  call(over_objects(CollectiveOp::kAllGatherObject), {.objects_in = &in, .objects_out = &out},
       group);
  return out;
}

}  // namespace meshsim
