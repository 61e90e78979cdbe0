#include "src/dtensor/dtensor.hpp"

#include <fmt/format.h>

#include "src/checked_math.hpp"
#include "src/dtensor/local_shard.hpp"
#include "src/error.hpp"

namespace meshsim {

std::vector<int64_t> DTensorSpec::stride() const {
  // Empty dims count as 1, as make_contiguous_strides_for does.
  std::vector<int64_t> out(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) {
    const std::optional<int64_t> s = checked_mul(out[d], std::max<int64_t>(shape[d], 1));
    if (!s)
      throw overflow_error(
          fmt::format("the strides of shape [{}] overflow int64", fmt::join(shape, ", ")));
    out[d - 1] = *s;
  }
  return out;
}

int64_t DTensorSpec::numel() const {
  const std::optional<int64_t> n = checked_product(shape);
  if (!n)
    throw overflow_error(
        fmt::format("shape [{}] has more than 2^63 elements", fmt::join(shape, ", ")));
  return *n;
}

std::vector<int64_t> DTensorSpec::local_shape() const {
  return compute_local_shape_and_global_offset(shape, mesh.shape(), mesh.coordinate(), placements)
      .shape;
}

std::string DTensorSpec::describe() const {
  std::vector<std::string> names;
  for (const Placement& p : placements) names.push_back(placement_name(p));
  std::string mesh_text = fmt::format("({})", fmt::join(mesh.shape(), ", "));
  if (mesh.dim_names()) mesh_text += " " + py_tuple(*mesh.dim_names());
  return fmt::format("{}[{}] on mesh {} as [{}]", dtype_name(dtype), fmt::join(shape, ", "),
                     mesh_text, fmt::join(names, ", "));
}

DTensor DTensor::zeros(DTensorSpec spec, Tensor::Storage storage) {
  Tensor::byte_size(spec.shape, spec.dtype);  // the global tensor must be one that can exist
  std::vector<int64_t> local = spec.local_shape();
  // Shard(-1) is kept as Shard(ndim - 1), as distribute_tensor and from_local normalise it.
  const auto ndim = static_cast<int64_t>(spec.shape.size());
  for (Placement& p : spec.placements) p = with_dim_normalized(std::move(p), ndim);
  Tensor t(std::move(local), spec.dtype, storage);
  return DTensor(std::move(spec), std::move(t));
}

DTensor DTensor::global_indices(DTensorSpec spec) {
  DTensor out = zeros(std::move(spec));
  const int64_t numel = out.spec_.numel();
  // Largest count of consecutive integers from 0 each dtype holds exactly.
  int64_t exact = int64_t{1} << 53;
  switch (out.spec_.dtype) {
    case DType::kFloat32:
      exact = int64_t{1} << 24;
      break;
    case DType::kFloat16:
      exact = int64_t{1} << 11;
      break;
    case DType::kBFloat16:
      exact = int64_t{1} << 8;
      break;
    case DType::kUInt8:
      exact = 256;
      break;
    case DType::kBool:
      exact = 2;
      break;
    case DType::kInt32:
      exact = int64_t{1} << 31;
      break;
    case DType::kInt64:
    case DType::kFloat64:
      break;
  }
  if (numel > exact) {
    throw value_error(
        fmt::format("{} elements cannot each hold their index exactly in {} (at most {})", numel,
                    dtype_name(out.spec_.dtype), exact));
  }
  if (!out.participates() || out.local_.numel() == 0) return out;
  std::vector<std::vector<int64_t>> indices;
  for (const IndexRuns& d : owned_indices(out.spec_.shape, out.spec_.mesh.shape(),
                                          *out.spec_.mesh.coordinate(), out.spec_.placements))
    indices.push_back(d.expand());
  const std::vector<int64_t> strides = out.spec_.stride();
  const std::vector<int64_t>& local_shape = out.local_.shape();
  for (int64_t i = 0; i < out.local_.numel(); ++i) {
    int64_t rest = i, global = 0;
    for (size_t d = local_shape.size(); d-- > 0;) {
      global += indices[d][static_cast<size_t>(rest % local_shape[d])] * strides[d];
      rest /= local_shape[d];
    }
    out.local_.set_int(i, global);
  }
  return out;
}

DTensor DTensor::from_local_shard(DTensorSpec spec, Tensor local) {
  DTensor out = zeros(std::move(spec), Tensor::Storage::kMeta);
  out.set_local(std::move(local));
  return out;
}

void DTensor::reassign_mesh(DeviceMesh mesh) {
  if (!(mesh == spec_.mesh)) {
    throw runtime_error(fmt::format("cannot hand {} a different mesh, {}", spec_.mesh.to_string(),
                                    mesh.to_string()));
  }
  spec_.mesh = std::move(mesh);
}

bool operator==(const DTensor& a, const DTensor& b) {
  return a.spec_.mesh == b.spec_.mesh && a.spec_.placements == b.spec_.placements &&
         a.spec_.shape == b.spec_.shape && a.spec_.dtype == b.spec_.dtype &&
         a.requires_grad_ == b.requires_grad_ && a.local_.same_as(b.local_);
}

void DTensor::set_local(Tensor local) {
  if (local.shape() != spec_.local_shape() || local.dtype() != spec_.dtype) {
    throw runtime_error(fmt::format("local tensor {} does not fit the shard of {}",
                                    local.describe(), spec_.describe()));
  }
  local_ = std::move(local);
}

DTensor DTensor::relaid(DeviceMesh mesh, std::vector<Placement> placements) const {
  DTensorSpec spec{std::move(mesh), std::move(placements), spec_.shape, spec_.dtype};
  return zeros(std::move(spec),
               local_.is_meta() ? Tensor::Storage::kMeta : Tensor::Storage::kMaterialized);
}

}  // namespace meshsim
