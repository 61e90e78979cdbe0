// The collective backend interface every backend implements (simulated now, NCCL later), and the
// signature that ranks meeting in one collective must agree on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/comm/rank_list.hpp"
#include "src/dtensor/placement.hpp"
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

// A process group as a rank sees it: its name and its members in group-rank order (shared).
struct Group {
  Group(std::string group_name, RankList members)
      : name(std::move(group_name)), ranks(std::move(members)) {}
  Group(std::string group_name, std::vector<int64_t> members)
      : name(std::move(group_name)),
        ranks(std::make_shared<const std::vector<int64_t>>(std::move(members))) {}

  std::string name;
  RankList ranks;
  int64_t size() const { return static_cast<int64_t>(ranks->size()); }
  // Position of `global_rank` in the group, or -1 (linear: callers on hot paths cache).
  int64_t group_rank(int64_t global_rank) const;
};

// What every participant of one collective must agree on. Shapes are per input tensor; `root` is
// a global rank (broadcast) and `peer` the other side of a send/recv.
struct Signature {
  CollectiveOp op;
  DType dtype = DType::kFloat32;
  std::vector<std::vector<int64_t>> shapes;
  std::optional<int64_t> root;
  std::optional<ReduceOp> reduce_op;
  // For new_group: the ranks of the group being created.
  std::vector<int64_t> ranks;

  // "all_reduce(float32[4], op=sum)" and similar.
  std::string describe() const;
  friend bool operator==(const Signature&, const Signature&) = default;
};

// One rank's handle on a backend. Every call is collective over `group` (send/recv: over the
// pair) and blocks until the others arrive. Implementations throw meshsim::Error (RuntimeError)
// when the group's members disagree on the signature or the rank is not in `group`.
class Backend {
 public:
  virtual ~Backend() = default;

  virtual void all_reduce(Tensor& tensor, ReduceOp op, const Group& group) = 0;
  // One tensor per group rank, in group-rank order.
  virtual std::vector<Tensor> all_gather(const Tensor& tensor, const Group& group) = 0;
  // The inputs concatenated along dim 0.
  virtual Tensor all_gather_into_tensor(const Tensor& tensor, const Group& group) = 0;
  // `input` holds group-size chunks along dim 0; returns the reduction of this rank's chunk.
  virtual Tensor reduce_scatter(const Tensor& input, ReduceOp op, const Group& group) = 0;
  virtual void broadcast(Tensor& tensor, int64_t root, const Group& group) = 0;
  // inputs[i] goes to group rank i; returns what each group rank sent here.
  virtual std::vector<Tensor> all_to_all(const std::vector<Tensor>& inputs, const Group& group) = 0;
  virtual void barrier(const Group& group) = 0;
  // Blocking point-to-point with global ranks; ValueError (c10d's text) when the peer is the
  // calling rank itself.
  virtual void send(const Tensor& tensor, int64_t dst, const Group& group) = 0;
  virtual Tensor recv(const Tensor& like, int64_t src, const Group& group) = 0;
  // Control-plane object collectives; objects travel as serialized strings.
  virtual std::vector<std::string> broadcast_object_list(std::vector<std::string> objects,
                                                         int64_t root, const Group& group) = 0;
  virtual std::vector<std::string> all_gather_object(const std::string& object,
                                                     const Group& group) = 0;
};

// Elementwise reduction of `inputs` (same dtype and shape) in the given order; avg divides the
// sum by the count. Meta inputs give a meta result. Throws meshsim::Error on mismatched inputs.
Tensor reduce_tensors(const std::vector<const Tensor*>& inputs, ReduceOp op);
// Concatenation along dim 0 (all inputs must agree on the other dims).
Tensor concat_dim0(const std::vector<const Tensor*>& inputs);
// Chunk `index` of `pieces` equal chunks along dim 0 (dim 0 must divide evenly).
Tensor chunk_dim0(const Tensor& input, int64_t pieces, int64_t index);

}  // namespace meshsim
