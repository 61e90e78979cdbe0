#include "src/dtensor/redistribute.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "src/checked_math.hpp"
#include "src/dtensor/local_shard.hpp"
#include "src/dtensor/redistribute_merge.hpp"
#include "src/dtensor/redistribute_planner.hpp"
#include "src/error.hpp"
#include "src/tensor/memory_budget.hpp"
#include "src/tensor/tensor_ops.hpp"

namespace meshsim {

namespace {

bool is_shard(const Placement& p) {
  return sharded_dim(p) >= 0;
}
// A plain Shard of `dim`: PyTorch's greedy plan does not count a _StridedShard as one.
bool is_plain_shard_of(const Placement& p, int64_t dim) {
  const auto* shard = std::get_if<Shard>(&p);
  return shard != nullptr && shard->dim == dim;
}
bool is_partial(const Placement& p) {
  return std::holds_alternative<Partial>(p);
}
bool is_replicate(const Placement& p) {
  return std::holds_alternative<Replicate>(p);
}
size_t dim_of(const Placement& p) {
  return static_cast<size_t>(sharded_dim(p));
}

bool has_strided(std::span<const Placement> placements) {
  return std::any_of(placements.begin(), placements.end(),
                     [](const Placement& p) { return std::holds_alternative<StridedShard>(p); });
}

// A sharding placement as it cuts one dim of its own (dim 0 of a 1-D tensor).
Placement on_one_dim(const Placement& p) {
  if (const auto* s = std::get_if<StridedShard>(&p)) return StridedShard{0, s->split_factor};
  return Shard{0};
}

// The positions of a dim of n that piece `index` of `pieces` holds under a sharding placement
// (torch.chunk for a Shard; the strided split for a _StridedShard), as runs.
IndexRuns piece_positions(const Placement& p, int64_t n, int64_t pieces, int64_t index) {
  const Placement one_dim = on_one_dim(p);
  const int64_t shape[] = {n};
  const int64_t mesh[] = {pieces};
  const int64_t coordinate[] = {index};
  return owned_indices(shape, mesh, coordinate, {&one_dim, 1}).front();
}

// How many positions that piece holds, in closed form (no runs listed).
int64_t piece_size(const Placement& p, int64_t n, int64_t pieces, int64_t index) {
  const Placement one_dim = on_one_dim(p);
  const int64_t shape[] = {n};
  const int64_t mesh[] = {pieces};
  return compute_local_shape_and_global_offset(shape, mesh, std::vector<int64_t>{index},
                                               {&one_dim, 1})
      .shape.front();
}

int64_t checked_times(int64_t a, int64_t b) {
  const std::optional<int64_t> product = checked_mul(a, b);
  if (!product) throw overflow_error(fmt::format("{} * {} overflows int64", a, b));
  return *product;
}

// What one mesh dim's collectives need: its group and size, and the rank's index along it.
struct MeshDimContext {
  Backend& backend;
  Group group;
  int64_t size;
  int64_t index;
  bool gloo;  // a "cpu" mesh: Gloo has no all_to_all, DTensor gathers instead
  const RedistributeWarning& warn;
};

// Mesh dim `m` of `mesh` as the calling rank (in the mesh) sees it.
MeshDimContext context_of(const DeviceMesh& mesh, size_t m, Backend& backend,
                          const MeshDimGroup& group_of, const RedistributeWarning& warn) {
  return MeshDimContext{backend,
                        group_of(mesh, m),
                        mesh.size(m),
                        (*mesh.coordinate())[m],
                        mesh.device_type() == "cpu",
                        warn};
}

// funcol.all_gather_tensor: NCCL gathers along dim 0; other dims are stitched from its pieces.
Tensor all_gather_along(const MeshDimContext& c, const Tensor& local, size_t dim) {
  Tensor gathered = c.backend.all_gather_into_tensor(local, c.group);
  if (dim == 0) return gathered;
  const std::vector<Tensor> pieces = chunk_along(gathered, 0, c.size);
  return concat_along(pieces, dim);
}

// Shard -> Replicate: pad to the full chunk, gather, drop the padding.
Tensor shard_to_replicate(const MeshDimContext& c, const Tensor& local, const Shard& from,
                          std::span<const int64_t> logical_shape) {
  const size_t dim = dim_of(from);
  const int64_t logical = logical_shape[dim];
  const int64_t full = ceil_div(logical, c.size);
  const bool padded = logical % c.size != 0;
  const Tensor input = padded ? pad_end(local, dim, full - local.shape()[dim]) : local;
  const Tensor gathered = all_gather_along(c, input, dim);
  return padded ? narrow(gathered, dim, 0, logical) : gathered;
}

// _StridedShard -> Replicate: gather the pieces (padded to the largest), then put every position
// back where the strided split took it from, as DTensor replays the split on indices; each
// piece's padding is left out, so uneven pieces come back exact (PyTorch 2.15 does the same).
Tensor strided_to_replicate(const MeshDimContext& c, const Tensor& local, const StridedShard& from,
                            std::span<const int64_t> logical_shape) {
  const size_t dim = dim_of(from);
  const int64_t logical = logical_shape[dim];
  const int64_t largest = piece_size(from, logical, c.size, 0);  // pieces shrink from the first
  const Tensor gathered =
      all_gather_along(c, pad_end(local, dim, largest - local.shape()[dim]), dim);
  if (gathered.is_meta()) return narrow(gathered, dim, 0, logical);  // only the shape moves
  // The lists below hold a few words per run, and there can be a run per position (a large
  // split_factor): held against the memory budget like the tensors.
  constexpr int64_t kBytesPerRun = 64;
  const int64_t runs_per_piece = std::min(from.split_factor, INT64_MAX - 1) + 1;
  const int64_t most_runs =
      std::min(logical, checked_mul(c.size, runs_per_piece).value_or(INT64_MAX));
  const MemoryReservation bookkeeping(
      static_cast<uint64_t>(checked_mul(most_runs, kBytesPerRun).value_or(INT64_MAX)),
      "the index runs of a strided gather");
  // Run r of piece i sits at i * largest + (its offset in the piece) in `gathered` and was cut
  // from positions [start, stop): sorted by start, the runs rebuild the dim.
  std::vector<std::pair<IndexRuns::Run, int64_t>> runs;
  for (int64_t i = 0; i < c.size; ++i) {
    int64_t at = checked_times(i, largest);
    const IndexRuns piece = piece_positions(from, logical, c.size, i);
    for (const IndexRuns::Run& r : piece.runs()) {
      runs.push_back({r, at});
      at += r.stop - r.start;
    }
  }
  // A heap sort: it runs in one frame, where std::sort's recursion on tens of thousands of runs
  // overflows a 64 KiB fiber stack under AddressSanitizer.
  const auto by_start = [](const auto& a, const auto& b) { return a.first.start < b.first.start; };
  std::make_heap(runs.begin(), runs.end(), by_start);
  std::sort_heap(runs.begin(), runs.end(), by_start);
  std::vector<DimPiece> order;
  for (const auto& [run, from_at] : runs) order.push_back({from_at, run.stop - run.start});
  return assemble_along(gathered, dim, order);
}

// Replicate -> Shard: this rank's piece of a local split, no communication.
Tensor replicate_to_shard(const MeshDimContext& c, const Tensor& local, const Placement& to) {
  const size_t dim = dim_of(to);
  const IndexRuns kept = piece_positions(to, local.shape()[dim], c.size, c.index);
  std::vector<DimPiece> order;
  for (const IndexRuns::Run& r : kept.runs()) order.push_back({r.start, r.stop - r.start});
  return assemble_along(local, dim, order);
}

// Partial -> Shard: pad every piece to the full chunk, reduce_scatter (other dims than 0 are
// moved to dim 0 first, as funcol does), drop this piece's padding.
Tensor partial_to_shard(const MeshDimContext& c, const Tensor& local, ReduceOp op,
                        const Placement& to) {
  const size_t dim = dim_of(to);
  Tensor input = local;
  int64_t my_padding = 0;
  if (local.shape()[dim] % c.size != 0) {
    const int64_t full = ceil_div(local.shape()[dim], c.size);
    std::vector<Tensor> pieces = chunk_along(local, dim, c.size);
    my_padding = full - pieces[static_cast<size_t>(c.index)].shape()[dim];
    for (Tensor& piece : pieces) piece = pad_end(piece, dim, full - piece.shape()[dim]);
    input = concat_along(pieces, dim);
  }
  if (dim != 0) input = concat_along(chunk_along(input, dim, c.size), 0);
  const Tensor mine = c.backend.reduce_scatter(input, op, c.group);
  return my_padding > 0 ? narrow(mine, dim, 0, mine.shape()[dim] - my_padding) : mine;
}

// Shard(a) -> Shard(b): pad both dims, exchange pieces of b with all_to_all (Gloo: gather along a
// and keep this rank's piece of b), drop the padding.
Tensor shard_to_new_dim(const MeshDimContext& c, const Tensor& local, size_t old_dim,
                        const Placement& to, std::span<const int64_t> logical_shape) {
  const size_t new_dim = dim_of(to);
  const int64_t old_logical = logical_shape[old_dim];
  const int64_t new_logical = logical_shape[new_dim];
  const int64_t old_full = ceil_div(old_logical, c.size);
  const int64_t new_full = ceil_div(new_logical, c.size);
  const bool old_padded = old_logical % c.size != 0;
  const bool new_padded = new_logical % c.size != 0;
  Tensor input = local;
  if (old_padded) input = pad_end(input, old_dim, old_full - input.shape()[old_dim]);
  if (new_padded)
    input = pad_end(input, new_dim, checked_times(new_full, c.size) - input.shape()[new_dim]);
  Tensor out;
  if (c.gloo) {
    c.warn(
        fmt::format("Gloo has no all_to_all: DTensor gathers over the group of {} and keeps "
                    "its piece instead (PyTorch warns once)",
                    c.group.name == "0" ? "WORLD" : "a mesh dim"));
    out = chunk_along(all_gather_along(c, input, old_dim), new_dim,
                      c.size)[static_cast<size_t>(c.index)];
  } else {
    const int64_t length = input.shape()[new_dim] / c.size;
    std::vector<Tensor> pieces;
    for (int64_t i = 0; i < c.size; ++i)
      pieces.push_back(narrow(input, new_dim, i * length, length));
    out = concat_along(c.backend.all_to_all(pieces, c.group), old_dim);
  }
  if (old_padded) out = narrow(out, old_dim, 0, old_logical);
  if (new_padded) {
    const int64_t mine = piece_size(Shard{0}, new_logical, c.size, c.index);
    out = narrow(out, new_dim, 0, out.shape()[new_dim] - (new_full - mine));
  }
  return out;
}

// Shard -> Partial(sum): no communication; the rank's piece at its place in zeros the size of
// the dim, so that summing over the mesh dim gives the tensor back.
Tensor shard_to_partial(const MeshDimContext& c, const Tensor& local, const Shard& from,
                        std::span<const int64_t> logical_shape) {
  const size_t dim = dim_of(from);
  const int64_t logical = logical_shape[dim];
  const auto [start, length] = chunk_range(logical, c.size, c.index);
  const DimPiece pieces[] = {{DimPiece::kZeroPositions, start},
                             {0, length},
                             {DimPiece::kZeroPositions, logical - start - length}};
  return assemble_along(local, dim, pieces);
}

// What DTensor raises for a move it has no rule for.
[[noreturn]] void not_supported(const Placement& from, const Placement& to) {
  throw runtime_error(fmt::format("redistribute from {} to {} not supported yet",
                                  placement_str(from), placement_str(to)));
}

Tensor run_transform(const MeshDimContext& c, const Tensor& local,
                     const RedistributeTransform& step) {
  const Placement& from = step.from;
  const Placement& to = step.to;
  if (is_replicate(to)) {
    if (const auto* p = std::get_if<Partial>(&from)) {
      Tensor reduced = local;
      c.backend.all_reduce(reduced, p->op, c.group);
      return reduced;
    }
    if (const auto* s = std::get_if<Shard>(&from))
      return shard_to_replicate(c, local, *s, step.logical_shape);
    if (const auto* s = std::get_if<StridedShard>(&from))
      return strided_to_replicate(c, local, *s, step.logical_shape);
    not_supported(from, to);
  }
  if (std::holds_alternative<StridedShard>(to)) {
    // Into a _StridedShard, DTensor makes the whole tensor first (all_reduce, or gather), then
    // cuts.
    Tensor whole = local;
    if (const auto* p = std::get_if<Partial>(&from)) {
      c.backend.all_reduce(whole, p->op, c.group);
    } else if (const auto* s = std::get_if<Shard>(&from)) {
      whole = shard_to_replicate(c, local, *s, step.logical_shape);
    } else if (const auto* ss = std::get_if<StridedShard>(&from)) {
      whole = strided_to_replicate(c, local, *ss, step.logical_shape);
    }
    return replicate_to_shard(c, whole, to);
  }
  if (is_shard(to)) {
    if (is_replicate(from)) return replicate_to_shard(c, local, to);
    // From a _StridedShard, DTensor goes through Replicate in one step: gather, then cut.
    if (const auto* s = std::get_if<StridedShard>(&from))
      return replicate_to_shard(c, strided_to_replicate(c, local, *s, step.logical_shape), to);
    if (const auto* p = std::get_if<Partial>(&from)) return partial_to_shard(c, local, p->op, to);
    return shard_to_new_dim(c, local, dim_of(from), to, step.logical_shape);
  }
  if (const auto* s = std::get_if<Shard>(&from); s != nullptr && is_partial(to))
    return shard_to_partial(c, local, *s, step.logical_shape);
  not_supported(from, to);  // other moves to Partial: the public API refuses them first
}

// "mesh dim 1, then mesh dim 0": the order a tensor dim is cut in.
std::string cut_order_str(const std::vector<size_t>& mesh_dims) {
  std::vector<std::string> parts;
  for (const size_t m : mesh_dims) parts.push_back(fmt::format("mesh dim {}", m));
  return fmt::format("{}", fmt::join(parts, ", then "));
}

// The first tensor dim where this rank's piece under `placements` is not its piece under the
// shard order they decode into: with uneven sizes a _StridedShard's split need not be that
// order's nested cut, and PyTorch plans as if it were.
std::optional<size_t> layout_differs_from_order(const DTensorSpec& laid_out,
                                                const ShardOrder& order) {
  const std::vector<int64_t> by_order = shape_after_cuts(laid_out, order);
  const std::vector<int64_t> actual = laid_out.local_shape();
  for (size_t d = 0; d < actual.size(); ++d)
    if (actual[d] != by_order[d]) return d;
  return std::nullopt;
}

// Where the layouts on either side are not the shard orders PyTorch plans with: from the
// source, the gathers it issues disagree across ranks (it fails in the collective, as meshsim
// does, with a word why); into the target, the DTensor it returns does not hold its own
// placements, which meshsim cannot represent.
void check_decoded_layouts(const DTensorSpec& from, const ShardOrder& from_order,
                           const DTensorSpec& to, const ShardOrder& to_order,
                           const RedistributeWarning& warn) {
  if (std::optional<size_t> d = layout_differs_from_order(from, from_order)) {
    warn(fmt::format(
        "{} cuts dim {} ({} positions) into other pieces than the shard order PyTorch decodes "
        "it into ({}); PyTorch plans with that order's sizes, so its gathers disagree across "
        "ranks or put positions in the wrong places",
        placements_str(from.placements), *d, from.shape[*d], cut_order_str(from_order[*d])));
  }
  if (std::optional<size_t> d = layout_differs_from_order(to, to_order)) {
    throw Error(
        PyErrorType::kNotImplementedError,
        fmt::format("redistribute to {}: PyTorch cuts dim {} ({} positions) in the "
                    "shard order it decodes ({}), which gives this rank another piece "
                    "than the _StridedShard layout; the DTensor it returns does not hold "
                    "its placements, and meshsim does not model it",
                    placements_str(to.placements), *d, to.shape[*d], cut_order_str(to_order[*d])));
  }
}

// A placement with a decoded _StridedShard as the plain Shard of its dim, as PyTorch's shard-order
// planner sees it.
std::vector<Placement> as_shards(std::span<const Placement> placements) {
  std::vector<Placement> out;
  for (const Placement& p : placements) {
    const auto* strided = std::get_if<StridedShard>(&p);
    out.push_back(strided ? Placement{Shard{strided->dim}} : p);
  }
  return out;
}

}  // namespace

std::vector<RedistributeTransform> plan_redistribute(const DTensorSpec& spec,
                                                     std::span<const Placement> to) {
  const DeviceMesh& mesh = spec.mesh;
  const std::vector<int64_t>& coordinate = *spec.mesh.coordinate();
  const size_t ndim = mesh.ndim();
  if (ndim == 1) return {{0, spec.placements[0], to[0], spec.shape}};

  // The shape each mesh dim sees: the earlier mesh dims' plain shards already taken (PyTorch's
  // greedy plan leaves a _StridedShard's out).
  std::vector<std::vector<int64_t>> logical{spec.shape};
  for (size_t i = 0; i + 1 < ndim; ++i) {
    std::vector<int64_t> next = logical[i];
    const Placement& p = spec.placements[i];
    if (std::holds_alternative<Shard>(p)) {
      next[dim_of(p)] = piece_size(p, next[dim_of(p)], mesh.size(i), coordinate[i]);
    }
    logical.push_back(std::move(next));
  }

  std::vector<RedistributeTransform> plan;
  std::vector<Placement> current = spec.placements;
  int64_t shards = 1;
  for (size_t i = 0; i < ndim; ++i)
    if (is_shard(spec.placements[i])) shards = checked_times(shards, mesh.size(i));
  if (shards > 1) {
    // Inner mesh dims first: a target shard whose tensor dim the outer mesh dims shard
    // differently (nested sharding) goes through Replicate.
    for (size_t m = ndim; m-- > 0;) {
      Placement target = to[m];
      if (std::holds_alternative<Shard>(target)) {
        const int64_t dim = sharded_dim(target);
        bool aligned = true;
        for (size_t i = 0; i < m; ++i)
          aligned = aligned && is_plain_shard_of(current[i], dim) == is_plain_shard_of(to[i], dim);
        if (!aligned) target = Replicate{};
      }
      if (!(current[m] == target)) {
        plan.push_back({m, current[m], target, logical[m]});
        current[m] = target;
      }
    }
  }
  for (size_t m = 0; m < ndim; ++m) {
    if (!(current[m] == to[m])) {
      plan.push_back({m, current[m], to[m], logical[m]});
      current[m] = to[m];
    }
  }
  return plan;
}

DTensor redistribute(const DTensor& t, const DeviceMesh& mesh, std::vector<Placement> to,
                     Backend& backend, const MeshDimGroup& group_of,
                     const RedistributeWarning& warn, int64_t devices_per_host) {
  const DTensorSpec& spec = t.spec();
  const auto tensor_ndim = static_cast<int64_t>(spec.shape.size());
  for (size_t i = 0; i < to.size() && i < spec.placements.size(); ++i) {
    const Placement& from = spec.placements[i];
    // A new Partial only from a Shard (not a _StridedShard): each rank's piece in zeros.
    const auto* partial = std::get_if<Partial>(&to[i]);
    if (partial != nullptr && !(to[i] == from) &&
        !(std::holds_alternative<Shard>(from) && partial->op == ReduceOp::kSum)) {
      throw runtime_error(fmt::format(
          "Can not redistribute from {} to {}, only Shard to Partial(sum) redistribution is "
          "supported!",
          placement_str(from), placement_str(to[i])));
    }
    to[i] = with_dim_normalized(std::move(to[i]), tensor_ndim);
  }
  check_no_mixed_partials(spec.placements);
  check_no_mixed_partials(to);
  DTensorSpec target{spec.mesh, std::move(to), spec.shape, spec.dtype};
  DTensor::zeros(target, Tensor::Storage::kMeta);  // placements that do not fit throw here
  // Placements PyTorch compares equal leave the DTensor as it is, spec (and mesh) included.
  if (std::ranges::equal(spec.placements, target.placements)) return t;
  if (!(mesh == spec.mesh))
    throw Error(PyErrorType::kNotImplementedError, "Cross device mesh comm not supported yet!");

  Tensor local = t.local();
  if (t.participates()) {
    std::optional<ShardOrder> from_order, to_order;
    if (has_strided(spec.placements) || has_strided(target.placements)) {
      from_order = decode_shard_order(spec.placements, mesh.shape(), spec.shape.size());
      to_order = decode_shard_order(target.placements, mesh.shape(), spec.shape.size());
    }
    if (from_order && to_order) check_decoded_layouts(spec, *from_order, target, *to_order, warn);
    const std::vector<RedistributeTransform> plan =
        from_order && to_order
            ? plan_min_cost(spec, as_shards(spec.placements), *from_order,
                            as_shards(target.placements), *to_order, devices_per_host)
            : plan_redistribute(spec, target.placements);
    for (const PlannedTransform& step :
         merge_over_flattened_meshes(plan, spec, target.placements, warn)) {
      const DeviceMesh& on = step.flattened ? *step.flattened : spec.mesh;
      const RedistributeTransform& move = step.transform;
      // PyTorch merges gathers of a _StridedShard too, then refuses to run them.
      const bool strided = std::holds_alternative<StridedShard>(move.from) ||
                           std::holds_alternative<StridedShard>(move.to);
      if (step.flattened && strided) {
        throw Error(PyErrorType::kAssertionError,
                    "_StridedShard redistribute assumes no flattened transforms");
      }
      if (on.size(move.mesh_dim) == 1 || move.from == move.to) continue;  // nothing moves
      // PyTorch's true division makes an integer shard float32, no longer the DTensor's dtype.
      if (step.avg_scale > 1 && !is_floating(local.dtype())) {
        throw Error(PyErrorType::kNotImplementedError,
                    fmt::format("a merged Partial(avg) of dtype {}: PyTorch divides the sum into "
                                "a float32 shard that no longer matches the DTensor's dtype, and "
                                "meshsim does not model it",
                                dtype_name(local.dtype())));
      }
      local = run_transform(context_of(on, move.mesh_dim, backend, group_of, warn), local, move);
      if (step.avg_scale > 1) local = divided_by(local, step.avg_scale);
    }
  }
  DTensor out = DTensor::from_local_shard(std::move(target), std::move(local));
  out.set_requires_grad(t.requires_grad());
  return out;
}

}  // namespace meshsim
