// The RNG steps in scenarios: what the loader refuses, what a run records (draws, overlaps,
// cross-rank checks), and that the report's codec keeps it.
#include <catch2/catch.hpp>

#include "sim/report/result_codec.hpp"
#include "sim/run/runner.hpp"
#include "sim/steps/builtin_steps.hpp"
#include "tests/support/scenario_text.hpp"

using namespace meshsim::sim;

using meshsim::testing::kWorld4;
using meshsim::testing::load_error;
using meshsim::testing::run_text;

namespace {

const std::string kLine = "[[mesh]]\nname = \"m\"\nshape = [4]\ndims = [\"x\"]\n";

const ExpectationRecord* find_expectation(const ScenarioResult& r, const std::string& what) {
  for (const ExpectationRecord& e : r.expectations) {
    if (e.what.rfind(what, 0) == 0) return &e;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("random steps: mistakes are refused with file:line:col", "[sim][rng][errors]") {
  CHECK(load_error("[scenario]\nname = \"t\"\nworld_size = 4\ntorch = \"2.7\"\n") ==
        "t.toml:4:9: torch must be \"latest\" (2.9 and later: DTensor ops advance the default "
        "generator) or \"2.6\" (the tracker keeps its own state)");
  CHECK_THAT(load_error("[scenario]\nname = \"t\"\nworld_size = 4\ngpu = \"B9000\"\n"),
             Catch::StartsWith("t.toml:4:7: unknown GPU \"B9000\" (known: H200,"));
  CHECK_THAT(load_error("[scenario]\nname = \"t\"\nworld_size = 4\ngpu = { sms = 0, "
                        "max_threads_per_sm = 2048 }\n"),
             Catch::StartsWith("t.toml:4:7: "));
  CHECK(load_error(kWorld4 + kLine +
                   "[[step]]\nrand = { name = \"w\", shape = [8], mesh = \"m\", "
                   "placements = [\"Shard(1)\"] }\n") ==
        "t.toml:9:61: Shard(1) shards dim 1 of a 1-d tensor (dims: -1 to 0)");
  // The same check where a query or dump lays a tensor out: at load time, not once per rank.
  CHECK(load_error(kWorld4 + kLine +
                   "[[expect]]\nlocal_shard = { mesh = \"m\", shape = [8], placements = "
                   "[\"Shard(-2)\"] }\nequals = [0]\n") ==
        "t.toml:9:56: Shard(-2) shards dim -2 of a 1-d tensor (dims: -1 to 0)");
  CHECK(load_error(kWorld4 + kLine +
                   "[[step]]\ndump = { mesh = \"m\", shape = [8, 2], placements = "
                   "[\"Shard(2)\"] }\n") ==
        "t.toml:9:52: Shard(2) shards dim 2 of a 2-d tensor (dims: -2 to 1)");
  CHECK(load_error(kWorld4 + kLine +
                   "[[step]]\nrand = { name = \"w\", shape = [8], mesh = \"m\", "
                   "placements = [\"Shard(0)\", \"Replicate()\"] }\n") ==
        "t.toml:9:60: 2 placements for mesh \"m\", which has 1 dims");
  CHECK(load_error(kWorld4 + "[[step]]\nrand = { name = \"w\", shape = [-1] }\n") ==
        "t.toml:5:30: tensor sizes must be non-negative");
  CHECK(load_error(kWorld4 + "[[step]]\nuniform_ = \"nope\"\n") ==
        "t.toml:5:12: no tensor \"nope\" is set before this");
  CHECK(load_error(kWorld4 +
                   "[[step]]\nrand = { name = \"w\", shape = [4] }\n[[step]]\nuniform_ = { tensor "
                   "= \"w\", low = 1 }\n") ==
        "t.toml:7:28: unknown key \"low\" in uniform_ (expected: tensor, from, to)");
  CHECK(load_error(kWorld4 + "[[step]]\nmanual_seed = { seed = 1, mesh = \"nope\" }\n") ==
        "t.toml:5:34: unknown mesh \"nope\"");
  CHECK(load_error(kWorld4 + "[[step]]\nreset_parameters = \"fc\"\n") ==
        "t.toml:5:20: no module \"fc\" is created before this (linear = { name, ... })");
  CHECK(
      load_error(kWorld4 +
                 "[[step]]\nlinear = { name = \"fc\", in = 4, out = 2 }\n[[step]]\nparallelize "
                 "= { module = \"fc\", mesh = \"m\", style = \"diagonal\" }\n" +
                 kLine) ==
      "t.toml:7:52: style must be \"colwise\" (ColwiseParallel) or \"rowwise\" (RowwiseParallel)");
  CHECK(load_error(kWorld4 +
                   "[[step]]\nrand = { name = \"w\", shape = [4] }\n[[expect]]\ndistinct = { "
                   "tensor = \"w\", across = [] }\n") ==
        "t.toml:7:37: across needs at least one mesh dim name");
  CHECK(load_error(kWorld4 + kLine +
                   "[[step]]\nrand = { name = \"w\", shape = [4] }\n[[expect]]\nequal = { "
                   "tensor = \"w\", mesh = \"m\", across = [\"y\"] }\n") ==
        "t.toml:11:46: mesh \"m\" has no dim \"y\"");
  CHECK(load_error(kWorld4 + "[[expect]]\nrng_overlap = {}\n") ==
        "t.toml:5:15: rng_overlap needs count (0 for none) or contains");
  CHECK(load_error(kWorld4 + "[[step]]\ndistribute_region = 1\n") ==
        "t.toml:5:21: distribute_region must be true or false, not an integer");
}

TEST_CASE("random steps: a run logs every draw, and the codec keeps draws and overlaps",
          "[sim][rng]") {
  const ScenarioResult r = run_text(kWorld4 + kLine + R"toml(
[[step]]
manual_seed = { seed = 1234, mesh = "m" }
[[step]]
rand = { name = "tiny", shape = [4], mesh = "m", placements = ["Shard(0)"] }
[[step]]
rand = { name = "local", shape = [3] }
)toml");
  REQUIRE(r.passed());
  // Four tiny shards, then a plain 3-element rand on every rank after the post-op offset 4.
  REQUIRE(r.draws.size() == 8);
  CHECK(r.draws[0].rank == 0);
  CHECK(r.draws[1].rank == 0);
  CHECK(r.draws[0].draw.offset == 0);
  CHECK(r.draws[1].draw.offset == 4);
  CHECK_FALSE(r.draws[1].draw.shard_index);
  CHECK(r.draws[2].draw.offset == 4);  // rank 1's shard: ceil4(1 * 1)
  CHECK(*r.draws[2].draw.shard_index == 1);
  // Four groups read counter block 1: tiny's shards 1, 2 and 3 (one rank each, pre-op offset 4)
  // and the plain rand (one group of ranks 0-3, from the post-op offset 4): C(4, 2) = 6 pairs.
  CHECK(r.overlap_count == 6);
  const std::optional<ScenarioResult> back = decode_result(encode_result(r));
  REQUIRE(back);
  REQUIRE(back->draws.size() == r.draws.size());
  CHECK(back->draws[2].draw.shard_index == r.draws[2].draw.shard_index);
  CHECK(back->draws[5].draw.op == r.draws[5].draw.op);
  CHECK(back->overlap_count == r.overlap_count);
  REQUIRE(back->overlaps.size() == r.overlaps.size());
  CHECK(back->overlaps[0].second_ranks == r.overlaps[0].second_ranks);
}

TEST_CASE("random steps: distinct and equal fail with the ranks that break them", "[sim][rng]") {
  const ScenarioResult r = run_text(kWorld4 + R"toml(
[[mesh]]
name = "w"
shape = [2, 2]
dims = ["dp", "tp"]
[[step]]
manual_seed = "rank % 2"     # replicas along dp get different seeds: a bug
[[step]]
rand = { name = "x", shape = [8], mesh = "w", placements = ["Replicate()", "Shard(0)"] }
[[expect]]
equal = { tensor = "x", across = ["dp"] }
[[expect]]
distinct = { tensor = "x", across = ["dp"] }
)toml");
  // The lazy tracker broadcast rank 0's state to everyone: replicas agree after all, and the
  // "distinct across dp" check is the one that fails.
  const ExpectationRecord* equal = find_expectation(r, "equal(x across dp)");
  const ExpectationRecord* distinct = find_expectation(r, "distinct(x across dp)");
  REQUIRE(equal);
  REQUIRE(distinct);
  CHECK(equal->passed);
  CHECK_FALSE(distinct->passed);
  CHECK(distinct->observed.dump().find("0, 2") != std::string::npos);
  REQUIRE(r.warnings.size() == 1);
  CHECK(r.warnings[0].kind == "rng");
  CHECK_THAT(r.warnings[0].text,
             Catch::StartsWith("DTensor synchronized the RNG state of rank(s) 1, 3 "
                               "with rank 0's"));

  // Seeded per rank after the tracker exists: replicas differ, and equal says which.
  const ScenarioResult d = run_text(kWorld4 + R"toml(
[[mesh]]
name = "w"
shape = [2, 2]
dims = ["dp", "tp"]
[[step]]
manual_seed = { seed = "rank", mesh = "w" }
[[step]]
rand = { name = "x", shape = [8], mesh = "w", placements = ["Replicate()", "Shard(0)"] }
[[expect]]
equal = { tensor = "x", across = ["dp"] }
)toml");
  const ExpectationRecord* e = find_expectation(d, "equal(x across dp)");
  REQUIRE(e);
  CHECK_FALSE(e->passed);
  // Judged by the draws: the replicas drew under seeds 0, 1, 2 and 3.
  CHECK(e->observed.dump().find("replicas_drew_differently") != std::string::npos);
  CHECK(e->observed[0]["values_agree"] == false);
  CHECK(d.warnings.empty());
  CHECK(d.overlap_count == 0);  // different seeds never overlap
}

TEST_CASE("random steps: distinct and equal judge drawn values by their Philox counters",
          "[sim][rng]") {
  // One-element shards of [R, S(0)] on (2, 4): shards 1-3 start at ceil4(j) = 4 (PyTorch's
  // tiny-shard quirk), and the replicas along dp were seeded apart.
  const ScenarioResult r = run_text(
      "[scenario]\nname = \"t\"\nworld_size = 8\n"
      R"toml(
[[mesh]]
name = "r"
shape = [2, 4]
dims = ["dp", "tp"]
[[step]]
manual_seed = { seed = 1, mesh = "r" }
[[step]]
manual_seed = { seed = "coord(r, dp) + 7", mesh = "r" }
[[step]]
rand = { name = "y", shape = [4], mesh = "r", placements = ["Replicate()", "Shard(0)"] }
[[step]]
bernoulli_ = { tensor = "y", p = 0.5 }
[[expect]]
equal = { tensor = "y", across = ["dp"] }
[[expect]]
distinct = { tensor = "y", across = ["tp"] }
[[step]]
all_reduce = { tensor = "y", group = { mesh = "r", dim = "dp" }, out = "y" }
[[expect]]
distinct = { tensor = "y", across = ["tp"], mesh = "r" }
)toml");
  // Every bernoulli_ value is 1: the replicas agree by chance, from two seeds.
  const ExpectationRecord* equal = find_expectation(r, "equal(y across dp)");
  REQUIRE(equal);
  CHECK_FALSE(equal->passed);
  REQUIRE(equal->observed.size() == 4);
  CHECK(equal->observed[0]["values_agree"] == true);
  CHECK(equal->observed[0]["replicas_drew_differently"][1]["seed"] == 8);
  // Shards 1-3 of each copy read the same counters; shard 0 is theirs by value only.
  std::vector<const ExpectationRecord*> distinct;
  for (const ExpectationRecord& e : r.expectations) {
    if (e.what.starts_with("distinct(y across tp)")) distinct.push_back(&e);
  }
  REQUIRE(distinct.size() == 2);
  CHECK_FALSE(distinct[0]->passed);
  REQUIRE(distinct[0]->observed.size() == 2);
  CHECK(distinct[0]->observed[0]["same_philox_counters_on_ranks"] == "1-3");
  CHECK(distinct[0]->observed[1]["same_philox_counters_on_ranks"] == "5-7");
  // After the all_reduce the values have another history: compared by value, all equal.
  CHECK_FALSE(distinct[1]->passed);
  CHECK(distinct[1]->observed[0]["same_values_on_ranks"] == "0-7");
}

TEST_CASE("random steps: a value set since its draw is judged by value, even with equal bytes",
          "[sim][rng]") {
  // bernoulli_(1) under two seeds gives the same ones; the broadcast then sets the value again,
  // with the same bytes: what the ranks hold now came from rank 0, not from their own draws.
  const ScenarioResult r = run_text(kWorld4 + R"toml(
[[mesh]]
name = "m"
shape = [4]
dims = ["dp"]
[[step]]
manual_seed = { seed = 1, mesh = "m" }
[[step]]
manual_seed = { seed = "rank", mesh = "m" }
[[step]]
rand = { name = "x", shape = [2], mesh = "m", placements = ["Replicate()"] }
[[step]]
bernoulli_ = { tensor = "x", p = 1.0 }
[[expect]]
equal = { tensor = "x", across = ["dp"] }
[[step]]
broadcast = { tensor = "x", src = 0, out = "x" }
[[expect]]
equal = { tensor = "x", across = ["dp"], mesh = "m" }
)toml");
  std::vector<const ExpectationRecord*> equal;
  for (const ExpectationRecord& e : r.expectations) {
    if (e.what.starts_with("equal(x across dp)")) equal.push_back(&e);
  }
  REQUIRE(equal.size() == 2);
  CHECK_FALSE(equal[0]->passed);  // four seeds, four draws
  CHECK(equal[0]->observed[0]["values_agree"] == true);
  CHECK(equal[1]->passed);
  CHECK(equal[1]->observed == "4 samples compared by value");
}

TEST_CASE("random steps: errors on ranks name the rank and step", "[sim][rng][errors]") {
  const ScenarioResult r = run_text(kWorld4 + kLine + R"toml(
[[step]]
linear = { name = "fc", in = 4, out = 8 }
[[step]]
parallelize = { module = "fc", mesh = "m", style = "colwise" }
)toml");
  REQUIRE(r.failures[2]);
  CHECK(r.failures[2]->error_type == "NotImplementedError");
  CHECK_THAT(r.failures[2]->message, Catch::Contains("modules created on the meta device"));
  CHECK(r.failures[2]->where.line == 11);

  const ScenarioResult u = run_text(kWorld4 + R"toml(
[[step]]
rand = { name = "x", shape = [4], dtype = "int64" }
)toml");
  REQUIRE(u.failures[0]);
  CHECK(u.failures[0]->error_type == "RuntimeError");
  CHECK(u.failures[0]->message == "\"check_uniform_bounds\" not implemented for 'Long'");

  // No tracker yet: PyTorch's random._rng_tracker is None.
  const ScenarioResult n = run_text(kWorld4 + "[[step]]\ndistribute_region = false\n");
  REQUIRE(n.failures[3]);
  CHECK(n.failures[3]->error_type == "AttributeError");
  CHECK_THAT(n.failures[3]->message,
             Catch::StartsWith("'NoneType' object has no attribute 'distribute_region_enabled'"));

  // Meta tensors draw nothing, but their arguments are checked as PyTorch's meta kernels do.
  const ScenarioResult m = run_text(kWorld4 + kLine + R"toml(
[[step]]
dtensor = { name = "w", mesh = "m", shape = [8], meta = true }
[[step]]
uniform_ = { tensor = "w", from = 2, to = 1 }
)toml");
  REQUIRE(m.failures[1]);
  CHECK(m.failures[1]->message ==
        "uniform_ expects to return a [from, to) range, but found from=2 > to=1");
}

TEST_CASE("random steps: a disabled region in the factories, by profile", "[sim][rng]") {
  const std::string body = kLine + R"toml(
[[step]]
manual_seed = { seed = 3, mesh = "m" }
[[step]]
distribute_region = false
[[step]]
rand = { name = "a", shape = [8], mesh = "m", placements = ["Shard(0)"] }
[[step]]
rand = { name = "b", shape = [8], mesh = "m", placements = ["Shard(0)"] }
[[expect]]
equal = { tensor = "a", across = ["x"] }
)toml";
  // Latest: every shard draws from the same state, which _distribute_region then restores, so
  // a and b repeat each other.
  const ScenarioResult latest = run_text(kWorld4 + body);
  CHECK(latest.passed());
  REQUIRE(latest.draws.size() == 8);
  CHECK(latest.draws[0].draw.offset == 0);
  CHECK(latest.draws[1].draw.offset == 0);
  // 2.6: the op moves the default generator (the tracker's own state is untouched), so b
  // starts where a stopped.
  const ScenarioResult old =
      run_text("[scenario]\nname = \"t\"\nworld_size = 4\ntorch = \"2.6\"\n" + body);
  CHECK(old.passed());
  REQUIRE(old.draws.size() == 8);
  CHECK(old.draws[1].draw.offset == 4);
}

TEST_CASE("random steps: ranks that seed a different number of times", "[sim][rng]") {
  // Ranks 0-1 draw v and ranks 2-3 draw u, both from seed 9 at offset 0: the same numbers.
  const std::string draws = R"toml(
[[step]]
manual_seed = { seed = 9, mesh = "m" }
[[step]]
rand = { name = "v", shape = [4] }
when = "rank < 2"
[[step]]
rand = { name = "u", shape = [4] }
when = "rank >= 2"
)toml";
  const ScenarioResult same = run_text(kWorld4 + kLine + draws);
  CHECK(same.overlap_count == 1);  // the group of ranks 0-1 against the group of ranks 2-3
  // When ranks 0-1 seeded once more before, the n-th seed of every rank starts epoch n: their
  // draws are in epoch 2, ranks 2-3's in epoch 1, and they are not compared.
  const ScenarioResult r =
      run_text(kWorld4 + kLine + "[[step]]\nmanual_seed = 9\nwhen = \"rank < 2\"\n" + draws);
  REQUIRE(r.draws.size() == 4);
  CHECK(r.draws[0].draw.seed_epoch == 2);
  CHECK(r.draws[2].draw.seed_epoch == 1);
  CHECK(r.overlap_count == 0);
}
