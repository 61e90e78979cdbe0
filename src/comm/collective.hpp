// The collective backend interface every backend implements (simulated now, NCCL later), and the
// signature that ranks meeting in one collective must agree on.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/comm/rank_list.hpp"
#include "src/comm/reduce_op.hpp"
#include "src/tensor/tensor.hpp"

namespace meshsim {

enum class CollectiveOp {
  kAllReduce,
  kAllGather,
  kAllGatherIntoTensor,
  kReduceScatter,
  kBroadcast,
  kAllToAll,
  kBarrier,
  kSend,
  kRecv,
  kBroadcastObjectList,
  kAllGatherObject,
  kNewGroup,
};
std::string_view collective_op_name(CollectiveOp op);

// c10d names groups by a counter; the TCP store's barrier (new_group) is a group of its own.
inline constexpr int64_t kStoreGroupId = -1;

// A process group as one rank sees it: its name, its members in group-rank order (ascending, as
// new_group sorts them; shared) and the holder's position among them.
struct Group {
  // `name` is c10d's (a decimal counter value) or "store". Throws meshsim::Error (RuntimeError)
  // for any other name.
  Group(std::string group_name, RankList members, int64_t holder);
  Group(std::string group_name, std::vector<int64_t> members, int64_t holder)
      : Group(std::move(group_name),
              std::make_shared<const std::vector<int64_t>>(std::move(members)), holder) {}

  std::string name;
  RankList ranks;
  int64_t id;        // the name as a number (kStoreGroupId for the store)
  int64_t position;  // the holder's group rank, or -1 when it is not a member
  int64_t size() const { return static_cast<int64_t>(ranks->size()); }
  // Position of `global_rank` in the group, or -1 (binary search).
  int64_t group_rank(int64_t global_rank) const;
};

// A tensor shape held inline: signatures are built on every call and must not allocate. Only the
// first `ndim` dims are written, copied and compared: doing all 25 on every call cost more than
// the rest of building a signature.
struct InlineShape {
  // The counts first and the dims last: a shape of a few dims is one cache line with what precedes
  // it in a signature.
  uint8_t ndim = 0;
  bool present = false;                        // a 0-dim tensor has a shape; a barrier has none
  std::array<int64_t, Tensor::kMaxDims> dims;  // unset past ndim

  InlineShape() = default;
  InlineShape(const InlineShape& other) { *this = other; }
  InlineShape& operator=(const InlineShape& other) {
    ndim = other.ndim;
    present = other.present;
    copy_dims(other.dims.data(), ndim);
    return *this;
  }

  static InlineShape of(std::span<const int64_t> shape);
  // The same, written in place (a signature is built on every call: no temporary to copy).
  void assign(std::span<const int64_t> shape);
  std::span<const int64_t> view() const { return {dims.data(), ndim}; }
  // A plain loop: a shape has a few dims, and memmove's setup costs more than copying them.
  void copy_dims(const int64_t* from, size_t n) {
#pragma GCC unroll 4
    for (size_t i = 0; i < n; ++i) dims[i] = from[i];
  }
  friend bool operator==(const InlineShape& a, const InlineShape& b) {
    if (a.ndim != b.ndim || a.present != b.present) return false;
    // A loop, not std::equal: that calls memcmp, which costs more than a few dims.
    for (size_t i = 0; i < a.ndim; ++i)
      if (a.dims[i] != b.dims[i]) return false;
    return true;
  }
};

// What every participant of one collective must agree on.
// The shape comes last, so that building and comparing one of a few dims touches one cache line:
// a signature is built on every rank's stack on every call.
struct Signature {
  CollectiveOp op = CollectiveOp::kBarrier;
  DType dtype = DType::kFloat32;
  std::optional<ReduceOp> reduce_op;
  // broadcast: the global root; send/recv: the peer (global rank).
  std::optional<int64_t> root;
  // The input tensor's shape; object collectives: the object count; new_group: how many groups
  // are created together.
  InlineShape shape;

  // `op` over `tensor` (dtype and shape), or over nothing.
  static Signature of(CollectiveOp op, const Tensor* tensor = nullptr);
  // "all_reduce(float32[4], op=sum)" and similar.
  std::string describe() const;
  friend bool operator==(const Signature&, const Signature&) = default;
};

// Where one rank's call reads its operands and writes its results. Everything points into the
// caller's frame, which outlives the call.
struct CallBuffers {
  const Tensor* input = nullptr;
  const std::vector<Tensor>* inputs = nullptr;  // all_to_all: one per group rank
  Tensor* output = nullptr;
  std::vector<Tensor>* outputs = nullptr;  // all_gather, all_to_all
  const std::vector<std::string>* objects_in = nullptr;
  std::vector<std::string>* objects_out = nullptr;
};

// One rank's handle on a backend. Every call is collective over `group` (send/recv: over the
// pair) and blocks until the others arrive. Implementations throw meshsim::Error (RuntimeError)
// when the group's members disagree on the signature or the rank is not in `group`.
//
// The typed calls below all reduce to one `call` (what the call is, where its data lives), the
// only function a backend, or a wrapper around one, implements.
class Backend {
 public:
  virtual ~Backend() = default;

  void all_reduce(Tensor& tensor, ReduceOp op, const Group& group);
  // One tensor per group rank, in group-rank order.
  std::vector<Tensor> all_gather(const Tensor& tensor, const Group& group);
  // The inputs concatenated along dim 0.
  Tensor all_gather_into_tensor(const Tensor& tensor, const Group& group);
  // `input` holds group-size chunks along dim 0; returns the reduction of this rank's chunk.
  Tensor reduce_scatter(const Tensor& input, ReduceOp op, const Group& group);
  void broadcast(Tensor& tensor, int64_t root, const Group& group);
  // inputs[i] goes to group rank i; returns what each group rank sent here.
  std::vector<Tensor> all_to_all(const std::vector<Tensor>& inputs, const Group& group);
  void barrier(const Group& group);
  // Blocking point-to-point with global ranks; ValueError (c10d's text) when the peer is the
  // calling rank itself.
  void send(const Tensor& tensor, int64_t dst, const Group& group);
  Tensor recv(const Tensor& like, int64_t src, const Group& group);
  // Control-plane object collectives; objects travel as serialized strings.
  std::vector<std::string> broadcast_object_list(std::vector<std::string> objects, int64_t root,
                                                 const Group& group);
  std::vector<std::string> all_gather_object(const std::string& object, const Group& group);

  // One call: `signature` says which (send/recv: the peer in `root`), `buffers` where its data
  // is; the results are written through `buffers`.
  virtual void call(const Signature& signature, const CallBuffers& buffers, const Group& group) = 0;
};

// Whether reduce_tensors checks that every input has the first's dtype and shape, or its caller
// knows they do (the members of a meeting whose signatures agree): reading every rank's shape
// costs a cache miss per rank.
enum class InputLayouts { kCheck, kKnownSame };
// Elementwise reduction of `inputs` (same dtype and shape) in the given order; avg divides the
// sum by the count. Meta inputs give a meta result. Throws meshsim::Error on mismatched inputs.
Tensor reduce_tensors(const std::vector<const Tensor*>& inputs, ReduceOp op,
                      InputLayouts layouts = InputLayouts::kCheck);
// Concatenation along dim 0 (all inputs must agree on the other dims).
Tensor concat_dim0(const std::vector<const Tensor*>& inputs);
// Chunk `index` of `pieces` equal chunks along dim 0 (dim 0 must divide evenly).
Tensor chunk_dim0(const Tensor& input, int64_t pieces, int64_t index);

}  // namespace meshsim
