// How torch.nn modules' parameters are laid out and initialised in docs/rng.md 3.4's seed tests:
// tensor parallel styles (parallelize_module), FSDP2's fully_shard (strided when composed with
// TP), and nn.Linear.reset_parameters' bounds.
#pragma once

#include <string_view>
#include <variant>

#include "src/dtensor/dtensor.hpp"

namespace meshsim {

// A parameter before (a plain tensor) or after (a DTensor) parallelisation.
using Parameter = std::variant<Tensor, DTensor>;
// The tensor itself, or the DTensor's local shard.
const Tensor& local_tensor(const Parameter& p);

enum class TpStyle { kColwise, kRowwise };
// "colwise" / "ColwiseParallel", "rowwise" / "RowwiseParallel"; nullopt otherwise.
std::optional<TpStyle> parse_tp_style(std::string_view text);

// parallelize_module(module, tp_mesh, {name: style}) for an nn.Linear's `weight` or `bias`
// (ColwiseParallel: both Shard(0); RowwiseParallel: weight Shard(1), bias Replicate()). Only
// modules on the meta device are modelled (PyTorch would scatter real data from rank 0):
// NotImplementedError otherwise; RuntimeError when the mesh is not 1-D or the parameter already
// a DTensor.
DTensor parallelize_parameter(const Parameter& param, bool is_bias, const DeviceMesh& tp,
                              TpStyle style);

// fully_shard(module, mesh=dp) on one parameter, as FSDP2 lays it out: a plain tensor becomes
// Shard(0) over dp; a DTensor on a TP mesh moves to the (dp, tp) mesh of their common root, with
// dim 0 sharded over dp first — _StridedShard(0, split_factor = the TP shards of dim 0) when TP
// also shards dim 0, Shard(0) otherwise. A 2-D dp mesh is HSDP: Replicate() over its first dim
// before the shard. Meta parameters only, as above. RuntimeError when the meshes share no named
// root or dp has more than 2 dims.
DTensor fully_shard_parameter(const Parameter& param, const DeviceMesh& dp);

// nn.Linear.reset_parameters: kaiming_uniform_(weight, a=sqrt(5)) draws from
// uniform_(-bound, bound) with this bound, computed in double as torch.nn.init does; the bias
// from uniform_(-1/sqrt(fan_in), 1/sqrt(fan_in)) (0 when fan_in is 0). kaiming_uniform_bound
// needs fan_in > 0 (ValueError): a zero-element weight is not drawn at all.
double kaiming_uniform_bound(int64_t fan_in);
double linear_bias_bound(int64_t fan_in);

}  // namespace meshsim
