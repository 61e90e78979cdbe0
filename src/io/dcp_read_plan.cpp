#include "src/io/dcp_read_plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "src/checked_math.hpp"
#include "src/dtensor/local_shard.hpp"
#include "src/error.hpp"

namespace meshsim {
namespace {

// Plans are for real jobs; a mesh past this is a typo, and every rank costs memory here.
constexpr int64_t kMaxPlannedRanks = int64_t{1} << 22;

uint64_t numel_of(std::span<const int64_t> sizes) {
  return static_cast<uint64_t>(*checked_product(sizes));
}

std::vector<int64_t> coordinate_of(int64_t rank, std::span<const int64_t> mesh_shape) {
  std::vector<int64_t> out(mesh_shape.size());
  for (size_t d = mesh_shape.size(); d-- > 0;) {
    out[d] = rank % mesh_shape[d];
    rank /= mesh_shape[d];
  }
  return out;
}

// Why `placements` cannot lay out a tensor of `ndim` dims, or "".
std::string placement_mismatch(std::span<const Placement> placements, int64_t ndim) {
  for (const Placement& p : placements) {
    if (!std::holds_alternative<Shard>(p) && !std::holds_alternative<StridedShard>(p)) continue;
    const int64_t dim = sharded_dim(p);
    if (dim >= ndim || dim < -ndim) {
      return fmt::format("{} does not apply to a {}-d tensor", placement_name(p), ndim);
    }
  }
  return "";
}

}  // namespace

DcpChunkIndex::DcpChunkIndex(const DcpEntry& entry) : entry_(entry) {
  order_.resize(entry.chunks.size());
  std::iota(order_.begin(), order_.end(), 0);
  if (entry.shape.empty()) return;
  std::sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
    return entry.chunks[a].offsets[0] < entry.chunks[b].offsets[0];
  });
  int64_t end = 0;
  for (size_t i : order_) {
    end = std::max(end, entry.chunks[i].offsets[0] + entry.chunks[i].sizes[0]);
    max_end_.push_back(end);
  }
}

std::vector<DcpRead> DcpChunkIndex::overlapping(size_t entry_index,
                                                const LocalShard& region) const {
  std::vector<DcpRead> out;
  if (entry_.shape.empty()) {
    for (size_t i : order_) out.push_back({entry_index, i, {}, {}});
    return out;
  }
  const int64_t begin = region.offset[0];
  const int64_t end = begin + region.shape[0];
  const auto upper = std::lower_bound(order_.begin(), order_.end(), end, [&](size_t c, int64_t v) {
    return entry_.chunks[c].offsets[0] < v;
  });
  for (size_t at = static_cast<size_t>(upper - order_.begin()); at-- > 0;) {
    if (max_end_[at] <= begin) break;
    const DcpChunk& chunk = entry_.chunks[order_[at]];
    DcpRead read{entry_index, order_[at], std::vector<int64_t>(region.shape.size()),
                 std::vector<int64_t>(region.shape.size())};
    bool empty = false;
    for (size_t d = 0; d < region.shape.size() && !empty; ++d) {
      const int64_t lo = std::max(region.offset[d], chunk.offsets[d]);
      const int64_t hi =
          std::min(region.offset[d] + region.shape[d], chunk.offsets[d] + chunk.sizes[d]);
      empty = hi <= lo;
      read.offsets[d] = lo;
      read.sizes[d] = hi - lo;
    }
    if (!empty) out.push_back(std::move(read));
  }
  std::sort(out.begin(), out.end(),
            [](const DcpRead& a, const DcpRead& b) { return a.chunk < b.chunk; });
  return out;
}

