#include "src/dtensor/local_shard.hpp"

#include <fmt/format.h>

#include "src/error.hpp"

namespace meshsim {

std::pair<int64_t, int64_t> chunk_range(int64_t n, int64_t pieces, int64_t index) {
  const int64_t q = n / pieces + (n % pieces != 0 ? 1 : 0);  // ceil, without overflow
  // q * index may overflow for huge indices; such pieces start past the end anyway.
  const int64_t start = (q == 0 || index > n / q) ? n : std::min(q * index, n);
  return {start, std::min(q, n - start)};
}

namespace {

// _StridedShard on mesh dim of size k at coordinate c: split_factor pieces of the held indices,
// each cut into k, keeping piece c of each.
IndexRuns strided_pieces(const IndexRuns& held, int64_t split_factor, int64_t k, int64_t c,
                         const Placement& placement) {
  const int64_t n = held.size();
  IndexRuns kept;
  if (n == 0) return kept;
  // torch.chunk(n, split_factor): `full` pieces of q, then one of `rest` (maybe empty).
  const int64_t q = n / split_factor + (n % split_factor != 0 ? 1 : 0);
  const int64_t full = n / q;
  const int64_t rest = n - full * q;
  const auto [at, size] = chunk_range(q, k, c);
  if (size == q) {
    kept.append(held.slice(0, full * q));  // every full piece is kept whole
  } else if (size > 0) {
    if (full > kMaxRuns) {
      throw value_error(fmt::format(
          "{} cuts a dim of {} into {} separate runs of {} on this rank; meshsim handles at most "
          "{}",
          placement_name(placement), n, full, size, kMaxRuns));
    }
    for (int64_t i = 0; i < full; ++i) kept.append(held.slice(i * q + at, size));
  }
  const auto [rest_at, rest_size] = chunk_range(rest, k, c);
  kept.append(held.slice(full * q + rest_at, rest_size));
  // Runs held before add up with the cuts; several strided dims could compound them.
  if (static_cast<int64_t>(kept.runs().size()) > kMaxRuns) {
    throw value_error(
        fmt::format("{} leaves {} separate runs of a dim of {} on this rank; meshsim "
                    "handles at most {}",
                    placement_name(placement), kept.runs().size(), n, kMaxRuns));
  }
  return kept;
}

}  // namespace

std::vector<IndexRuns> owned_indices(std::span<const int64_t> global_shape,
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
  std::vector<IndexRuns> owned;
  for (int64_t size : global_shape) {
    if (size < 0) throw value_error("tensor sizes must be non-negative");
    owned.push_back(IndexRuns::range(size));
  }
  const auto ndim = static_cast<int64_t>(global_shape.size());
  for (size_t m = 0; m < placements.size(); ++m) {
    if (std::holds_alternative<Replicate>(placements[m]) ||
        std::holds_alternative<Partial>(placements[m])) {
      continue;  // they keep everything
    }
    int64_t dim = sharded_dim(placements[m]);
    if (dim < -ndim || dim >= ndim) {
      throw Error(PyErrorType::kIndexError,
                  fmt::format("tuple index out of range ({} on mesh dim {} of a {}-d tensor)",
                              placement_name(placements[m]), m, ndim));
    }
    if (dim < 0) dim += ndim;
    IndexRuns& held = owned[static_cast<size_t>(dim)];
    const int64_t k = mesh_shape[m];
    const int64_t c = coordinate[m];
    if (const auto* strided = std::get_if<StridedShard>(&placements[m])) {
      held = strided_pieces(held, strided->split_factor, k, c, placements[m]);
    } else {
      const auto [start, size] = chunk_range(held.size(), k, c);
      held = held.slice(start, size);
    }
  }
  return owned;
}

LocalShard compute_local_shape_and_global_offset(
    std::span<const int64_t> global_shape, std::span<const int64_t> mesh_shape,
    const std::optional<std::vector<int64_t>>& coordinate, std::span<const Placement> placements) {
  if (!coordinate) return LocalShard{{0}, {}};
  const std::vector<IndexRuns> owned =
      owned_indices(global_shape, mesh_shape, *coordinate, placements);
  LocalShard out;
  for (size_t d = 0; d < owned.size(); ++d) {
    out.shape.push_back(owned[d].size());
    out.offset.push_back(owned[d].empty() ? global_shape[d] : owned[d].first());
  }
  return out;
}

}  // namespace meshsim
