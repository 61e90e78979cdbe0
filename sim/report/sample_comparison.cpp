#include "sim/report/sample_comparison.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "sim/runtime/group_label.hpp"

namespace meshsim::sim {

namespace {

// The Philox counter blocks a draw read, [begin, end), under its seed.
struct Counters {
  uint64_t seed = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
};

Counters counters_of(const Draw& d) {
  const uint64_t begin = d.offset / 4;
  return {d.seed, begin, begin + d.words / 4};
}

Json blocks_json(const Counters& c) {
  return Json::array({c.begin, c.end});
}

const ShardSample* sample_of(const std::vector<HeldSample>& held, int64_t rank) {
  for (const auto& [r, s] : held) {
    if (r == rank) return s;
  }
  return nullptr;
}

bool all_drawn(const std::vector<HeldSample>& held) {
  return std::all_of(held.begin(), held.end(),
                     [](const HeldSample& h) { return h.second->numel == 0 || h.second->drawn; });
}

// Problems are built only while the list has room: at scale there can be thousands.
bool has_room(const SampleVerdict& verdict) {
  return verdict.problems.size() < kMaxListedProblems;
}

// Groups of ranks in one copy of the mesh that hold equal values but differ in an across dim.
std::vector<std::vector<int64_t>> equal_values_across(const std::vector<HeldSample>& held) {
  std::map<std::pair<int64_t, uint64_t>, std::map<std::vector<int64_t>, std::vector<int64_t>>>
      by_digest;
  for (const auto& [r, s] : held) {
    // Empty shards (uneven sharding) hold no values to repeat.
    if (s->numel > 0) by_digest[{s->replica, s->digest}][s->across].push_back(r);
  }
  std::vector<std::vector<int64_t>> out;
  for (const auto& [digest, groups] : by_digest) {
    if (groups.size() < 2) continue;
    std::vector<int64_t> ranks;
    for (const auto& [coord, in_group] : groups)
      ranks.insert(ranks.end(), in_group.begin(), in_group.end());
    std::sort(ranks.begin(), ranks.end());
    out.push_back(std::move(ranks));
  }
  std::sort(out.begin(), out.end());  // by lowest rank, for the report
  return out;
}

// One drawn sample in the counter sweep of its copy of the mesh and its seed.
struct Drawn {
  Counters counters;
  const std::vector<int64_t>* across;
  int64_t rank;
};

// Shards that read a counter block in common hold the same random numbers (the first elements of
// both, for kernels of different sizes). Identical ranges are listed as one group of ranks; ranges
// that only overlap, pair by pair.
void compare_counters(const std::string& tensor, const std::vector<HeldSample>& held,
                      SampleVerdict& verdict) {
  std::map<std::pair<int64_t, uint64_t>, std::vector<Drawn>> streams;
  for (const auto& [r, s] : held) {
    if (s->numel == 0) continue;
    const Counters c = counters_of(*s->drawn);
    streams[{s->replica, c.seed}].push_back({c, &s->across, r});
  }
  for (auto& [stream, drawn] : streams) {
    std::sort(drawn.begin(), drawn.end(), [](const Drawn& a, const Drawn& b) {
      return std::tie(a.counters.begin, a.counters.end, *a.across, a.rank) <
             std::tie(b.counters.begin, b.counters.end, *b.across, b.rank);
    });
    // Exactly the same counters.
    for (size_t i = 0; i < drawn.size();) {
      size_t j = i;
      bool differs = false;
      while (j < drawn.size() && drawn[j].counters.begin == drawn[i].counters.begin &&
             drawn[j].counters.end == drawn[i].counters.end) {
        differs = differs || *drawn[j].across != *drawn[i].across;
        ++j;
      }
      if (differs && has_room(verdict)) {
        std::vector<int64_t> ranks;
        for (size_t k = i; k < j; ++k) ranks.push_back(drawn[k].rank);
        std::sort(ranks.begin(), ranks.end());
        verdict.problems.push_back({{"tensor", tensor},
                                    {"same_philox_counters_on_ranks", rank_ranges(ranks)},
                                    {"seed", stream.second},
                                    {"counter_blocks", blocks_json(drawn[i].counters)},
                                    {"first_values", sample_of(held, ranks[0])->preview}});
      }
      i = j;
    }
    // Ranges that overlap without being equal: each is checked against the earlier one reaching
    // furthest, and the one reaching furthest among those of another across coordinate.
    const Drawn* furthest = nullptr;
    const Drawn* furthest_elsewhere = nullptr;  // across differs from furthest's
    for (const Drawn& d : drawn) {
      const Drawn* other =
          furthest != nullptr && *furthest->across != *d.across ? furthest : furthest_elsewhere;
      const bool same_range = other != nullptr && other->counters.begin == d.counters.begin &&
                              other->counters.end == d.counters.end;  // listed above
      if (other != nullptr && other->counters.end > d.counters.begin && !same_range &&
          has_room(verdict)) {
        verdict.problems.push_back(
            {{"tensor", tensor},
             {"seed", stream.second},
             {"overlapping_philox_counters",
              Json::array({{{"ranks", rank_ranges({other->rank})},
                            {"counter_blocks", blocks_json(other->counters)}},
                           {{"ranks", rank_ranges({d.rank})},
                            {"counter_blocks", blocks_json(d.counters)}}})}});
      }
      if (furthest == nullptr || d.counters.end > furthest->counters.end) {
        if (furthest != nullptr && *furthest->across != *d.across) furthest_elsewhere = furthest;
        furthest = &d;
      } else if (*d.across != *furthest->across &&
                 (furthest_elsewhere == nullptr ||
                  d.counters.end > furthest_elsewhere->counters.end)) {
        furthest_elsewhere = &d;
      }
    }
  }
}

std::string describe_ranks(const std::vector<int64_t>& ranks, const ShardSample& first) {
  return fmt::format("ranks {} ({})", rank_ranges(ranks), first.preview.dump());
}

}  // namespace

void compare_distinct(const std::string& tensor, const std::vector<HeldSample>& held,
                      SampleVerdict& verdict) {
  if (!all_drawn(held)) {
    verdict.by_draws = false;
    for (const std::vector<int64_t>& ranks : equal_values_across(held)) {
      if (!has_room(verdict)) break;
      verdict.problems.push_back({{"tensor", tensor},
                                  {"same_values_on_ranks", rank_ranges(ranks)},
                                  {"first_values", sample_of(held, ranks[0])->preview}});
    }
    return;
  }
  const size_t problems_before = verdict.problems.size();
  compare_counters(tensor, held, verdict);
  // Once the list is full, a later tensor's problems go unlisted: whether it failed is unknown
  // here, so its equal values are not called chance.
  if (verdict.problems.size() != problems_before || !has_room(verdict)) return;
  // Every pair drew other counters: equal values can only be chance.
  for (const std::vector<int64_t>& ranks : equal_values_across(held)) {
    ++verdict.coincidence_count;
    if (verdict.coincidences.size() < kMaxListedProblems)
      verdict.coincidences.push_back(describe_ranks(ranks, *sample_of(held, ranks[0])));
  }
}

void compare_equal(const std::string& tensor, const std::vector<HeldSample>& held,
                   SampleVerdict& verdict) {
  // Ranks that differ only in across dims, in one copy of the mesh.
  std::map<std::pair<int64_t, std::vector<int64_t>>, std::vector<HeldSample>> replicas;
  for (const HeldSample& h : held) replicas[{h.second->replica, h.second->others}].push_back(h);
  for (const auto& [others, group] : replicas) {
    if (group.size() < 2) continue;
    std::map<uint64_t, std::vector<int64_t>> by_digest;
    for (const auto& [r, s] : group) by_digest[s->digest].push_back(r);
    // Judged by draws only when every replica holds values it drew (an empty shard drew none).
    const bool drawn = std::all_of(group.begin(), group.end(), [](const HeldSample& h) {
      return h.second->numel > 0 && h.second->drawn;
    });
    verdict.by_draws = verdict.by_draws && drawn;
    if (drawn) {
      // The same draw: seed, offset, length, size and op.
      using Source = std::tuple<uint64_t, uint64_t, uint64_t, int64_t, std::string>;
      std::map<Source, std::vector<int64_t>> by_source;
      for (const auto& [r, s] : group) {
        const Draw& d = *s->drawn;
        by_source[{d.seed, d.offset, d.words, d.numel, d.op}].push_back(r);
      }
      if (by_source.size() > 1) {
        if (!has_room(verdict)) continue;
        Json draws = Json::array();
        for (const auto& [source, ranks] : by_source) {
          draws.push_back({{"ranks", rank_ranges(ranks)},
                           {"seed", std::get<0>(source)},
                           {"offset", std::get<1>(source)},
                           {"first_values", sample_of(group, ranks[0])->preview}});
        }
        verdict.problems.push_back({{"tensor", tensor},
                                    {"replicas_drew_differently", std::move(draws)},
                                    {"values_agree", by_digest.size() == 1}});
        continue;
      }
    }
    if (by_digest.size() > 1 && has_room(verdict)) {
      Json differing = Json::array();
      for (const auto& [digest, ranks] : by_digest) {
        differing.push_back(
            {{"ranks", rank_ranges(ranks)}, {"first_values", sample_of(group, ranks[0])->preview}});
      }
      verdict.problems.push_back(
          {{"tensor", tensor}, {"replicas_that_differ", std::move(differing)}});
    }
  }
}

}  // namespace meshsim::sim
