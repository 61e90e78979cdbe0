#include "src/comm/collective.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <span>

#include <fmt/format.h>

#include "src/checked_math.hpp"
#include "src/enum_names.hpp"
#include "src/error.hpp"

namespace meshsim {

constexpr EnumName<CollectiveOp> kCollectiveOpNames[] = {
    {CollectiveOp::kAllReduce, "all_reduce"},
    {CollectiveOp::kAllGather, "all_gather"},
    {CollectiveOp::kAllGatherIntoTensor, "all_gather_into_tensor"},
    {CollectiveOp::kReduceScatter, "reduce_scatter"},
    {CollectiveOp::kBroadcast, "broadcast"},
    {CollectiveOp::kAllToAll, "all_to_all"},
    {CollectiveOp::kBarrier, "barrier"},
    {CollectiveOp::kSend, "send"},
    {CollectiveOp::kRecv, "recv"},
    {CollectiveOp::kBroadcastObjectList, "broadcast_object_list"},
    {CollectiveOp::kAllGatherObject, "all_gather_object"},
    {CollectiveOp::kNewGroup, "new_group"},
};

std::string_view collective_op_name(CollectiveOp op) {
  return name_in(kCollectiveOpNames, op);
}

namespace {

int64_t group_id_of(const std::string& name) {
  if (name == "store") return kStoreGroupId;
  int64_t id = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), id);
  if (ec != std::errc() || end != name.data() + name.size() || id < 0) {
    throw runtime_error(fmt::format("\"{}\" is not a process group name", name));
  }
  return id;
}

}  // namespace

Group::Group(std::string group_name, RankList members, int64_t holder)
    : name(std::move(group_name)), ranks(std::move(members)), id(group_id_of(name)), position(-1) {
  position = group_rank(holder);
}

int64_t Group::group_rank(int64_t global_rank) const {
  const auto it = std::lower_bound(ranks->begin(), ranks->end(), global_rank);
  return it == ranks->end() || *it != global_rank ? -1 : static_cast<int64_t>(it - ranks->begin());
}

InlineShape InlineShape::of(std::span<const int64_t> shape) {
  InlineShape out;
  out.assign(shape);
  return out;
}

void InlineShape::assign(std::span<const int64_t> shape) {
  MESHSIM_ASSERT(shape.size() <= Tensor::kMaxDims,
                 fmt::format("a shape of {} dims in a signature", shape.size()));
  copy_dims(shape.data(), shape.size());
  ndim = static_cast<uint8_t>(shape.size());
  present = true;
}

Signature Signature::of(CollectiveOp op, const Tensor* tensor) {
  Signature s;
  s.op = op;
  if (tensor != nullptr) {
    s.dtype = tensor->dtype();
    s.shape.assign(tensor->shape());
  }
  return s;
}

std::string Signature::describe() const {
  std::vector<std::string> parts;
  if (op == CollectiveOp::kNewGroup) {
    // A mesh dim creates its groups as one batch; one group says nothing more.
    if (shape.ndim == 1 && shape.dims[0] != 1) {
      parts.push_back(fmt::format("groups={}", shape.dims[0]));
    }
  } else if (shape.present) {
    parts.push_back(fmt::format("{}[{}]", dtype_name(dtype), fmt::join(shape.view(), ", ")));
  }
  if (reduce_op) parts.push_back(fmt::format("op={}", reduce_op_name(*reduce_op)));
  if (root) {
    parts.push_back(fmt::format("{}={}",
                                op == CollectiveOp::kSend   ? "dst"
                                : op == CollectiveOp::kRecv ? "src"
                                                            : "root",
                                *root));
  }
  return fmt::format("{}({})", collective_op_name(op), fmt::join(parts, ", "));
}

namespace {

void require_same_layout(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
    throw runtime_error(fmt::format("cannot combine {} with {}", a.describe(), b.describe()));
  }
}

double reduce_pair(double acc, double x, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return acc + x;
    case ReduceOp::kMin:
      return std::min(acc, x);
    case ReduceOp::kMax:
      return std::max(acc, x);
    case ReduceOp::kProduct:
      return acc * x;
  }
  return acc;
}

// float32 and float64 read and written as themselves, with what Tensor::get and set do per
// element (widen to double, narrow back) and the same order of operations.
template <typename T>
void reduce_typed(const std::vector<const Tensor*>& inputs, ReduceOp op, Tensor& out) {
  // Groups of up to 64 keep their data pointers on the stack: no allocation per collective.
  constexpr size_t kOnStack = 64;
  std::array<const std::byte*, kOnStack> on_stack{};
  std::vector<const std::byte*> on_heap;
  if (inputs.size() > kOnStack) on_heap.resize(inputs.size());
  const std::span<const std::byte*> data = inputs.size() > kOnStack
                                               ? std::span<const std::byte*>(on_heap)
                                               : std::span(on_stack.data(), inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) data[k] = inputs[k]->bytes().data();
  std::byte* result = out.mutable_bytes().data();
  const auto numel = static_cast<size_t>(out.numel());
  const auto load = [](const std::byte* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return static_cast<double>(v);
  };
  for (size_t i = 0; i < numel; ++i) {
    const size_t at = i * sizeof(T);
    double acc = load(data[0] + at);
    for (size_t k = 1; k < data.size(); ++k) acc = reduce_pair(acc, load(data[k] + at), op);
    if (op == ReduceOp::kAvg) acc /= static_cast<double>(inputs.size());
    const auto narrowed = static_cast<T>(acc);
    std::memcpy(result + at, &narrowed, sizeof narrowed);
  }
}

}  // namespace

