// redistribute, full_tensor and to_local: what the loader refuses, and a property check that any
// layout of a tensor redistributed to any other equals the tensor laid out there directly.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <functional>
#include <numeric>

#include "sim/run/runner.hpp"
#include "sim/steps/builtin_steps.hpp"
#include "src/dtensor/placement.hpp"
#include "src/tensor/memory_budget.hpp"
#include "tests/support/scenario_text.hpp"
#include "tests/support/splitmix.hpp"

using namespace meshsim;
using namespace meshsim::sim;
using meshsim::testing::load_error;

namespace {

const std::string kWorld4 =
    "[scenario]\nname = \"t\"\nworld_size = 4\n[[mesh]]\nname = \"m\"\nshape = [2, 2]\n"
    "[[step]]\ndtensor = { name = \"w\", mesh = \"m\", shape = [4], placements = [\"Shard(0)\", "
    "\"Replicate()\"] }\n";

// Failures of a run, one line each, for a readable CHECK.
std::string failures_of(const ScenarioResult& r) {
  std::string out;
  for (const ExpectationRecord& e : r.expectations) {
    if (!e.passed) out += fmt::format("rank {}: {} got {}\n", e.rank, e.what, e.observed.dump());
  }
  for (const auto& f : r.failures) {
    if (f) out += fmt::format("rank failed: {}\n", f->message);
  }
  if (r.hang_text) out += *r.hang_text;
  return out;
}

std::string quoted(const std::vector<Placement>& placements) {
  std::vector<std::string> names;
  for (const Placement& p : placements) names.push_back("\"" + placement_name(p) + "\"");
  return fmt::format("[{}]", fmt::join(names, ", "));
}

// Rank 0's steps and collectives in time order (a step's slice starts with its first one), from
// a run with a trace.
std::vector<std::string> rank0_steps(const ScenarioResult& r) {
  std::vector<std::tuple<double, bool, std::string>> events;
  for (const auto& e : r.trace) {
    if (e.value("tid", -1) != 0 || e.value("ph", "") != "X") continue;
    const bool step = e.value("cat", "") == "step";
    events.emplace_back(e["ts"].get<double>(), !step,
                        step ? e["name"].get<std::string>()
                             : "  " + e["args"]["signature"].get<std::string>() + " on " +
                                   e["args"]["group"].get<std::string>());
  }
  std::sort(events.begin(), events.end());
  std::vector<std::string> out;
  for (const auto& [ts, collective, text] : events) out.push_back(text);
  return out;
}

}  // namespace

TEST_CASE("dtensor steps: mistakes are refused with file:line:col", "[sim][dtensor][errors]") {
  CHECK(load_error(kWorld4 + "[[step]]\nredistribute = { tensor = \"v\", placements = [\"R\", "
                             "\"R\"] }\n") == "t.toml:10:27: no tensor \"v\" is set before this");
  CHECK(load_error(kWorld4 +
                   "[[step]]\nredistribute = { tensor = \"w\", placements = [\"Shard(x)\"] "
                   "}\n") ==
        "t.toml:10:46: placement \"Shard(x)\": expected an integer dim (got \"x\") at column 7");
  CHECK(load_error(kWorld4 +
                   "[[step]]\nredistribute = { tensor = \"w\", mesh = \"m\", placements = "
                   "[\"R\"] }\n") == "t.toml:10:57: 1 placements for mesh \"m\", which has 2 dims");
  CHECK(load_error(kWorld4 + "[[step]]\nfull_tensor = { tensor = \"w\" }\n") ==
        "t.toml:10:15: full_tensor needs the key \"out\"");
  CHECK(load_error(kWorld4 + "[[step]]\nto_local = \"w\"\n") ==
        "t.toml:10:12: to_local must be a table of arguments");
  CHECK(load_error(kWorld4 + "[[step]]\nto_local = { tensor = \"w\", out = \"l\", like = 1 }\n") ==
        "t.toml:10:39: unknown key \"like\" in to_local (expected one of: tensor, out)");
}

