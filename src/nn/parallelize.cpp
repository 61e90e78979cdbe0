#include "src/nn/parallelize.hpp"

#include <cmath>

#include <fmt/format.h>

#include "src/enum_names.hpp"
#include "src/error.hpp"

namespace meshsim {

namespace {

void require_meta(const Parameter& p, std::string_view api) {
  if (!local_tensor(p).is_meta()) {
    throw Error(PyErrorType::kNotImplementedError,
                fmt::format("meshsim models {} for modules created on the meta device (meta = "
                            "true), as docs/rng.md 3.4's seed tests do; on a real device PyTorch "
                            "would scatter rank 0's values",
                            api));
  }
}

}  // namespace

const Tensor& local_tensor(const Parameter& p) {
  return std::holds_alternative<Tensor>(p) ? std::get<Tensor>(p) : std::get<DTensor>(p).local();
}

// The scenario's short names, then PyTorch's class names.
constexpr EnumName<TpStyle> kTpStyleNames[] = {
    {TpStyle::kColwise, "colwise"},
    {TpStyle::kRowwise, "rowwise"},
    {TpStyle::kColwise, "ColwiseParallel"},
    {TpStyle::kRowwise, "RowwiseParallel"},
};

std::optional<TpStyle> parse_tp_style(std::string_view text) {
  return value_in(kTpStyleNames, text);
}

DTensor parallelize_parameter(const Parameter& param, bool is_bias, const DeviceMesh& tp,
                              TpStyle style) {
  require_meta(param, "parallelize_module");
  if (std::holds_alternative<DTensor>(param)) {
    throw runtime_error("parallelize_module: the parameter is already a DTensor");
  }
  if (tp.ndim() != 1) {
    throw runtime_error(fmt::format(
        "parallelize_module needs a 1-D tensor-parallel mesh, not a {}-D one", tp.ndim()));
  }
  const Tensor& t = std::get<Tensor>(param);
  Placement p = Shard{0};
  if (style == TpStyle::kRowwise) p = is_bias ? Placement{Replicate{}} : Placement{Shard{1}};
  return DTensor::zeros(DTensorSpec{tp, {p}, t.shape(), t.dtype()}, Tensor::Storage::kMeta);
}

DTensor fully_shard_parameter(const Parameter& param, const DeviceMesh& dp) {
  require_meta(param, "fully_shard");
  if (dp.ndim() > 2) {
    throw runtime_error(fmt::format(
        "fully_shard over a {}-D mesh: FSDP2 takes a 1-D mesh, or a 2-D (replicate, shard) mesh "
        "for HSDP",
        dp.ndim()));
  }
  // HSDP: replicated over the first dim, sharded over the second.
  const bool hsdp = dp.ndim() == 2;
  if (const Tensor* t = std::get_if<Tensor>(&param)) {
    std::vector<Placement> placements{Shard{0}};
    if (hsdp) placements.insert(placements.begin(), Replicate{});
    return DTensor::zeros(DTensorSpec{dp, std::move(placements), t->shape(), t->dtype()},
                          Tensor::Storage::kMeta);
  }
  const DTensor& d = std::get<DTensor>(param);
  const DeviceMesh& tp = d.spec().mesh;
  if (tp.ndim() != 1 || !dp.dim_names() || !tp.dim_names() || !(dp.root() == tp.root())) {
    throw runtime_error(
        "fully_shard over a tensor-parallel parameter needs its data-parallel and tensor-parallel "
        "meshes to be named slices of one root mesh (DeviceMesh._concatenate)");
  }
  std::vector<std::string> dims = *dp.dim_names();
  dims.push_back(tp.dim_names()->at(0));
  const DeviceMesh spmd = dp.root().slice(dims);
  const Placement tp_placement = d.spec().placements.at(0);
  const int64_t split_factor = sharded_dim(tp_placement) == 0 ? tp.size() : 1;
  std::vector<Placement> placements{
      split_factor > 1 ? Placement{StridedShard{0, split_factor}} : Placement{Shard{0}},
      tp_placement};
  if (hsdp) placements.insert(placements.begin(), Replicate{});
  return d.relaid(spmd, std::move(placements));
}

double kaiming_uniform_bound(int64_t fan_in) {
  // PyTorch leaves a zero-element weight alone (a warning); callers skip it before asking.
  if (fan_in <= 0) throw value_error("kaiming_uniform_bound needs fan_in > 0");
  // torch.nn.init: gain = calculate_gain("leaky_relu", a), std = gain / sqrt(fan), bound =
  // sqrt(3) * std, with a = sqrt(5) (so a**2 is 5.000000000000001 in Python).
  const double a = std::sqrt(5.0);
  const double gain = std::sqrt(2.0 / (1 + a * a));
  const double std = gain / std::sqrt(static_cast<double>(fan_in));
  return std::sqrt(3.0) * std;
}

double linear_bias_bound(int64_t fan_in) {
  return fan_in > 0 ? 1 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
}

}  // namespace meshsim
