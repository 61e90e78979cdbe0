#include "src/dtensor/local_shard.hpp"

#include <fmt/format.h>

#include "src/checked_math.hpp"
#include "src/error.hpp"

namespace meshsim {

std::pair<int64_t, int64_t> chunk_range(int64_t n, int64_t pieces, int64_t index) {
  const int64_t q = ceil_div(n, pieces);
  // q * index may overflow for huge indices; such pieces start past the end anyway.
  const int64_t start = (q == 0 || index > n / q) ? n : std::min(q * index, n);
  return {start, std::min(q, n - start)};
}

namespace {

// One sharding placement's cut of a dim of n positions on the rank at coordinate c of a mesh dim
// of size k: which positions it keeps, in order. A Shard keeps one torch.chunk piece; a
// StridedShard cuts the positions into split_factor pieces (torch.chunk), each into k, and keeps
// piece c of each: `full` pieces of q positions (keeping [at, at + size) of each), then a last
// piece of `rest` positions (keeping [rest_at, rest_at + rest_size)).
struct Cut {
  int64_t q = 0, full = 0, at = 0, size = 0, rest_at = 0, rest_size = 0;

  Cut(int64_t n, int64_t k, int64_t c, const Placement& p) {
    const auto* strided = std::get_if<StridedShard>(&p);
    // A Shard is a strided cut into one piece.
    q = n == 0 ? 0 : ceil_div(n, strided ? strided->split_factor : 1);
    full = q == 0 ? 0 : n / q;
    std::tie(at, size) = chunk_range(q, k, c);
    std::tie(rest_at, rest_size) = chunk_range(n - full * q, k, c);
  }
  int64_t kept() const { return full * size + rest_size; }
  // The position (before the cut) of kept position p.
  int64_t source(int64_t p) const {
    return p < full * size ? (p / size) * q + at + p % size
                           : full * q + rest_at + (p - full * size);
  }
};

// Calls f(dim, cut) for every Shard and StridedShard, mesh dims left to right, with the tensor dim
// normalised; sizes[dim] follows the cuts. Throws what owned_indices documents.
template <typename F>
void for_each_cut(std::span<const int64_t> global_shape, std::span<const int64_t> mesh_shape,
                  std::span<const int64_t> coordinate, std::span<const Placement> placements,
                  F&& f) {
  if (placements.size() != mesh_shape.size()) {
    throw value_error(
        fmt::format("{} placements given for a {}-d mesh", placements.size(), mesh_shape.size()));
  }
  MESHSIM_ASSERT(coordinate.size() == mesh_shape.size(),
                 fmt::format("coordinate has {} entries for a {}-d mesh", coordinate.size(),
                             mesh_shape.size()));
  std::vector<int64_t> sizes(global_shape.begin(), global_shape.end());
  for (int64_t size : sizes) {
    if (size < 0) throw value_error("tensor sizes must be non-negative");
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
    const auto d = static_cast<size_t>(dim);
    const Cut cut(sizes[d], mesh_shape[m], coordinate[m], placements[m]);
    f(d, cut, placements[m]);
    sizes[d] = cut.kept();
  }
}

// The runs a cut keeps of `held`.
IndexRuns apply(const Cut& cut, const IndexRuns& held, const Placement& placement) {
  IndexRuns kept;
  if (cut.size == cut.q) {
    kept.append(held.slice(0, cut.full * cut.q));  // every full piece is kept whole
  } else if (cut.size > 0) {
    if (cut.full > kMaxRuns) {
      throw value_error(fmt::format(
          "{} cuts a dim of {} into {} separate runs on this rank; meshsim lists at most {}",
          placement_name(placement), held.size(), cut.full, kMaxRuns));
    }
    for (int64_t i = 0; i < cut.full; ++i) kept.append(held.slice(i * cut.q + cut.at, cut.size));
  }
  kept.append(held.slice(cut.full * cut.q + cut.rest_at, cut.rest_size));
  // Runs held before add up with the cuts; several strided dims could compound them.
  if (static_cast<int64_t>(kept.runs().size()) > kMaxRuns) {
    throw value_error(
        fmt::format("{} leaves {} separate runs of a dim of {} on this rank; meshsim "
                    "lists at most {}",
                    placement_name(placement), kept.runs().size(), held.size(), kMaxRuns));
  }
  return kept;
}

}  // namespace

std::vector<IndexRuns> owned_indices(std::span<const int64_t> global_shape,
                                     std::span<const int64_t> mesh_shape,
                                     std::span<const int64_t> coordinate,
                                     std::span<const Placement> placements) {
  std::vector<IndexRuns> owned;
  for (int64_t size : global_shape) owned.push_back(IndexRuns::range(size));
  for_each_cut(
      global_shape, mesh_shape, coordinate, placements,
      [&](size_t d, const Cut& cut, const Placement& p) { owned[d] = apply(cut, owned[d], p); });
  return owned;
}

LocalShard compute_local_shape_and_global_offset(
    std::span<const int64_t> global_shape, std::span<const int64_t> mesh_shape,
    const std::optional<std::vector<int64_t>>& coordinate, std::span<const Placement> placements) {
  if (!coordinate) return LocalShard{{0}, {}};
  // Closed form, O(placements): the size after the last cut, and the first kept position mapped
  // back through every cut. No index list is built, however large the tensor or split factor.
  std::vector<std::vector<Cut>> cuts(global_shape.size());
  for_each_cut(global_shape, mesh_shape, *coordinate, placements,
               [&](size_t d, const Cut& cut, const Placement&) { cuts[d].push_back(cut); });
  LocalShard out;
  for (size_t d = 0; d < global_shape.size(); ++d) {
    const int64_t size = cuts[d].empty() ? global_shape[d] : cuts[d].back().kept();
    int64_t first = 0;
    for (auto it = cuts[d].rbegin(); it != cuts[d].rend(); ++it) first = it->source(first);
    out.shape.push_back(size);
    out.offset.push_back(size == 0 ? global_shape[d] : first);
  }
  return out;
}

}  // namespace meshsim