TEST_CASE("dtensor steps: placements are checked against the tensor's dims at load time",
          "[sim][dtensor][errors]") {
  // The dims of a factory's shape, of a tensor constructor, and of what redistribute, to_local
  // and recv keep.
  CHECK(load_error(kWorld4 + "[[step]]\nredistribute = { tensor = \"w\", placements = "
                             "[\"Shard(1)\", \"R\"] }\n") ==
        "t.toml:10:46: Shard(1) shards dim 1 of a 1-d tensor (dims: -1 to 0)");
  CHECK(load_error(kWorld4 +
                   "[[step]]\nredistribute = { tensor = \"w\", placements = [\"R\", \"R\"], "
                   "out = \"r\" }\n[[step]]\nredistribute = { tensor = \"r\", placements = "
                   "[\"R\", \"Shard(-2)\"] }\n") ==
        "t.toml:12:51: Shard(-2) shards dim -2 of a 1-d tensor (dims: -1 to 0)");
  CHECK(load_error(kWorld4 +
                   "[[step]]\nrecv = { like = \"zeros(2, 3)\", src = 0, out = \"l\" }\nwhen = "
                   "\"rank == 1\"\n[[step]]\nfrom_local = { name = \"d\", local = \"l\", mesh = "
                   "\"m\", placements = [\"Shard(2)\", \"R\"] }\n") ==
        "t.toml:13:67: Shard(2) shards dim 2 of a 2-d tensor (dims: -2 to 1)");
  CHECK(load_error(kWorld4 +
                   "[[step]]\nto_local = { tensor = \"w\", out = \"l\" }\n[[step]]\nfrom_local = { "
                   "name = \"d\", local = \"l\", mesh = \"m\", placements = [\"Shard(1)\", "
                   "\"R\"] }\n") ==
        "t.toml:12:67: Shard(1) shards dim 1 of a 1-d tensor (dims: -1 to 0)");
  // Without a mesh, the count is checked against the DTensor's own.
  CHECK(
      load_error(kWorld4 + "[[step]]\nredistribute = { tensor = \"w\", placements = [\"R\"] }\n") ==
      "t.toml:10:45: 1 placements for mesh \"m\", which has 2 dims");
  // A name set with different dims (under different `when`s) is not checked: the file may be
  // right on every rank that runs the step.
  CHECK(load_error(kWorld4 +
                   "[[step]]\ndtensor = { name = \"w\", mesh = \"m\", shape = [4, 4] }\nwhen = "
                   "\"rank < 2\"\n[[step]]\nredistribute = { tensor = \"w\", placements = "
                   "[\"Shard(1)\", \"R\"] }\nwhen = \"rank < 2\"\n") == "(loaded)");
}

TEST_CASE("redistribute: Shard -> Partial(sum) keeps each piece at its place in zeros",
          "[sim][dtensor]") {
  // The local values PyTorch 2.15 gives on a (2, 2) mesh (measured with four Gloo processes):
  // no collective for [S(0), S(1)] -> [P, S(1)], one all_gather over tp first for
  // [S(0), S(0)] -> [P, S(0)] (the nested shard of dim 0 is replicated before dp moves).
  const ScenarioResult r = run_scenario(load_scenario_text(R"toml([scenario]
name = "sp"
world_size = 4
[[mesh]]
name = "m"
shape = [2, 2]
[[step]]
dtensor = { name = "w", mesh = "m", shape = [4, 4], placements = ["S(0)", "S(1)"], fill = "index" }
[[step]]
redistribute = { tensor = "w", placements = ["P", "S(1)"], out = "p" }
[[step]]
to_local = { tensor = "p", out = "l" }
[[expect]]
tensor = "l"
by_rank = [[0, 1, 4, 5, 0, 0, 0, 0], [2, 3, 6, 7, 0, 0, 0, 0], [0, 0, 0, 0, 8, 9, 12, 13], [0, 0, 0, 0, 10, 11, 14, 15]]
[[step]]
full_tensor = { tensor = "p", out = "f" }
[[expect]]
tensor = "f"
equals = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
[[step]]
dtensor = { name = "v", mesh = "m", shape = [4, 4], placements = ["S(0)", "S(0)"], fill = "index" }
[[step]]
redistribute = { tensor = "v", placements = ["P", "S(0)"], out = "q" }
[[step]]
to_local = { tensor = "q", out = "k" }
[[expect]]
tensor = "k"
by_rank = [[0, 1, 2, 3, 4, 5, 6, 7], [0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0], [8, 9, 10, 11, 12, 13, 14, 15]]
)toml",
                                                           "t.toml"));
  INFO(failures_of(r));
  CHECK(r.passed());
  CHECK(r.listed_checks() == 12);
}