Tensor reduce_tensors(const std::vector<const Tensor*>& inputs, ReduceOp op, InputLayouts layouts) {
  MESHSIM_ASSERT(!inputs.empty(), "reduce of no tensors");
  const Tensor& first = *inputs[0];
  if (layouts == InputLayouts::kCheck) {
    for (const Tensor* t : inputs) require_same_layout(first, *t);
  }
  if (first.is_meta()) return first;
  Tensor out(first.shape(), first.dtype());
  if (first.dtype() == DType::kFloat32) {
    reduce_typed<float>(inputs, op, out);
    return out;
  }
  if (first.dtype() == DType::kFloat64) {
    reduce_typed<double>(inputs, op, out);
    return out;
  }
  if (!is_floating(first.dtype())) {
    // Integers reduce exactly, wrapping at the dtype's width as NCCL's integer kernels do.
    for (int64_t i = 0; i < first.numel(); ++i) {
      uint64_t acc = static_cast<uint64_t>(first.get_int(i));
      for (size_t k = 1; k < inputs.size(); ++k) {
        const int64_t x = inputs[k]->get_int(i);
        const auto a = static_cast<int64_t>(acc);
        switch (op) {
          case ReduceOp::kSum:
          case ReduceOp::kAvg:
            acc += static_cast<uint64_t>(x);
            break;
          case ReduceOp::kProduct:
            acc *= static_cast<uint64_t>(x);
            break;
          case ReduceOp::kMin:
            acc = static_cast<uint64_t>(std::min(a, x));
            break;
          case ReduceOp::kMax:
            acc = static_cast<uint64_t>(std::max(a, x));
            break;
        }
      }
      // set_int wraps to the dtype's width; an average divides the wrapped sum, as NCCL does.
      out.set_int(i, static_cast<int64_t>(acc));
      if (op == ReduceOp::kAvg) {
        out.set_int(i, out.get_int(i) / static_cast<int64_t>(inputs.size()));
      }
    }
    return out;
  }
  // Accumulate in double in the given (group-rank) order, so results are reproducible.
  for (int64_t i = 0; i < first.numel(); ++i) {
    double acc = first.get(i);
    for (size_t k = 1; k < inputs.size(); ++k) acc = reduce_pair(acc, inputs[k]->get(i), op);
    if (op == ReduceOp::kAvg) acc /= static_cast<double>(inputs.size());
    out.set(i, acc);
  }
  return out;
}

Tensor concat_dim0(const std::vector<const Tensor*>& inputs) {
  MESHSIM_ASSERT(!inputs.empty(), "concat of no tensors");
  std::vector<int64_t> shape = inputs[0]->shape();
  if (shape.empty()) throw runtime_error("cannot concatenate 0-d tensors");
  int64_t rows = 0;
  for (const Tensor* t : inputs) {
    if (t->dtype() != inputs[0]->dtype() || t->shape().size() != shape.size() ||
        !std::equal(shape.begin() + 1, shape.end(), t->shape().begin() + 1)) {
      throw runtime_error(
          fmt::format("cannot concatenate {} with {}", inputs[0]->describe(), t->describe()));
    }
    const std::optional<int64_t> sum = checked_add(rows, t->shape()[0]);
    if (!sum) {
      throw runtime_error(
          fmt::format("concatenating {} tensors of {} has more rows than int64 "
                      "can count",
                      inputs.size(), inputs[0]->describe()));
    }
    rows = *sum;
  }
  shape[0] = rows;
  if (inputs[0]->is_meta()) return Tensor(shape, inputs[0]->dtype(), Tensor::Storage::kMeta);
  Tensor out(shape, inputs[0]->dtype());
  if (out.nbytes() == 0) return out;  // an empty vector's data() may be null: no memcpy
  size_t at = 0;
  for (const Tensor* t : inputs) {
    if (t->nbytes() > 0)
      std::memcpy(out.mutable_bytes().data() + at, t->bytes().data(), t->nbytes());
    at += t->nbytes();
  }
  return out;
}

Tensor chunk_dim0(const Tensor& input, int64_t pieces, int64_t index) {
  std::vector<int64_t> shape = input.shape();
  if (shape.empty() || shape[0] % pieces != 0) {
    throw runtime_error(fmt::format("{} does not split into {} equal chunks along dim 0",
                                    input.describe(), pieces));
  }
  shape[0] /= pieces;
  if (input.is_meta()) return Tensor(shape, input.dtype(), Tensor::Storage::kMeta);
  Tensor out(shape, input.dtype());
  if (out.nbytes() == 0) return out;  // an empty vector's data() may be null: no memcpy
  std::memcpy(out.mutable_bytes().data(),
              input.bytes().data() + static_cast<size_t>(index) * out.nbytes(), out.nbytes());
  return out;
}

}  // namespace meshsim
