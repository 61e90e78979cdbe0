#include "src/dtensor/local_shard.hpp"

#include <fmt/format.h>

#include "src/error.hpp"

namespace meshsim {

std::pair<int64_t, int64_t> chunk_range(int64_t n, int64_t pieces, int64_t index) {
  const int64_t q = (n + pieces - 1) / pieces;
  const int64_t start = q * index;
  return {std::min(start, n), std::max<int64_t>(0, std::min(n, start + q) - start)};
}

std::vector<std::vector<int64_t>> owned_indices(std::span<const int64_t> global_shape,
                                                std::span<const int64_t> mesh_shape,
                                                std::span<const int64_t> coordinate,
                                                std::span<const Placement> placements) {
  if (placements.size() != mesh_shape.size()) {
    throw value_error(
        fmt::format("{} placements given for a {}-d mesh", placements.size(), mesh_shape.size()));
  }
  MESHSIM_ASSERT(coordinate.size() == mesh_shape.size(),
                 fmt::format("coordinate has {} entries for a {}-d mesh", coordinate.size(),
                             mesh_shape.size()));
  std::vector<std::vector<int64_t>> owned(global_shape.size());
  for (size_t d = 0; d < global_shape.size(); ++d) {
    if (global_shape[d] < 0) throw value_error("tensor sizes must be non-negative");
    for (int64_t i = 0; i < global_shape[d]; ++i) owned[d].push_back(i);
  }
  const auto ndim = static_cast<int64_t>(global_shape.size());
  for (size_t m = 0; m < placements.size(); ++m) {
    if (std::holds_alternative<Replicate>(placements[m]) ||
        std::holds_alternative<Partial>(placements[m])) {
      continue;  // they keep everything
    }
    int64_t dim = sharded_dim(placements[m]);
    if (dim < -ndim || dim >= ndim) {
      throw value_error(fmt::format("{} on mesh dim {} is out of range for a {}-d tensor",
                                    placement_name(placements[m]), m, ndim));
    }
    if (dim < 0) dim += ndim;
    const std::vector<int64_t> held = std::move(owned[static_cast<size_t>(dim)]);
    const auto n = static_cast<int64_t>(held.size());
    const int64_t k = mesh_shape[m];
    const int64_t c = coordinate[m];
    std::vector<int64_t> kept;
    auto keep_chunk = [&](int64_t pieces, int64_t index) {
      const auto [start, size] = chunk_range(n, pieces, index);
      kept.insert(kept.end(), held.begin() + start, held.begin() + start + size);
    };
    if (const auto* strided = std::get_if<StridedShard>(&placements[m])) {
      for (int64_t j = 0; j < strided->split_factor; ++j) {
        keep_chunk(k * strided->split_factor, c + j * k);
      }
    } else {
      keep_chunk(k, c);
    }
    owned[static_cast<size_t>(dim)] = std::move(kept);
  }
  return owned;
}

LocalShard compute_local_shape_and_global_offset(
    std::span<const int64_t> global_shape, std::span<const int64_t> mesh_shape,
    const std::optional<std::vector<int64_t>>& coordinate, std::span<const Placement> placements) {
  if (!coordinate) return LocalShard{{0}, {}};
  const std::vector<std::vector<int64_t>> owned =
      owned_indices(global_shape, mesh_shape, *coordinate, placements);
  LocalShard out;
  for (size_t d = 0; d < owned.size(); ++d) {
    out.shape.push_back(static_cast<int64_t>(owned[d].size()));
    out.offset.push_back(owned[d].empty() ? global_shape[d] : owned[d].front());
  }
  return out;
}

}  // namespace meshsim