TEST_CASE("redistribute: FSDP2 + TP's strided layout issues PyTorch 2.15's collectives",
          "[sim][dtensor]") {
  // [_S(0, 2), S(0)] encodes "cut by tp, then by dp": undone dp first, then tp, each an
  // all_gather of a plain shard (9 positions: tp pieces of 5 and 4, dp pieces of 3 and 2,
  // padded to 3); a target that keeps the tp cut gathers over dp alone; cutting back is local.
  // The sequences are those measured on PyTorch 2.15 with four Gloo processes.
  RunOptions options;
  options.trace = true;
  const ScenarioResult r = run_scenario(load_scenario_text(R"toml([scenario]
name = "st"
world_size = 4
[[mesh]]
name = "m"
shape = [2, 2]
dims = ["dp", "tp"]
[[step]]
dtensor = { name = "w", mesh = "m", shape = [9], placements = ["_StridedShard(0, split_factor=2)", "S(0)"], fill = "index" }
[[step]]
redistribute = { tensor = "w", placements = ["S(0)", "S(0)"], out = "a" }
[[step]]
redistribute = { tensor = "w", placements = ["R", "R"], out = "b" }
[[step]]
redistribute = { tensor = "w", placements = ["R", "S(0)"], out = "c" }
[[step]]
redistribute = { tensor = "a", placements = ["_StridedShard(0, split_factor=2)", "S(0)"], out = "d" }
[[step]]
redistribute = { tensor = "b", placements = ["_StridedShard(0, split_factor=2)", "S(0)"], out = "e" }
)toml",
                                                           "t.toml"),
                                        options);
  REQUIRE(r.passed());
  CHECK(rank0_steps(r) ==
        std::vector<std::string>{"mesh", "dtensor",
                                 "redistribute",  // to [S(0), S(0)]
                                 "  all_gather_into_tensor(float32[3]) on m.dp#0",
                                 "  all_gather_into_tensor(float32[5]) on m.tp#0",
                                 "redistribute",  // to [R, R]
                                 "  all_gather_into_tensor(float32[3]) on m.dp#0",
                                 "  all_gather_into_tensor(float32[5]) on m.tp#0",
                                 "redistribute",  // to [R, S(0)]
                                 "  all_gather_into_tensor(float32[3]) on m.dp#0",
                                 "redistribute",  // [S(0), S(0)] back: both cuts differ
                                 "  all_gather_into_tensor(float32[3]) on m.tp#0",
                                 "  all_gather_into_tensor(float32[5]) on m.dp#0",
                                 "redistribute"});  // [R, R] back: local cuts
}

TEST_CASE("redistribute: errors as DTensor raises them, on every rank", "[sim][dtensor]") {
  // The dims of all_gather_into_tensor's result are not known before the run.
  const ScenarioResult r = run_scenario(load_scenario_text(
      kWorld4 +
          "[[step]]\nall_gather_into_tensor = { tensor = \"ones(2)\", out = \"g\" "
          "}\n[[step]]\nfrom_local = { "
          "name = \"d\", local = \"g\", mesh = \"m\" }\n[[step]]\nredistribute = { tensor = \"d\", "
          "placements = [\"Shard(1)\", \"R\"] }\n",
      "t.toml"));
  REQUIRE(r.failures.size() == 4);
  for (const auto& f : r.failures) {
    REQUIRE(f.has_value());
    CHECK(f->error_type == "IndexError");
  }
  // A new Partial other than Shard -> Partial(sum), in PyTorch's words and spelling.
  const auto first_failure = [](const std::string& steps) {
    const ScenarioResult run = run_scenario(load_scenario_text(kWorld4 + steps, "t.toml"));
    REQUIRE(run.failures.at(0).has_value());
    return run.failures[0]->error_type + ": " + run.failures[0]->message;
  };
  CHECK(first_failure("[[step]]\nredistribute = { tensor = \"w\", placements = [\"R\", \"R\"], "
                      "out = \"r\" }\n[[step]]\nredistribute = { tensor = \"r\", placements = "
                      "[\"P\", \"R\"] }\n") ==
        "RuntimeError: Can not redistribute from R to P(sum), only Shard to Partial(sum) "
        "redistribution is supported!");
  CHECK(first_failure("[[step]]\nredistribute = { tensor = \"w\", placements = [\"P(max)\", "
                      "\"R\"] }\n") ==
        "RuntimeError: Can not redistribute from S(0) to P(max), only Shard to Partial(sum) "
        "redistribution is supported!");
  CHECK(
      first_failure(
          "[[step]]\ndtensor = { name = \"s\", mesh = \"m\", shape = [8], placements "
          "= [\"_StridedShard(0, split_factor=2)\", \"R\"] }\n[[step]]\nredistribute = { tensor = "
          "\"s\", placements = [\"P\", \"R\"] }\n") ==
      "RuntimeError: Can not redistribute from _S(0, 2) to P(sum), only Shard to Partial(sum) "
      "redistribution is supported!");
  // Mixed Partial reduce ops are refused where a DTensor is made (sum with avg is allowed).
  CHECK(first_failure("[[step]]\ndtensor = { name = \"x\", mesh = \"m\", shape = [4], placements "
                      "= [\"P(sum)\", \"P(min)\"] }\n") ==
        "ValueError: Mixed Partial reduce types are not supported in the same placement list. "
        "Found reduce ops: {'min', 'sum'}. Please ensure all Partial placements use the same "
        "reduce operation.");
  CHECK(run_scenario(load_scenario_text(kWorld4 +
                                            "[[step]]\ndtensor = { name = \"x\", mesh = \"m\", "
                                            "shape = [4], placements = [\"P(sum)\", \"P(avg)\"] "
                                            "}\n",
                                        "t.toml"))
            .passed());
}

