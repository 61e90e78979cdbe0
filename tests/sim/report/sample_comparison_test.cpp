// distinct and equal decided by the draws the ranks hold: counters, not values, unless a value
// has another history.
#include <catch2/catch.hpp>

#include "sim/report/sample_comparison.hpp"

using namespace meshsim;
using namespace meshsim::sim;

namespace {

// A 1-element shard at `across` coordinate, drawn under `seed` from word `offset` (or not drawn).
ShardSample shard(int64_t across, uint64_t digest, std::optional<uint64_t> offset,
                  uint64_t seed = 7, uint64_t words = 4) {
  ShardSample s;
  s.tensor = "w";
  s.across = {across};
  s.numel = 1;
  s.digest = digest;
  s.preview = Json::array({0.5});
  if (offset) {
    Draw d;
    d.seed = seed;
    d.offset = *offset;
    d.words = words;
    d.numel = 1;
    d.op = "uniform_(0, 1)";
    s.drawn = d;
  }
  return s;
}

std::vector<HeldSample> held(const std::vector<ShardSample>& samples) {
  std::vector<HeldSample> out;
  for (size_t r = 0; r < samples.size(); ++r)
    out.emplace_back(static_cast<int64_t>(r), &samples[r]);
  return out;
}

}  // namespace

TEST_CASE("distinct: equal values from disjoint counters are a coincidence, not a failure",
          "[report][rng]") {
  const std::vector<ShardSample> samples{shard(0, 11, 0), shard(1, 11, 4), shard(2, 12, 8)};
  SampleVerdict v;
  compare_distinct("w", held(samples), v);
  CHECK(v.problems.empty());
  CHECK(v.by_draws);
  CHECK(v.coincidence_count == 1);
  REQUIRE(v.coincidences.size() == 1);
  CHECK(v.coincidences[0] == "ranks 0-1 ([0.5])");
}

TEST_CASE("distinct: shards that read the same counters fail, whatever their values",
          "[report][rng]") {
  // Ranks 1 and 2 start at word 4 (ceil4 of tiny shards); rank 3 is a replica of rank 2.
  std::vector<ShardSample> samples{shard(0, 1, 0), shard(1, 2, 4), shard(2, 3, 4), shard(2, 3, 4)};
  SampleVerdict v;
  compare_distinct("w", held(samples), v);
  REQUIRE(v.problems.size() == 1);
  CHECK(v.problems[0]["same_philox_counters_on_ranks"] == "1-3");
  CHECK(v.problems[0]["counter_blocks"] == Json::array({1, 2}));
  CHECK(v.coincidence_count == 0);

  // Under another seed the same offsets are other numbers.
  samples[2].drawn->seed = 8;
  samples[3].drawn->seed = 8;
  SampleVerdict other_seed;
  compare_distinct("w", held(samples), other_seed);
  CHECK(other_seed.problems.empty());

  // Ranges that overlap without being equal: [0, 3) and [2, 4).
  const std::vector<ShardSample> overlapping{shard(0, 1, 0, 7, 12), shard(1, 2, 8, 7, 8)};
  SampleVerdict o;
  compare_distinct("w", held(overlapping), o);
  REQUIRE(o.problems.size() == 1);
  CHECK(o.problems[0]["overlapping_philox_counters"][0]["counter_blocks"] == Json::array({0, 3}));
  CHECK(o.problems[0]["overlapping_philox_counters"][1]["counter_blocks"] == Json::array({2, 4}));

  // A range inside another, found through the furthest range of another coordinate: rank 1's
  // [1, 2) ends before rank 0's [0, 4) does, so rank 2's [3, 4) overlaps rank 0 only.
  const std::vector<ShardSample> nested{shard(0, 1, 0, 7, 16), shard(0, 2, 4), shard(1, 3, 12)};
  SampleVerdict n;
  compare_distinct("w", held(nested), n);
  REQUIRE(n.problems.size() == 1);
  CHECK(n.problems[0]["overlapping_philox_counters"][0]["ranks"] == "0");
  CHECK(n.problems[0]["overlapping_philox_counters"][1]["ranks"] == "2");
}

TEST_CASE("distinct: values with another history are compared by value", "[report][rng]") {
  const std::vector<ShardSample> samples{shard(0, 11, 0), shard(1, 11, std::nullopt)};
  SampleVerdict v;
  compare_distinct("w", held(samples), v);
  CHECK_FALSE(v.by_draws);
  REQUIRE(v.problems.size() == 1);
  CHECK(v.problems[0]["same_values_on_ranks"] == "0-1");
}

TEST_CASE("equal: replicas must make the same draw; agreeing values from two draws fail",
          "[report][rng]") {
  // Two replica pairs (others = {0} and {1}); across is the replica dim.
  auto replica = [](int64_t other, uint64_t digest, uint64_t seed) {
    ShardSample s = shard(0, digest, 0, seed);
    s.others = {other};
    return s;
  };
  const std::vector<ShardSample> same{replica(0, 5, 7), replica(0, 5, 7), replica(1, 6, 7)};
  SampleVerdict ok;
  compare_equal("w", held(same), ok);
  CHECK(ok.problems.empty());
  CHECK(ok.by_draws);

  // A one-element bernoulli under seeds 7 and 8 can agree by chance: still two draws.
  const std::vector<ShardSample> chance{replica(0, 5, 7), replica(0, 5, 8)};
  SampleVerdict c;
  compare_equal("w", held(chance), c);
  REQUIRE(c.problems.size() == 1);
  CHECK(c.problems[0]["values_agree"] == true);
  CHECK(c.problems[0]["replicas_drew_differently"].size() == 2);

  // An empty shard drew nothing: its group is compared by value.
  std::vector<ShardSample> ragged{replica(0, 5, 7), replica(0, 9, 7)};
  ragged[1].numel = 0;
  ragged[1].drawn.reset();
  SampleVerdict e;
  compare_equal("w", held(ragged), e);
  CHECK_FALSE(e.by_draws);
  REQUIRE(e.problems.size() == 1);
  CHECK(e.problems[0].contains("replicas_that_differ"));

  // Gathered values (no draw held) are compared by value.
  std::vector<ShardSample> gathered{replica(0, 5, 7), replica(0, 6, 7)};
  gathered[0].drawn.reset();
  gathered[1].drawn.reset();
  SampleVerdict g;
  compare_equal("w", held(gathered), g);
  CHECK_FALSE(g.by_draws);
  REQUIRE(g.problems.size() == 1);
  CHECK(g.problems[0].contains("replicas_that_differ"));
}