DcpReadPlan plan_dcp_read(const DcpMetadata& metadata, const DcpReadRequest& request) {
  const std::vector<int64_t>& mesh = request.mesh_shape;
  if (mesh.empty()) throw value_error("the mesh has no dimensions");
  if (request.placements.size() != mesh.size()) {
    throw value_error(fmt::format("{} placements for a {}-d mesh: give one per mesh dim",
                                  request.placements.size(), mesh.size()));
  }
  for (const Placement& p : request.placements) {
    if (std::holds_alternative<Partial>(p)) {
      throw value_error(
          "a checkpoint cannot be loaded into Partial placements (DCP refuses them: \"Any "
          "checkpointing related operations are not supported for DTensor with partial "
          "placements!\")");
    }
  }
  for (int64_t size : mesh) {
    if (size <= 0) throw value_error(fmt::format("mesh dimension {} is not positive", size));
  }
  const std::optional<int64_t> world = checked_product(mesh);
  if (!world || *world > kMaxPlannedRanks) {
    throw value_error(fmt::format("a mesh of [{}] has more than the {} ranks a plan covers",
                                  fmt::join(mesh, ", "), kMaxPlannedRanks));
  }
  if (request.detail_rank && (*request.detail_rank < 0 || *request.detail_rank >= *world)) {
    throw value_error(
        fmt::format("rank {} is not in a mesh of {} ranks", *request.detail_rank, *world));
  }

  DcpReadPlan plan;
  plan.ranks.resize(static_cast<size_t>(*world));
  std::vector<uint64_t> largest_in_flight(plan.ranks.size(), 0);
  std::vector<size_t> wanted;
  if (request.names.empty()) {
    wanted.resize(metadata.entries.size());
    std::iota(wanted.begin(), wanted.end(), 0);
  }
  for (const std::string& name : request.names) {
    const auto found = metadata.index.find(name);
    if (found == metadata.index.end()) {
      plan.missing.push_back(name);
    } else {
      wanted.push_back(found->second);
    }
  }

  for (size_t e : wanted) {
    const DcpEntry& entry = metadata.entries[e];
    if (!entry.is_tensor) {  // every rank loads the object whole
      ++plan.objects;
      for (size_t r = 0; r < plan.ranks.size(); ++r) {
        DcpRankRead& rank = plan.ranks[r];
        ++rank.items;
        rank.file_bytes += entry.object.length;
        largest_in_flight[r] = std::max(largest_in_flight[r], entry.object.length);
        if (request.detailed(r)) rank.reads.push_back({e, 0, {}, {}});
      }
      continue;
    }
    const int64_t ndim = static_cast<int64_t>(entry.shape.size());
    // A 0-d tensor has nothing to shard: every rank holds it whole.
    const std::vector<Placement> whole(ndim == 0 ? mesh.size() : 0, Replicate{});
    const std::span<const Placement> asked = ndim == 0
                                                 ? std::span<const Placement>(whole)
                                                 : std::span<const Placement>(request.placements);
    if (std::string why = placement_mismatch(asked, ndim); !why.empty()) {
      plan.mismatched.push_back(fmt::format("{}: {}", entry.name, why));
      continue;
    }
    std::vector<Placement> placements;
    for (const Placement& p : asked) placements.push_back(with_dim_normalized(p, ndim));
    if (std::string gap = dcp_coverage_gap(entry); !gap.empty()) {
      plan.uncovered.push_back(std::move(gap));
    }
    ++plan.tensors;
    const DcpChunkIndex index(entry);
    for (size_t r = 0; r < plan.ranks.size(); ++r) {
      const LocalShard local = compute_local_shape_and_global_offset(
          entry.shape, mesh, coordinate_of(static_cast<int64_t>(r), mesh), placements);
      DcpRankRead& rank = plan.ranks[r];
      const uint64_t local_numel = numel_of(local.shape);
      rank.holds_bytes += local_numel * entry.element_size;
      if (local_numel == 0 && !entry.shape.empty()) continue;
      for (DcpRead& read : index.overlapping(e, local)) {
        const DcpChunk& chunk = entry.chunks[read.chunk];
        ++rank.items;
        rank.file_bytes += chunk.length;
        largest_in_flight[r] = std::max(largest_in_flight[r],
                                        chunk.length + numel_of(chunk.sizes) * entry.element_size);
        if (request.detailed(r)) rank.reads.push_back(std::move(read));
      }
    }
  }
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    plan.ranks[r].peak_bytes = plan.ranks[r].holds_bytes + largest_in_flight[r];
  }
  return plan;
}

}  // namespace meshsim