// Any layout to any other: meshes of 1 to 3 dims, uneven and empty shards, nested shards of one
// tensor dim, FSDP2 + TP's strided shards (and split factors no shard order explains) as source
// and target, NCCL's all_to_all and Gloo's gather. The reference is an independent
// construction: `fill = "index"` straight in the target layout.
TEST_CASE("redistribute: over a flattened mesh, one collective where PyTorch 2.15 merges them",
          "[sim][dtensor][flatten]") {
  // Values and collectives as measured on PyTorch 2.15 with four Gloo processes
  // (tests/redistribute_diff_test.py has the same moves).
  RunOptions options;
  options.trace = true;
  const ScenarioResult r = run_scenario(load_scenario_text(R"toml([scenario]
name = "flat"
world_size = 4
[[mesh]]
name = "m"
shape = [2, 2]
dims = ["dp", "tp"]
[[mesh]]
name = "flat"
from = "m"
flatten = "dptp"
# Even: one all_gather over the four ranks, the right values.
[[step]]
dtensor = { name = "even", mesh = "m", shape = [8], placements = ["S(0)", "S(0)"], fill = "index" }
[[step]]
redistribute = { tensor = "even", placements = ["R", "R"], out = "even_full" }
[[step]]
to_local = { tensor = "even_full", out = "even_local" }
[[expect]]
tensor = "even_local"
equals = [0, 1, 2, 3, 4, 5, 6, 7]
# 6 rows nest into pieces of 2, 1, 2, 1; the merged gather pads each to 2 and keeps 6 rows.
[[step]]
dtensor = { name = "six", mesh = "m", shape = [6], placements = ["S(0)", "S(0)"], fill = "index" }
[[step]]
redistribute = { tensor = "six", placements = ["R", "R"], out = "six_full" }
[[step]]
to_local = { tensor = "six_full", out = "six_local" }
[[expect]]
tensor = "six_local"
equals = [0, 1, 2, 0, 3, 4]
[[expect]]
warning = { contains = "pieces of 2, 1, 2, 1 where even chunks are 2, 2, 2, 0), so PyTorch 2.15 returns wrong values without a word", count = 1 }
# Sum over dp of the average over tp: one all_reduce of the sum, divided by tp's size.
[[step]]
tensor = { name = "rank_plus_one", value = "full(4, rank + 1)" }
[[step]]
from_local = { name = "p", local = "rank_plus_one", mesh = "m", placements = ["P(sum)", "P(avg)"] }
[[step]]
redistribute = { tensor = "p", placements = ["R", "R"], out = "reduced" }
[[step]]
to_local = { tensor = "reduced", out = "reduced_local" }
[[expect]]
tensor = "reduced_local"
equals = [5, 5, 5, 5]
# A reduce_scatter over the four ranks when the rows split evenly; two when not, and a warning.
[[step]]
from_local = { name = "q", local = "rank_plus_one", mesh = "m", placements = ["P", "P"] }
[[step]]
redistribute = { tensor = "q", placements = ["S(0)", "S(0)"], out = "scattered" }
[[step]]
to_local = { tensor = "scattered", out = "scattered_local" }
[[expect]]
tensor = "scattered_local"
equals = [10]
[[step]]
tensor = { name = "six_of_rank", value = "full(6, rank + 1)" }
[[step]]
from_local = { name = "q6", local = "six_of_rank", mesh = "m", placements = ["P", "P"] }
[[step]]
redistribute = { tensor = "q6", placements = ["S(0)", "S(0)"] }
[[expect]]
warning = { contains = "plans 2 reduce_scatter steps one after another, on mesh dims \"dp\", \"tp\"; PyTorch cannot merge them", count = 1 }
# Different placements on the two mesh dims are not merged.
[[step]]
dtensor = { name = "mixed", mesh = "m", shape = [4, 4], placements = ["S(0)", "S(1)"], fill = "index" }
[[step]]
redistribute = { tensor = "mixed", placements = ["R", "R"] }
)toml",
                                                           "t.toml"),
                                        options);
  CHECK(failures_of(r) == "");
  CHECK(r.listed_checks() == 18);
  // Each redistribute and the collectives it issued on rank 0.
  std::vector<std::string> moves = rank0_steps(r);
  std::erase_if(moves, [](const std::string& s) { return s != "redistribute" && s[0] != ' '; });
  CHECK(moves ==
        std::vector<std::string>{"redistribute", "  all_gather_into_tensor(float32[2]) on WORLD",
                                 "redistribute", "  all_gather_into_tensor(float32[2]) on WORLD",
                                 "redistribute", "  all_reduce(float32[4], op=sum) on WORLD",
                                 "redistribute", "  reduce_scatter(float32[4], op=sum) on WORLD",
                                 "redistribute", "  reduce_scatter(float32[6], op=sum) on m.dp#0",
                                 "  reduce_scatter(float32[4], op=sum) on m.tp#0", "redistribute",
                                 "  all_gather_into_tensor(float32[2, 2]) on m.tp#0",
                                 "  all_gather_into_tensor(float32[2, 4]) on m.dp#0"});
}

