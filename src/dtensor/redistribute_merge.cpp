#include "src/dtensor/redistribute_merge.hpp"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "src/checked_math.hpp"
#include "src/dtensor/local_shard.hpp"
#include "src/enum_names.hpp"

namespace meshsim {

namespace {

enum class CollectiveKind { kNone, kAllGather, kAllReduce, kReduceScatter, kAllToAll };

constexpr EnumName<CollectiveKind> kCollectiveKindNames[] = {
    {CollectiveKind::kAllGather, "all_gather"},
    {CollectiveKind::kAllReduce, "all_reduce"},
    {CollectiveKind::kReduceScatter, "reduce_scatter"},
    {CollectiveKind::kAllToAll, "all_to_all"},
};

std::string_view kind_name(CollectiveKind kind) {
  return name_in(kCollectiveKindNames, kind, "local");
}

// The collective a transform issues, as PyTorch classifies it for merging.
CollectiveKind kind_of(const RedistributeTransform& t) {
  const bool from_partial = std::holds_alternative<Partial>(t.from);
  const bool from_shard = sharded_dim(t.from) >= 0;
  const bool to_replicate = std::holds_alternative<Replicate>(t.to);
  const bool to_shard = sharded_dim(t.to) >= 0;
  if (from_partial && to_replicate) return CollectiveKind::kAllReduce;
  if (from_partial && to_shard) return CollectiveKind::kReduceScatter;
  if (from_shard && to_replicate) return CollectiveKind::kAllGather;
  if (from_shard && to_shard) return CollectiveKind::kAllToAll;
  return CollectiveKind::kNone;
}

bool mergeable_kind(CollectiveKind kind) {
  return kind == CollectiveKind::kAllGather || kind == CollectiveKind::kAllReduce ||
         kind == CollectiveKind::kReduceScatter;
}

// Same placements both sides, or sums and averages into the same target: an average is a sum
// divided afterwards.
bool mergeable_with(const RedistributeTransform& a, const RedistributeTransform& b) {
  if (a.from == b.from && a.to == b.to) return true;
  if (!(a.to == b.to)) return false;
  const auto sum_or_avg = [](const Placement& p) {
    const auto* partial = std::get_if<Partial>(&p);
    return partial != nullptr && (partial->op == ReduceOp::kSum || partial->op == ReduceOp::kAvg);
  };
  return sum_or_avg(a.from) && sum_or_avg(b.from);
}

// `"dp", "tp"`, or `0, 1` on a mesh without dim names.
std::string dims_str(const DeviceMesh& mesh, std::span<const size_t> dims) {
  std::vector<std::string> parts;
  for (const size_t d : dims) {
    parts.push_back(mesh.dim_names() ? fmt::format("\"{}\"", (*mesh.dim_names())[d])
                                     : std::to_string(d));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

// Why a run of transforms stays as it is.
enum class NoMerge { kNonAscending, kNoFlattenedMesh, kUnevenShape };

// Piece sizes rank by rank, run-length encoded: (size, how many ranks in a row).
using SizeRuns = std::vector<std::pair<int64_t, int64_t>>;

void append_run(SizeRuns& runs, int64_t size, int64_t count) {
  if (count == 0) return;
  if (!runs.empty() && runs.back().first == size) {
    runs.back().second += count;
  } else {
    runs.emplace_back(size, count);
  }
}

// torch.chunk's piece sizes for n positions over `pieces` ranks: full chunks, maybe a shorter
// one, then empty pieces.
SizeRuns chunk_sizes(int64_t n, int64_t pieces) {
  SizeRuns out;
  const int64_t q = ceil_div(n, pieces);
  const int64_t full = q == 0 ? 0 : n / q;
  const int64_t rest = n - full * q;
  append_run(out, q, full);
  append_run(out, rest, rest > 0 ? 1 : 0);
  append_run(out, 0, pieces - full - (rest > 0 ? 1 : 0));
  return out;
}

// The piece sizes that nested shards over `dims` (outer first) cut n positions into, flattened
// rank by flattened rank; nullopt once a level has more than `max_runs` runs.
std::optional<SizeRuns> nested_sizes(int64_t n, const DeviceMesh& mesh,
                                     std::span<const size_t> dims, size_t max_runs) {
  SizeRuns nested{{n, 1}};
  for (const size_t d : dims) {
    SizeRuns next;
    for (const auto& [size, count] : nested) {
      const SizeRuns inner = chunk_sizes(size, mesh.size(d));
      if (inner.size() == 1) {
        append_run(next, inner.front().first, inner.front().second * count);
        continue;
      }
      for (int64_t i = 0; i < count && next.size() <= max_runs; ++i) {
        for (const auto& [inner_size, inner_count] : inner)
          append_run(next, inner_size, inner_count);
      }
    }
    if (next.size() > max_runs) return std::nullopt;
    nested = std::move(next);
  }
  return nested;
}

// The sizes of every piece, for a message about a handful of ranks.
std::vector<int64_t> expanded(const SizeRuns& runs) {
  std::vector<int64_t> out;
  for (const auto& [size, count] : runs) out.insert(out.end(), static_cast<size_t>(count), size);
  return out;
}

// A merged gather of uneven nested shards: PyTorch pads every piece to the even chunk size and
// cuts the result as if the pieces were even chunks, so positions land in the wrong places.
std::optional<std::string> silently_wrong_gather(const PlannedTransform& merged,
                                                 std::span<const size_t> dims,
                                                 const DTensorSpec& spec,
                                                 std::span<const Placement> to) {
  const std::vector<int64_t>& shape = merged.transform.logical_shape;
  // Positions land in the wrong places, but a tensor without elements has no values to misplace.
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return std::nullopt;
  const auto dim = static_cast<size_t>(sharded_dim(merged.transform.from));
  const int64_t n = shape[dim];
  const int64_t ranks = merged.flattened->size();  // the merged dims' ranks
  const SizeRuns even = chunk_sizes(n, ranks);
  // Even chunks have at most three runs (full, shorter, empty), and so has every outer level of
  // a nesting that ends in them (its pieces are sums of consecutive even chunks): a level with
  // more cannot, which keeps the check a few steps per mesh dim at any world size.
  if (nested_sizes(n, spec.mesh, dims, 3) == even) return std::nullopt;
  // Spelled out for a handful of ranks; past that the sentence would be a wall of numbers.
  std::string detail;
  if (ranks <= 8) {
    detail = fmt::format(" (pieces of {} where even chunks are {})",
                         fmt::join(expanded(*nested_sizes(n, spec.mesh, dims, 8)), ", "),
                         fmt::join(expanded(even), ", "));
  }
  return fmt::format(
      "redistribute {} -> {} gathers mesh dims {} with one all_gather on flattened mesh \"{}\" "
      "as if their shards split dim {} ({}) into {} even chunks; the nested shards have other "
      "sizes{}, so PyTorch 2.15 returns wrong values without a word",
      placements_str(spec.placements), placements_str(to), dims_str(spec.mesh, dims),
      (*merged.flattened->dim_names())[0], dim, n, ranks, detail);
}

// What merging `run` (two or more transforms of one kind, in plan order) gives, or why not.
struct MergeAttempt {
  std::optional<PlannedTransform> merged;
  NoMerge reason = NoMerge::kNoFlattenedMesh;
  std::vector<size_t> dims;   // ascending
  bool sum_averaged = false;  // a merged reduction that averages what should be summed
};

MergeAttempt try_merge(std::span<const RedistributeTransform> run, const DeviceMesh& mesh) {
  MergeAttempt attempt;
  std::vector<size_t> in_order;
  for (const RedistributeTransform& t : run) in_order.push_back(t.mesh_dim);
  attempt.dims = in_order;
  std::sort(attempt.dims.begin(), attempt.dims.end());
  const CollectiveKind kind = kind_of(run.front());
  // A flattened mesh runs its dims outer to inner: scatters must come outer first, gathers
  // (which undo the shards inner first) the other way round.
  const bool ascending = in_order == attempt.dims;
  const bool descending = std::equal(in_order.begin(), in_order.end(), attempt.dims.rbegin());
  if ((kind == CollectiveKind::kReduceScatter && !ascending) ||
      (kind == CollectiveKind::kAllGather && !descending)) {
    attempt.reason = NoMerge::kNonAscending;
    return attempt;
  }
  std::optional<DeviceMesh> flattened = mesh.flattened_over(attempt.dims);
  if (!flattened) {
    attempt.reason = NoMerge::kNoFlattenedMesh;
    return attempt;
  }
  // The shape before any of these shards is taken: the largest on the dim they cut (the first
  // such transform on a tie, as Python's max picks).
  const RedistributeTransform* outermost = &run.front();
  if (kind != CollectiveKind::kAllReduce) {
    const auto dim = static_cast<size_t>(
        sharded_dim(kind == CollectiveKind::kAllGather ? run.front().from : run.front().to));
    for (const RedistributeTransform& t : run)
      if (t.logical_shape[dim] > outermost->logical_shape[dim]) outermost = &t;
    const int64_t ranks = flattened->size();  // the merged dims' ranks
    if (kind == CollectiveKind::kReduceScatter && outermost->logical_shape[dim] % ranks != 0) {
      attempt.reason = NoMerge::kUnevenShape;
      return attempt;
    }
  }
  PlannedTransform merged{{0, run.front().from, run.front().to, outermost->logical_shape},
                          std::move(flattened)};
  if (std::holds_alternative<Partial>(merged.transform.from)) {
    for (const RedistributeTransform& t : run) {
      if (std::get<Partial>(t.from).op == ReduceOp::kAvg) merged.avg_scale *= mesh.size(t.mesh_dim);
    }
    if (merged.avg_scale > 1) merged.transform.from = Partial{ReduceOp::kSum};
    // Averages only over mesh dims of one rank keep the first transform's op: if that is avg,
    // the sums of the other dims are averaged too.
    for (const RedistributeTransform& t : run) {
      attempt.sum_averaged =
          attempt.sum_averaged ||
          (merged.transform.from == Placement{Partial{ReduceOp::kAvg}} &&
           std::get<Partial>(t.from).op == ReduceOp::kSum && mesh.size(t.mesh_dim) > 1);
    }
  }
  attempt.merged = std::move(merged);
  return attempt;
}

std::string missed_merge_warning(const MergeAttempt& attempt, CollectiveKind kind, size_t count,
                                 const DTensorSpec& spec, std::span<const Placement> to) {
  const std::string dims = dims_str(spec.mesh, attempt.dims);
  const std::string what = fmt::format(
      "redistribute {} -> {} plans {} {} steps one after another, on mesh dims {}",
      placements_str(spec.placements), placements_str(to), count, kind_name(kind), dims);
  switch (attempt.reason) {
    case NoMerge::kNonAscending:
      return fmt::format(
          "{}; PyTorch merges {} collectives only when their mesh dims come {} (PyTorch warns)",
          what, kind_name(kind),
          kind == CollectiveKind::kAllGather ? "inner first" : "outer first");
    case NoMerge::kNoFlattenedMesh:
      if (!spec.mesh.dim_names()) {
        return fmt::format(
            "{}; on a mesh with dim names, a flattened mesh over those dims would let DTensor "
            "issue one (PyTorch warns)",
            what);
      }
      return fmt::format(
          "{}; with a flattened mesh over those dims (mesh[{}]._flatten()) DTensor issues one "
          "(PyTorch warns)",
          what, dims);
    case NoMerge::kUnevenShape:
      break;
  }
  return fmt::format(
      "{}; PyTorch cannot merge them: the dim they scatter does not split evenly over their "
      "ranks (PyTorch warns)",
      what);
}

}  // namespace

std::vector<PlannedTransform> merge_over_flattened_meshes(
    const std::vector<RedistributeTransform>& plan, const DTensorSpec& spec,
    std::span<const Placement> to, const RedistributeWarning& warn) {
  std::vector<PlannedTransform> out;
  for (size_t i = 0; i < plan.size();) {
    const CollectiveKind kind = kind_of(plan[i]);
    size_t end = i + 1;
    if (mergeable_kind(kind)) {
      while (end < plan.size() && mergeable_kind(kind_of(plan[end])) &&
             mergeable_with(plan[end], plan[i]))
        ++end;
    }
    const std::span<const RedistributeTransform> run(plan.data() + i, end - i);
    MergeAttempt attempt;
    if (run.size() >= 2) attempt = try_merge(run, spec.mesh);
    if (attempt.merged) {
      if (attempt.sum_averaged) {
        warn(fmt::format(
            "redistribute {} -> {} reduces mesh dims {} in one {} on flattened mesh \"{}\" with "
            "avg, the op of the first (a dim of one rank), so the sums over the others are "
            "averaged: PyTorch 2.15 returns wrong values without a word",
            placements_str(spec.placements), placements_str(to), dims_str(spec.mesh, attempt.dims),
            kind_name(kind), (*attempt.merged->flattened->dim_names())[0]));
      }
      // A merged gather of _StridedShards is refused before it runs.
      if (kind == CollectiveKind::kAllGather &&
          !std::holds_alternative<StridedShard>(attempt.merged->transform.from)) {
        if (std::optional<std::string> wrong =
                silently_wrong_gather(*attempt.merged, attempt.dims, spec, to))
          warn(std::move(*wrong));
      }
      out.push_back(std::move(*attempt.merged));
    } else {
      if (run.size() >= 2) warn(missed_merge_warning(attempt, kind, run.size(), spec, to));
      for (const RedistributeTransform& t : run) out.push_back({t, std::nullopt});
    }
    i = end;
  }
  return out;
}

}  // namespace meshsim
