#include "sim/report/rng_overlap.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "sim/runtime/hang_report.hpp"

namespace meshsim::sim {

namespace {

// Draws that read exactly the same counters for the same op and shard: one entry, many ranks.
struct DrawKey {
  int64_t seed_epoch;
  uint64_t seed, begin, end;  // counter blocks [begin, end)
  std::string file;
  int64_t line, column;
  std::string tensor;
  int64_t shard;  // -1: a plain tensor

  auto tied() const {
    return std::tie(seed_epoch, seed, begin, end, file, line, column, tensor, shard);
  }
  bool operator<(const DrawKey& o) const { return tied() < o.tied(); }
  // Whether two draws come from the same op on the same shard (replicas of each other).
  bool same_source(const DrawKey& o) const {
    return std::tie(file, line, column, tensor, shard) ==
           std::tie(o.file, o.line, o.column, o.tensor, o.shard);
  }
  // Whether both read the same stream (and a counter block in common is shared numbers).
  bool same_stream(const DrawKey& o) const { return seed_epoch == o.seed_epoch && seed == o.seed; }
};

struct DrawGroup {
  size_t draw;  // the first draw with this key
  std::vector<int64_t> ranks;
};

// Steps the sweep may take (comparisons and bookkeeping); past this the count is a lower bound
// and the report says so.
constexpr uint64_t kMaxSteps = uint64_t{50} << 20;

}  // namespace

RngOverlaps find_overlaps(const std::vector<DrawRecord>& draws, size_t max_reported) {
  RngOverlaps out;
  std::map<DrawKey, DrawGroup> groups;
  for (size_t i = 0; i < draws.size(); ++i) {
    const DrawRecord& r = draws[i];
    const uint64_t begin = r.draw.offset / 4;
    DrawKey key{r.draw.seed_epoch,        r.draw.seed,  begin,
                begin + r.draw.words / 4, r.where.file, r.where.line,
                r.where.column,           r.tensor,     r.draw.shard_index.value_or(-1)};
    auto [it, fresh] = groups.try_emplace(std::move(key), DrawGroup{i, {}});
    it->second.ranks.push_back(r.rank);
  }
  // The map orders keys by epoch, seed, then first block: a sweep keeps the draws still open.
  std::vector<std::map<DrawKey, DrawGroup>::const_iterator> open;
  uint64_t steps = 0;
  for (auto it = groups.cbegin(); it != groups.cend() && steps <= kMaxSteps; ++it) {
    const DrawKey& k = it->first;
    steps += open.size();
    std::erase_if(
        open, [&](const auto& o) { return !o->first.same_stream(k) || o->first.end <= k.begin; });
    for (const auto& o : open) {
      if (++steps > kMaxSteps) break;
      if (o->first.same_source(k)) continue;
      ++out.count;
      if (out.reported.size() < max_reported) {
        out.reported.push_back({draws[o->second.draw], draws[it->second.draw], o->second.ranks,
                                it->second.ranks, k.begin, std::min(o->first.end, k.end)});
      }
    }
    if (k.end > k.begin) open.push_back(it);
  }
  out.stopped = steps > kMaxSteps;
  return out;
}

void find_rng_overlaps(ScenarioResult& result) {
  RngOverlaps found = find_overlaps(result.draws, ScenarioResult::kMaxReportedOverlaps);
  result.overlaps = std::move(found.reported);
  result.overlap_count = found.count;
  if (found.stopped) {
    result.warnings.push_back(
        {"rng overlap",
         fmt::format("the RNG overlap check stopped after {} steps: {} overlaps is a lower bound",
                     kMaxSteps, result.overlap_count),
         {}});
  }
}

std::string describe_overlap(const RngOverlap& overlap) {
  auto side = [&](const DrawRecord& r, const std::vector<int64_t>& ranks) {
    const std::string shard =
        r.draw.shard_index ? fmt::format("shard {}, ", *r.draw.shard_index) : std::string();
    return fmt::format("{} into \"{}\" ({}, {}rank{} {})", r.draw.op, r.tensor, r.where.to_string(),
                       shard, ranks.size() == 1 ? "" : "s", rank_ranges(ranks));
  };
  return fmt::format(
      "seed {}: {} and {} both read Philox counter blocks [{}, {}): they draw the same random "
      "numbers",
      overlap.first.draw.seed, side(overlap.first, overlap.first_ranks),
      side(overlap.second, overlap.second_ranks), overlap.block_begin, overlap.block_end);
}

}  // namespace meshsim::sim