TEST_CASE("redistribute: PyTorch's warnings where it cannot merge, and its _StridedShard refusal",
          "[sim][dtensor][flatten]") {
  const auto warnings_of = [](const std::string& steps) {
    const ScenarioResult r = run_scenario(load_scenario_text(
        "[scenario]\nname = \"w\"\nworld_size = 4\n[[mesh]]\nname = \"m\"\nshape = [2, 2]\n"
        "dims = [\"dp\", \"tp\"]\n" +
            steps,
        "t.toml"));
    CHECK(failures_of(r) == "");
    std::vector<std::string> shown;
    for (const Warning& w : r.warnings) shown.push_back(w.text);
    return shown;
  };
  // No flattened mesh: two gathers, and how to get one.
  CHECK(warnings_of("[[step]]\ndtensor = { name = \"w\", mesh = \"m\", shape = [8], placements = "
                    "[\"S(0)\", \"S(0)\"] }\n[[step]]\nredistribute = { tensor = \"w\", "
                    "placements = [\"R\", \"R\"] }\n") ==
        std::vector<std::string>{
            "ranks 0-3: redistribute [S(0), S(0)] -> [R, R] plans 2 all_gather steps one "
            "after another, on mesh dims \"dp\", \"tp\"; with a flattened mesh over those dims "
            "(mesh[\"dp\", \"tp\"]._flatten()) DTensor issues one (PyTorch warns)"});
  // FSDP2 over TP gathered back: the shard order undoes dp before tp, an order a flattened mesh
  // cannot run, and PyTorch says so whether or not there is one.
  CHECK(
      warnings_of(
          "[[step]]\ndtensor = { name = \"w\", mesh = \"m\", shape = [8], placements = "
          "[\"_StridedShard(0, split_factor=2)\", \"S(0)\"] }\n[[step]]\nredistribute = { tensor = "
          "\"w\", placements = [\"R\", \"R\"] }\n") ==
      std::vector<std::string>{
          "ranks 0-3: redistribute [_S(0, 2), S(0)] -> [R, R] plans 2 all_gather steps "
          "one after another, on mesh dims \"dp\", \"tp\"; PyTorch merges all_gather "
          "collectives only when their mesh dims come inner first (PyTorch warns)"});
  // One collective, or different ones, or a mesh dim of one rank: nothing to say.
  CHECK(warnings_of("[[step]]\ndtensor = { name = \"w\", mesh = \"m\", shape = [8], placements = "
                    "[\"S(0)\", \"R\"] }\n[[step]]\nredistribute = { tensor = \"w\", "
                    "placements = [\"R\", \"S(0)\"] }\n")
            .empty());
  // Gathers of a _StridedShard merge too, and then PyTorch refuses to run them.
  CHECK(warnings_of("[[mesh]]\nname = \"f\"\nfrom = \"m\"\nflatten = \"dptp\"\n[[step]]\n"
                    "dtensor = { name = \"w\", mesh = \"m\", shape = [8], placements = "
                    "[\"_StridedShard(0, split_factor=2)\", \"_StridedShard(0, split_factor=2)\"] "
                    "}\n[[step]]\n"
                    "redistribute = { tensor = \"w\", placements = [\"R\", \"R\"] }\n"
                    "raises = { type = \"AssertionError\", contains = \"_StridedShard "
                    "redistribute assumes no flattened transforms\" }\n")
            .empty());
  // A merged average of integers would leave a float32 shard in an int64 DTensor.
  CHECK(warnings_of("[[mesh]]\nname = \"f\"\nfrom = \"m\"\nflatten = \"dptp\"\n[[step]]\n"
                    "tensor = { name = \"mine\", value = \"full(4, rank + 1, dtype=int64)\" }\n"
                    "[[step]]\nfrom_local = { name = \"g\", local = \"mine\", mesh = \"m\", "
                    "placements = [\"Partial(avg)\", \"Partial(avg)\"] }\n[[step]]\n"
                    "redistribute = { tensor = \"g\", placements = [\"R\", \"R\"] }\n"
                    "raises = { type = \"NotImplementedError\", contains = \"a merged "
                    "Partial(avg) of dtype int64\" }\n")
            .empty());
}

TEST_CASE("redistribute: shard orders are planned by PyTorch's min-cost search",
          "[sim][dtensor][planner]") {
  // Rank 0's collectives as PyTorch 2.15 issues them, measured on eight Gloo processes (a, b)
  // and planned by its DTensorRedistributePlanner for a 4096 x 4096 tensor on a fake process
  // group (c): a cut of the target made between two gathers, because it shrinks the second;
  // gathers of equal cost in the order PyTorch generates them (lower tensor dim first); and,
  // for a large tensor, all_to_all where a gather and a cut would move more.
  const auto rank0_collectives = [](const std::string& head, const std::string& steps) {
    RunOptions options;
    options.trace = true;
    const ScenarioResult r = run_scenario(
        load_scenario_text(head + "[[mesh]]\nname = \"m\"\n" + steps, "t.toml"), options);
    CHECK(failures_of(r) == "");
    std::vector<std::string> out = rank0_steps(r);
    std::erase_if(out, [](const std::string& e) { return e[0] != ' '; });
    return out;
  };
  const std::string gloo8 = "[scenario]\nname = \"p\"\nworld_size = 8\ndevice = \"cpu\"\n";
  const std::string mesh222 = "shape = [2, 2, 2]\ndims = [\"pp\", \"dp\", \"tp\"]\n";
  CHECK(rank0_collectives(
            gloo8, mesh222 +
                       "[[step]]\ndtensor = { name = \"a\", mesh = \"m\", shape = "
                       "[4, 2], placements = [\"_StridedShard(0, split_factor=2)\", \"S(0)\", "
                       "\"R\"], fill = \"index\" }\n[[step]]\nredistribute = { "
                       "tensor = \"a\", placements = [\"S(1)\", \"R\", \"R\"] }\n") ==
        std::vector<std::string>{"  all_gather_into_tensor(float32[1, 2]) on m.pp#0",
                                 "  all_gather_into_tensor(float32[2, 1]) on m.dp#0"});
  CHECK(rank0_collectives(gloo8,
                          mesh222 + "[[step]]\ndtensor = { name = \"b\", mesh = \"m\", shape = "
                                    "[4, 4], placements = [\"S(1)\", \"S(0)\", \"S(1)\"], fill = "
                                    "\"index\" }\n[[step]]\nredistribute = { tensor = \"b\", "
                                    "placements = [\"S(1)\", \"_StridedShard(0, split_factor=2)\", "
                                    "\"S(0)\"] }\n") ==
        std::vector<std::string>{"  all_gather_into_tensor(float32[2, 1]) on m.dp#0",
                                 "  all_gather_into_tensor(float32[4, 1]) on m.tp#0"});
  // One GPU a host, as the cost model sees a "cpu" mesh (where Gloo would gather instead).
  CHECK(rank0_collectives(
            "[scenario]\nname = \"p\"\nworld_size = 8\ngpus_per_node = 1\n",
            "shape = [2, 4]\ndims = [\"dp\", \"tp\"]\n[[step]]\ndtensor = { name = \"c\", mesh = "
            "\"m\", shape = [4096, 4096], placements = [\"_StridedShard(0, split_factor=4)\", "
            "\"S(0)\"], meta "
            "= true }\n[[step]]\nredistribute = { tensor = \"c\", placements = [\"S(0)\", "
            "\"S(0)\"] }\n") ==
        std::vector<std::string>{"  all_gather_into_tensor(float32[512, 4096]) on m.dp#0",
                                 "  all_to_all(float32[1024, 1024]) on m.tp#0",
                                 "  all_to_all(float32[512, 1024]) on m.tp#0"});
}

TEST_CASE("redistribute: a plan search past its bound fails on every rank, searched once",
          "[sim][dtensor][planner][limits]") {
  // Eight mesh dims of two: the states grow past meshsim's bound. The first rank's failure
  // serves the other 255 (each searching would take minutes).
  const ScenarioResult r = run_scenario(load_scenario_text(
      "[scenario]\nname = \"p\"\nworld_size = 256\n[[mesh]]\nname = \"m\"\nshape = [2, 2, 2, "
      "2, 2, 2, 2, 2]\ndims = [\"a\", \"b\", \"c\", \"d\", \"e\", \"f\", \"g\", \"h\"]\n"
      "[[step]]\ndtensor = { name = \"x\", mesh = \"m\", shape = [64, 64, 64], placements = "
      "[\"_StridedShard(0, split_factor=4)\", \"_StridedShard(1, split_factor=4)\", "
      "\"_StridedShard(2, split_factor=2)\", \"S(0)\", "
      "\"S(1)\", \"S(2)\", \"S(0)\", \"S(1)\"], meta = true }\n[[step]]\nredistribute = { "
      "tensor = \"x\", placements = [\"S(2)\", \"S(2)\", \"S(1)\", \"S(1)\", \"S(0)\", "
      "\"S(0)\", \"S(2)\", \"S(1)\"] }\nraises = { type = \"RuntimeError\", contains = \"queued "
      "65536 states without reaching the target, meshsim's bound\" }\n",
      "t.toml"));
  CHECK(failures_of(r) == "");
  CHECK(r.passed());
}

TEST_CASE("redistribute: any layout to any other equals the target laid out directly",
          "[sim][dtensor][property]") {
  meshsim::testing::SplitMix rng{20261201};
  const std::vector<std::vector<int64_t>> meshes = {{4}, {2, 2}, {2, 3}, {3, 2}, {2, 2, 2}, {1, 4}};
  // Runs with a flattened mesh, those where PyTorch's merged gather goes wrong, and those where
  // uneven sizes make a _StridedShard layout another than the shard order PyTorch plans it as
  // (it then fails in a collective, or returns a DTensor meshsim refuses to model). In the last
  // two the run must show it; otherwise the values are the target's.
  int flattened_runs = 0;
  int wrong_runs = 0;
  int strided_mismatch_runs = 0;
  for (int round = 0; round < 320; ++round) {
    const std::vector<int64_t>& mesh = meshes[static_cast<size_t>(rng.below(6))];
    const int64_t world = std::accumulate(mesh.begin(), mesh.end(), int64_t{1}, std::multiplies{});
    const auto ndim = static_cast<int64_t>(1 + rng.below(3));
    std::vector<int64_t> shape;
    for (int64_t d = 0; d < ndim; ++d) shape.push_back(rng.below(10));
    auto random_placements = [&] {
      std::vector<Placement> out;
      for (size_t m = 0; m < mesh.size(); ++m) {
        if (rng.below(3) == 0) {
          out.push_back(Replicate{});
        } else {
          out.push_back(Shard{rng.below(ndim) - (rng.below(4) == 0 ? ndim : 0)});
        }
      }
      return out;
    };
    // FSDP2 over TP on a 2-D mesh: a tensor dim cut by tp first, then by dp with a split factor
    // (a shard order PyTorch decodes); on a 1-D mesh, a split factor no shard order explains.
    auto strided = [&] {
      const int64_t d = rng.below(ndim);
      if (mesh.size() == 2) return std::vector<Placement>{StridedShard{d, mesh[1]}, Shard{d}};
      return std::vector<Placement>(mesh.size(), StridedShard{d, 2 + rng.below(3)});
    };
    const bool strided_kind = mesh.size() <= 2 && rng.below(3) == 0;
    const std::vector<Placement> from =
        strided_kind && rng.below(2) == 0 ? strided() : random_placements();
    std::vector<Placement> to = strided_kind && rng.below(2) == 0 ? strided() : random_placements();
    // PyTorch has no move from a Shard into a _StridedShard outside a shard order.
    if (mesh.size() == 1 && std::holds_alternative<StridedShard>(to[0]) &&
        !std::holds_alternative<Replicate>(from[0]))
      to = random_placements();
    const bool gloo = rng.below(4) == 0;
    // Dims named d0, d1, ...; on two of three meshes of several dims, a flattened mesh over two
    // or all of them, which PyTorch merges collectives over.
    std::vector<std::string> dims;
    for (size_t m = 0; m < mesh.size(); ++m) dims.push_back(fmt::format("\"d{}\"", m));
    std::string flattened;
    if (mesh.size() > 1 && rng.below(3) != 0) {
      std::vector<std::string> merged = dims;
      if (merged.size() == 3 && rng.below(2) == 0)
        merged.erase(merged.begin() + static_cast<ptrdiff_t>(rng.below(3)));
      flattened =
          fmt::format("[[mesh]]\nname = \"f\"\nfrom = \"m\"\nslice = [{}]\nflatten = \"f\"\n",
                      fmt::join(merged, ", "));
      ++flattened_runs;
    }
    const std::string text = fmt::format(
        "[scenario]\nname = \"p\"\nworld_size = {}\ndevice = \"{}\"\n"
        "[[mesh]]\nname = \"m\"\nshape = [{}]\ndims = [{}]\n{}"
        "[[step]]\ndtensor = {{ name = \"w\", mesh = \"m\", shape = [{}], placements = {}, fill = "
        "\"index\", dtype = \"float64\" }}\n"
        "[[step]]\nredistribute = {{ tensor = \"w\", placements = {}, out = \"moved\" }}\n"
        "[[step]]\ndtensor = {{ name = \"ref\", mesh = \"m\", shape = [{}], placements = {}, fill "
        "= \"index\", dtype = \"float64\" }}\n"
        "[[expect]]\nsame = [\"moved\", \"ref\"]\nequals = true\n"
        "[[step]]\nfull_tensor = {{ tensor = \"w\", out = \"full\" }}\n"
        "[[step]]\ndtensor = {{ name = \"whole\", mesh = \"m\", shape = [{}], fill = \"index\", "
        "dtype = \"float64\" }}\n"
        "[[step]]\nto_local = {{ tensor = \"whole\", out = \"whole_local\" }}\n"
        "[[expect]]\nsame = [\"full\", \"whole_local\"]\nequals = true\n",
        world, gloo ? "cpu" : "cuda", fmt::join(mesh, ", "), fmt::join(dims, ", "), flattened,
        fmt::join(shape, ", "), quoted(from), quoted(to), fmt::join(shape, ", "), quoted(to),
        fmt::join(shape, ", "));
    INFO(text);
    const ScenarioResult r = run_scenario(load_scenario_text(text, "p.toml"));
    const auto warned = [&r](std::string_view phrase) {
      return std::any_of(r.warnings.begin(), r.warnings.end(), [phrase](const Warning& w) {
        return w.text.find(phrase) != std::string::npos;
      });
    };
    const std::string failures = failures_of(r);
    if (warned("disagree across ranks") ||
        failures.find("does not hold its placements") != std::string::npos) {
      ++strided_mismatch_runs;
      CHECK(failures != "");
      continue;
    }
    if (warned("returns wrong values without a word")) {
      ++wrong_runs;
      CHECK(failures != "");
    } else {
      CHECK(failures == "");
    }
    CHECK(r.listed_checks() == static_cast<size_t>(2 * world));
  }
  CHECK(flattened_runs > 100);
  CHECK(wrong_runs > 5);
  CHECK(strided_mismatch_runs > 0);
}

TEST_CASE("redistribute: uneven strided gathers, Gloo's all_to_all, equal placements",
          "[sim][dtensor]") {
  // 9 positions, split factor 2, over 4 ranks: pieces {0, 1, 5}, {2, 3, 6}, {4, 7}, {8}, as
  // PyTorch 2.15 lays them out (measured). The gather pads the third piece inside the tensor;
  // PyTorch 2.15 leaves every piece's padding out, and so does meshsim: the result is exact.
  const ScenarioResult strided = run_scenario(load_scenario_text(
      "[scenario]\nname = \"t\"\nworld_size = 4\n[[mesh]]\nname = \"m\"\nshape = [4]\n"
      "[[step]]\ndtensor = { name = \"w\", mesh = \"m\", shape = [9], placements = "
      "[\"_StridedShard(0, sf=2)\"], fill = \"index\" }\n"
      "[[step]]\nto_local = { tensor = \"w\", out = \"mine\" }\n"
      "[[expect]]\ntensor = \"mine\"\nby_rank = [[0, 1, 5], [2, 3, 6], [4, 7], [8]]\n"
      "[[step]]\nfull_tensor = { tensor = \"w\", out = \"full\" }\n"
      "[[expect]]\ntensor = \"full\"\nequals = [0, 1, 2, 3, 4, 5, 6, 7, 8]\n",
      "t.toml"));
  CHECK(failures_of(strided) == "");
  CHECK(strided.listed_checks() == 8);
  // Gloo has no all_to_all: the Shard(0) -> Shard(1) move gathers, and says so once.
  const ScenarioResult gloo = run_scenario(load_scenario_text(
      "[scenario]\nname = \"t\"\nworld_size = 2\ndevice = \"cpu\"\n[[mesh]]\nname = \"m\"\n"
      "shape = [2]\n[[step]]\ndtensor = { name = \"w\", mesh = \"m\", shape = [4, 4], placements "
      "= [\"Shard(0)\"], fill = \"index\" }\n"
      "[[step]]\nredistribute = { tensor = \"w\", placements = [\"Shard(1)\"] }\n"
      "[[expect]]\nwarning = { contains = \"Gloo has no all_to_all\", count = 1 }\n",
      "t.toml"));
  CHECK(failures_of(gloo) == "");
  REQUIRE(gloo.listed_checks() == 1);
  // Equal placements are no move at all, even onto another mesh (PyTorch returns early).
  const ScenarioResult same = run_scenario(load_scenario_text(
      kWorld4 + "[[mesh]]\nname = \"n\"\nshape = [2, 2]\ndims = [\"a\", "
                "\"b\"]\n[[step]]\nredistribute = { tensor = \"w\", "
                "mesh = \"n\", placements = [\"Shard(0)\", \"R\"], out = \"v\" }\n"
                "[[expect]]\nsame = [\"v\", \"w\"]\nequals = true\n",
      "t.toml"));
  CHECK(failures_of(same) == "");
}

TEST_CASE("redistribute: a strided gather's index lists count against the memory budget",
          "[sim][dtensor][limits]") {
  struct Restore {
    ~Restore() { MemoryBudget::set_limit(MemoryBudget::kUnlimited); }
  } restore;
  // 16384 runs a piece: the bookkeeping (64 B a run, 4 MiB) is refused, not the tensors.
  const std::string text =
      "[scenario]\nname = \"t\"\nworld_size = 4\n[[mesh]]\nname = \"m\"\nshape = [4]\n"
      "[[step]]\ndtensor = { name = \"w\", mesh = \"m\", shape = [65536], placements = "
      "[\"_StridedShard(0, split_factor=16384)\"] }\n[[step]]\nredistribute = { tensor = \"w\", "
      "placements = "
      "[\"R\"] }\n";
  MemoryBudget::set_limit(MemoryBudget::in_use() + (uint64_t{3} << 20));
  const ScenarioResult r = run_scenario(load_scenario_text(text, "t.toml"));
  REQUIRE(r.failures.size() == 4);
  for (const auto& f : r.failures) {
    REQUIRE(f.has_value());
    CHECK(f->error_type == "MemoryError");
    CHECK_THAT(f->message, Catch::StartsWith("the index runs of a strided gather needs 4.0 MiB"));
  }
  MemoryBudget::set_limit(MemoryBudget::kUnlimited);
  CHECK(run_scenario(load_scenario_text(text, "t.toml")).passed());
}
