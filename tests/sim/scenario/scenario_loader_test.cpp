#include "sim/steps/builtin_steps.hpp"

#include <catch2/catch.hpp>

#include "sim/run/runner.hpp"
#include "tests/support/scenario_text.hpp"

using namespace meshsim::sim;

using meshsim::testing::kWorld4;
using meshsim::testing::load_error;
using meshsim::testing::run_text;

TEST_CASE("scenario_loader: the program keeps file order", "[sim][loader]") {
  const Scenario s = load_scenario_text(R"toml([scenario]
name = "order"
world_size = 2
[[mesh]]
name = "a"
shape = [2]
dims = ["x"]
[[expect]]
coordinate = "a"
equals = ["rank"]
[[step]]
dump = "a"
[[mesh]]
name = "b"
from = "a"
flatten = "y"
)toml",
                                        "o.toml");
  REQUIRE(s.steps.size() == 4);
  CHECK(s.steps[0]->kind == "mesh");
  CHECK(s.steps[1]->kind == "expect");
  CHECK(s.steps[2]->kind == "dump");
  CHECK(s.steps[3]->kind == "mesh");
  CHECK(s.steps[1]->where.to_string() == "o.toml:8:1");
  const ScenarioResult r = run_scenario(s);
  CHECK(r.passed());
  CHECK(r.listed_checks() == 2);
  CHECK(r.dumps.size() == 2);
}

TEST_CASE("scenario_loader: mistakes are refused with file:line:col", "[sim][loader][errors]") {
  CHECK_THAT(load_error(kWorld4 + "[[step]]\nfrob = 1\n"),
             Catch::StartsWith("t.toml:5:1: unknown step \"frob\" (expected one of: mesh, dump, "
                               "expect, tensor, all_reduce,"));
  CHECK(load_error(kWorld4 + "[[mesh]]\nname = \"m\"\nshape = [2]\nfrom = \"x\"\n") ==
        "t.toml:4:1: mesh \"m\" needs exactly one of shape, ranks, from or from_group");
  CHECK(load_error(kWorld4 + "[[mesh]]\nname = \"m\"\nshape = [2, 4]\n") ==
        "t.toml:6:9: mesh \"m\" has 8 ranks, more than the world size 4");
  CHECK(load_error(kWorld4 + "[[mesh]]\nname = \"m\"\nshape = [2, 2]\ndims = [\"a\"]\n") ==
        "t.toml:7:8: 1 dims named for a 2-d shape");
  CHECK(load_error(kWorld4 + "[[mesh]]\nname = \"m\"\nranks = [[0, 1], [2]]\n") ==
        "t.toml:6:18: ranks is ragged: expected 2 entries at depth 2, found 1");
  CHECK(load_error(kWorld4 +
                   "[[mesh]]\nname = \"m\"\nshape = [4]\ndims = [\"x\"]\n[[mesh]]\nname = \"s\"\n"
                   "from = \"m\"\nslice = [\"y\"]\n") ==
        "t.toml:11:9: mesh \"m\" has no dim \"y\" to slice (valid: x)");
  CHECK(load_error(kWorld4 +
                   "[[mesh]]\nname = \"m\"\nshape = [4]\ndims = [\"x\"]\n[[mesh]]\nname = \"f\"\n"
                   "from = \"m\"\nflatten = false\n") ==
        "t.toml:11:11: flatten = false does nothing; remove it");
  CHECK(load_error(kWorld4 + "[[expect]]\nvalue = 1\n") ==
        "t.toml:4:1: an expectation needs exactly one of equals or by_rank");
  CHECK(load_error(kWorld4 + "[[expect]]\nvalue = 1\nby_rank = [1, 2]\n") ==
        "t.toml:6:11: by_rank must be an array with one value per rank (4), or a table of some "
        "ranks ({ 0 = ..., 3 = ... })");
  CHECK(load_error(kWorld4 + "[[expect]]\nvalue = 1\nby_rank = { 4 = 1 }\n") ==
        "t.toml:6:13: by_rank keys are ranks from 0 to 3, not \"4\"");
  CHECK(load_error(kWorld4 + "[[expect]]\nvalue = 1\nby_rank = { x = 1 }\n") ==
        "t.toml:6:13: by_rank keys are ranks from 0 to 3, not \"x\"");
  CHECK(load_error(kWorld4 + "[[expect]]\nvalue = 1\ncoordinate = \"m\"\nequals = 1\n") ==
        "t.toml:6:1: an expectation checks one query; found both \"value\" and \"coordinate\"");
  CHECK(load_error(kWorld4 + "[[step]]\ndump = \"m\"\nwhen = \"rank ==\"\n") ==
        "t.toml:6:16: bad expression in when: expression ends too early in \"rank ==\"");
  CHECK(
      load_error(kWorld4 + "[[mesh]]\nname = \"m\"\nshape = [4]\nraises = { type = \"Oops\" }\n") ==
      "t.toml:7:19: unknown error type \"Oops\" (expected RuntimeError, ValueError, KeyError, "
      "TypeError, IndexError, AttributeError, NotImplementedError, MemoryError, OverflowError, "
      "ZeroDivisionError or AssertionError)");
  CHECK_THAT(load_error(kWorld4 + "[[step]]\n"),
             Catch::StartsWith("t.toml:4:1: a [[step]] needs a step key"));
  CHECK_THAT(load_error(kWorld4 + "[other]\n"),
             Catch::StartsWith("t.toml:4:2: unknown key \"other\""));
}

TEST_CASE("scenario_loader: tensor literals are torch.tensor's nested lists",
          "[sim][loader][errors]") {
  const auto step = [](const std::string& value) {
    return "[[step]]\ntensor = { name = \"x\", value = " + value + " }\n";
  };
  CHECK(load_error(kWorld4 + step("[[1, 2], [3]]")) ==
        "t.toml:5:41: values is ragged: expected 2 entries at depth 2, found 1");
  CHECK(load_error(kWorld4 + step("[[1, 2], 3]")) ==
        "t.toml:5:41: values is ragged: a number where a list belongs");
  CHECK(load_error(kWorld4 + step("[1, [2]]")) ==
        "t.toml:5:36: values is ragged: a list where a number belongs");
  CHECK(load_error(kWorld4 + step("[1, 2.5], dtype = \"int32\"")) ==
        "t.toml:5:36: a int32 tensor holds integers, not 2.5");
  CHECK(load_error(kWorld4 + step("[1, \"rank +\"]")).find("t.toml:5:") == 0);
  std::string deep = "1";
  for (int i = 0; i < 26; ++i) deep = "[" + deep + "]";
  CHECK(load_error(kWorld4 + step(deep)).ends_with("a tensor has at most 25 dims"));
  CHECK(load_error(kWorld4 + step("\"ones(2)\", dtype = \"int32\"")) ==
        "t.toml:5:51: dtype goes with a list of values");
  // Integers (and expressions) make int64, a float makes float32, as torch.tensor infers.
  const ScenarioResult r = run_text(kWorld4 + step("[[1, \"rank\"], [3, 4]]") +
                                    "[[expect]]\ntensor = \"x\"\nby_rank = [[1, 0, 3, 4], [1, 1, "
                                    "3, 4], [1, 2, 3, 4], [1, 3, 3, 4]]\n" +
                                    "[[step]]\ntensor = { name = \"y\", value = [1, 0.5] }\n"
                                    "[[expect]]\ntensor = \"y\"\nequals = [1.0, 0.5]\n");
  CHECK(r.passed());
}

TEST_CASE("scenario_loader: collective groups name declared meshes and dims",
          "[sim][loader][errors]") {
  const std::string mesh = "[[mesh]]\nname = \"m\"\nshape = [2, 2]\ndims = [\"dp\", \"tp\"]\n";
  CHECK(load_error(kWorld4 + mesh +
                   "[[step]]\nbarrier = { group = { mesh = \"m\", dim = \"pp\" } }\n") ==
        "t.toml:9:41: mesh \"m\" has no dim \"pp\" (its dims: dp, tp)");
  CHECK(load_error(kWorld4 + "[[step]]\nbarrier = { group = { mesh = \"nope\" } }\n") ==
        "t.toml:5:30: unknown mesh \"nope\"");
  CHECK(load_error(kWorld4 + mesh + "[[step]]\nbarrier = { group = { mesh = \"m\" } }\n") ==
        "t.toml:9:21: mesh \"m\" has 2 dims: name one with dim");
  CHECK(load_error(kWorld4 + "[[step]]\ndump = \"nope\"\n") == "t.toml:5:8: unknown mesh \"nope\"");
}

TEST_CASE("scenario_loader: [[fault]] tables are checked", "[sim][loader][errors]") {
  CHECK(load_error(kWorld4 + "[[fault]]\nexplode = { rank = 1, step = 1 }\n") ==
        "t.toml:5:1: unknown fault \"explode\" (expected crash, stall, backend_error or "
        "stack_overflow)");
  CHECK(load_error(kWorld4 + "[[fault]]\ncrash = { rank = 9, step = 1 }\n") ==
        "t.toml:5:18: rank is outside the world");
  CHECK(load_error(kWorld4 + "[[fault]]\ncrash = { rank = 1 }\n") ==
        "t.toml:5:9: crash needs exactly one of step or collective");
  CHECK(load_error(kWorld4 + "[[fault]]\nstall = { rank = 1, seconds = -2, step = 1 }\n") ==
        "t.toml:5:31: seconds must be positive (at least 1e-9), got -2");
  CHECK(load_error(kWorld4 + "[[fault]]\nbackend_error = { rank = 1, step = 1 }\n") ==
        "t.toml:5:29: unknown key \"step\" in backend_error (expected one of: rank, collective)");
  const Scenario s = load_scenario_text(
      "[scenario]\nname = \"t\"\nworld_size = 4\n[[fault]]\nstall = { rank = 2, seconds = 1.5, "
      "collective = 3 }\n",
      "t.toml");
  REQUIRE(s.faults.size() == 1);
  CHECK(s.faults[0].describe() == "stall rank 2 for 1.5 s at its collective 3");
}

TEST_CASE("scenario_loader: the header is checked", "[sim][loader][errors]") {
  CHECK_THROWS_WITH(
      load_scenario_text("", "e.toml"),
      "e.toml:1:1: a scenario file needs a [scenario] table with name and world_size");
  CHECK_THROWS_WITH(load_scenario_text("[scenario]\nname = \"x\"\nworld_size = 0\n", "e.toml"),
                    "e.toml:3:14: world_size must be between 1 and 1048576");
  CHECK_THROWS_WITH(
      load_scenario_text("step = 3\n[scenario]\nname = \"x\"\nworld_size = 2\n", "e.toml"),
      "e.toml:1:8: step must be an array of tables: write [[step]]");
  CHECK_THROWS_WITH(load_scenario_text("[scenario]\nworld_size = 2\n", "e.toml"),
                    "e.toml:1:1: [scenario] needs the key \"name\"");
}

TEST_CASE("runner: raises, when and unexpected errors", "[sim][runner]") {
  const ScenarioResult ok = run_text(kWorld4 + R"toml(
[[mesh]]
name = "m"
shape = [2, 2]
dims = ["a", "b"]
[[mesh]]
name = "bad"
from = "m"
slice = ["b", "a"]
raises = { type = "KeyError", contains = "ascending order", on = "all" }
[[expect]]
value = "coord(m, a)"
equals = 1
when = "rank >= 2"
)toml");
  CHECK(ok.passed());
  CHECK(ok.listed_checks() == 2);

  const ScenarioResult missing = run_text(kWorld4 + R"toml(
[[mesh]]
name = "m"
shape = [4]
raises = { type = "RuntimeError", contains = "x", on = [1] }
)toml");
  CHECK_FALSE(missing.passed());
  CHECK(missing.failed_ranks() == 1);
  REQUIRE(missing.failures[1]);
  CHECK(missing.failures[1]->message ==
        "expected RuntimeError containing \"x\", but the step succeeded");

  const ScenarioResult unexpected = run_text(kWorld4 + R"toml(
[[mesh]]
name = "m"
shape = [2]
[[expect]]
value = "coord(m, 0)"
equals = 0
)toml");
  CHECK(unexpected.failed_ranks() == 2);  // ranks 2 and 3 are not in m
  REQUIRE(unexpected.failures[3]);
  CHECK(unexpected.failures[3]->where.to_string() == "t.toml:8:1");
  CHECK(unexpected.failures[3]->message == "coord(m, 0): rank 3 is not in mesh \"m\"");
}

TEST_CASE("scenario_loader: repeat loops, nested, with variables in expressions and when",
          "[sim][loader][repeat]") {
  // Rank r runs the outer loop r + 1 times; the inner loop skips i == 1 with `when`. Each
  // iteration all-gathers nothing but its own value: the dump records every (i, k) reached.
  const ScenarioResult r = run_text(kWorld4 + R"toml(
[[step]]
repeat = { var = "i", count = 3 }
  [[step]]
  repeat = { var = "k", count = "i + 1" }
  when = "i != 1"
    [[step]]
    tensor = { name = "x", value = "full(1, 10 * i + k)" }
    [[expect]]
    tensor = "x"
    equals = ["10 * i + k"]
  [[step]]
  end_repeat = "k"
[[step]]
end_repeat = "i"
[[step]]
repeat = { var = "n", count = 0 }
  [[step]]
  tensor = { name = "never", value = "ones(1)" }
[[step]]
end_repeat = "n"
[[expect]]
tensor = "x"
equals = [22]
)toml");
  CHECK(r.passed());
  // i = 0: k = 0; i = 1: skipped; i = 2: k = 0, 1, 2. Four iterations, plus the last check, on
  // each of 4 ranks.
  CHECK(r.listed_checks() == 4 * 5);
}

TEST_CASE("scenario_loader: repeat mistakes are refused with file:line:col",
          "[sim][loader][repeat][errors]") {
  CHECK_THAT(load_error(kWorld4 + "[[step]]\nrepeat = { var = \"i\", count = 2 }\n"),
             Catch::Contains("t.toml:4:1: repeat \"i\" is never closed: add [[step]] "
                             "end_repeat = \"i\" after its body"));
  CHECK_THAT(load_error(kWorld4 + "[[step]]\nend_repeat = \"i\"\n"),
             Catch::Contains("t.toml:5:14: end_repeat \"i\" closes no repeat"));
  CHECK_THAT(load_error(kWorld4 +
                        "[[step]]\nrepeat = { var = \"i\", count = 2 }\n[[step]]\nrepeat = { var "
                        "= \"k\", count = 2 }\n[[step]]\nend_repeat = \"i\"\n"),
             Catch::Contains("end_repeat \"i\" does not close the innermost repeat, \"k\" (at "
                             "t.toml:6:1): close it first"));
  CHECK_THAT(load_error(kWorld4 +
                        "[[step]]\nrepeat = { var = \"i\", count = 2 }\n[[step]]\nrepeat = { var "
                        "= \"i\", count = 2 }\n"),
             Catch::Contains("loop variable \"i\" is already in use by the repeat at t.toml:4:1"));
  CHECK_THAT(load_error(kWorld4 + "[[step]]\nrepeat = { var = \"rank\", count = 2 }\n"),
             Catch::Contains("\"rank\" cannot name a loop variable"));
  CHECK_THAT(load_error(kWorld4 + "[[step]]\nrepeat = { var = \"2x\", count = 2 }\n"),
             Catch::Contains("\"2x\" cannot name a loop variable"));
  CHECK_THAT(load_error(kWorld4 + "[[step]]\nrepeat = { var = \"i\", count = -1 }\n"),
             Catch::Contains("count must be between 0 and 16777216"));
  // Nested counts multiply; a count known only when run is counted as 1 here.
  CHECK_THAT(
      load_error(kWorld4 + "[[step]]\nrepeat = { var = \"i\", count = 4096 }\n[[step]]\nrepeat = { "
                           "var = \"j\", count = \"rank\" }\n[[step]]\nrepeat = { var = \"k\", "
                           "count = 4097 }\n"),
      Catch::Contains("t.toml:9:31: this repeat's body would run 16781312 times with the "
                      "loops around it; nested counts multiply, and at most 16777216 "
                      "passes are allowed"));
  CHECK_THAT(load_error(kWorld4 + "[[step]]\nrepeat = { var = \"i\", count = 2, by = 1 }\n"),
             Catch::Contains("unknown key \"by\""));
  // A variable outside its loop, or another name, is unknown where it is written.
  CHECK_THAT(
      load_error(kWorld4 + "[[step]]\nrepeat = { var = \"i\", count = 2 }\n[[step]]\nend_repeat = "
                           "\"i\"\n[[step]]\nbarrier = \"WORLD\"\nwhen = \"i == 0\"\n"),
      Catch::Contains("t.toml:10:9: bad expression in when: unknown name 'i' (expected "
                      "rank, world_size, a number or a function call)"));
  CHECK_THAT(
      load_error(kWorld4 + "[[step]]\nrepeat = { var = \"i\", count = 2 }\n[[step]]\nbarrier = "
                           "\"WORLD\"\nwhen = \"j == 0\"\n[[step]]\nend_repeat = \"i\"\n"),
      Catch::Contains("unknown name 'j' (expected rank, world_size, a repeat variable "
                      "(i), a number or a function call)"));
  // A loop's `when` and count cannot use its own variable.
  CHECK_THAT(load_error(kWorld4 + "[[step]]\nrepeat = { var = \"i\", count = \"i\" }\n"),
             Catch::Contains("unknown name 'i'"));
}

TEST_CASE("runner: a repeat count is checked on each rank", "[sim][runner][repeat]") {
  const ScenarioResult r = run_text(kWorld4 + R"toml(
[[step]]
repeat = { var = "i", count = "2 - rank" }
  [[step]]
  barrier = "WORLD"
  when = "rank < 0"
[[step]]
end_repeat = "i"
)toml");
  CHECK_FALSE(r.passed());
  REQUIRE(r.failures[3]);
  CHECK(r.failures[3]->error_type == "ValueError");
  CHECK(r.failures[3]->message == "repeat \"i\": count -1 is outside [0, 16777216]");
  CHECK(r.failures[3]->step == "repeat");
  CHECK(r.failures[3]->where.to_string() == "t.toml:5:1");
  CHECK_FALSE(r.failures[0]);
}

TEST_CASE("runner: a rank's loop bodies run at most 2^24 times in all", "[sim][runner][repeat]") {
  // Rank 1 passes 4095 * 4097 + 4095 times (over the cap), rank 0 4095 * 4096 + 4095 (under).
  const ScenarioResult r = run_text(kWorld4 + R"toml(
[[step]]
repeat = { var = "i", count = "4095" }
[[step]]
repeat = { var = "j", count = "4096 * (1 - rank) + 4097 * rank" }
[[step]]
end_repeat = "j"
[[step]]
end_repeat = "i"
)toml");
  CHECK_FALSE(r.failures[0]);
  REQUIRE(r.failures[1]);
  CHECK(r.failures[1]->error_type == "ValueError");
  CHECK(r.failures[1]->message ==
        "repeat \"j\": this rank's loop bodies ran 16777216 times in all, the most allowed "
        "(nested counts multiply)");
}

TEST_CASE("outcome expectations: groups match exactly, by label (with members) or by c10d's id",
          "[sim][runner][hang]") {
  // WORLD is 0, dp's groups 1-2, tp's 3-4: rank 3 skips its tp group's all_reduce (world.tp#1).
  const std::string body = R"toml(
[[mesh]]
name = "world"
shape = [2, 2]
dims = ["dp", "tp"]
[[step]]
all_reduce = { tensor = "ones(2)", group = { mesh = "world", dim = "tp" } }
when = "rank != 3"
[[expect]]
deadlock = { group = GROUP, culprits = [3] }
)toml";
  const auto passes = [&](const std::string& group) {
    std::string text = body;
    text.replace(text.find("GROUP"), 5, group);
    const ScenarioResult r = run_text(kWorld4 + text);
    REQUIRE(r.listed_checks() == 1);
    return r.expectations[0].passed;
  };
  CHECK(passes("\"world.tp#1\""));
  CHECK(passes("\"4\""));                  // the numeric id scenarios used before labels existed
  CHECK(passes("\"world.tp#1 [2, 3]\""));  // as the per-rank lines print it
  CHECK_FALSE(passes("\"world.tp#1 [0, 1]\""));  // members that are not the group's
  CHECK_FALSE(passes("\"world.tp\""));           // a prefix is not the group
  CHECK_FALSE(passes("\"world.tp#10\""));
  CHECK_FALSE(passes("\"3\""));
  CHECK_FALSE(passes("[\"world.tp#1\", \"WORLD\"]"));
}

TEST_CASE("review mends: loops and reports", "[sim][loader][repeat]") {
  // distinct/equal compare once after the run: inside a loop they would pool iterations.
  CHECK_THAT(load_error(kWorld4 +
                        "[[mesh]]\nname = \"m\"\nshape = [4]\ndims = [\"x\"]\n[[step]]\nrepeat = "
                        "{ var = \"i\", count = 2 }\n[[step]]\nrand = { name = \"r\", shape = [4], "
                        "mesh = \"m\", placements = [\"Replicate()\"] }\n[[expect]]\nequal = { "
                        "tensor = \"r\", across = [\"x\"] }\n[[step]]\nend_repeat = \"i\"\n"),
             Catch::Contains("t.toml:12:1: distinct and equal compare ranks once, after the run: "
                             "move this out of the repeat \"i\""));
  // Ranks that failed in two places are each named once.
  const ScenarioResult r = run_text(kWorld4 + R"toml(
[[step]]
all_reduce = { tensor = "ones(2)" }
when = "rank == 0"
[[step]]
tensor = { name = "x", value = "ones(2)" }
raises = { type = "ValueError", contains = "never", on = "rank == 1" }
[[step]]
tensor = { name = "y", value = "full(2, 1 // (rank - 2) + 1 // (rank - 3))" }
when = "rank >= 2"
[[expect]]
deadlock = { cause = "rank failed", culprits = [1, 2, 3] }
)toml");
  CHECK(r.passed());
  REQUIRE(r.hang);
  const Json& summary = (*r.hang)["summary"];
  REQUIRE(summary.size() == 3);
  CHECK(summary[0].get<std::string>().starts_with("rank 1 failed at t.toml:"));
  CHECK(summary[1].get<std::string>().starts_with("ranks 2, 3 failed at t.toml:"));
}

TEST_CASE("queries: my group, intra-node groups, process group counts", "[sim][query]") {
  const std::string mesh = "[[mesh]]\nname = \"m\"\nshape = [2, 2]\ndims = [\"dp\", \"tp\"]\n";
  CHECK(load_error(kWorld4 + mesh +
                   "[[expect]]\nintra_node = { mesh = \"m\", dim = \"tp\" }\nequals = "
                   "true\n") ==
        "t.toml:9:14: intra_node needs gpus_per_node in [scenario] (how many ranks share a host)");
  CHECK(load_error(kWorld4 + mesh + "[[expect]]\nmy_group = \"m\"\nequals = [0]\n") ==
        "t.toml:9:12: my_group needs a dim");
  CHECK(load_error(kWorld4 + mesh +
                   "[[expect]]\nmy_group = { mesh = \"m\", dim = -3 }\nequals = [0]\n") ==
        "t.toml:9:32: mesh dim -3 is out of range for a 2-d mesh (dims 0 to 1, or -2 to -1, or a "
        "name: dp, tp)");
  CHECK(
      load_error(kWorld4 + mesh + "[[step]]\nbarrier = { group = { mesh = \"m\", dim = 2 } }\n") ==
      "t.toml:9:41: mesh dim 2 is out of range for a 2-d mesh (dims 0 to 1, or -2 to -1, or a "
      "name: dp, tp)");
  CHECK(load_error(kWorld4 + mesh + "[[expect]]\nprocess_groups = \"all\"\nequals = 1\n") ==
        "t.toml:9:18: process_groups is \"created\" (every group created, WORLD included) or "
        "\"joined\" (the groups this rank is a member of)");
  CHECK(load_error(kWorld4 + "gpus_per_node = 0\n") ==
        "t.toml:4:17: gpus_per_node must be between 1 and 1048576");
  // Four ranks on one eight-GPU host: every group is intra-node.
  const ScenarioResult one_host = run_scenario(load_scenario_text(
      "[scenario]\nname = \"t\"\nworld_size = 4\ngpus_per_node = 8\n" + mesh +
          "[[expect]]\nintra_node = { mesh = \"m\", dim = \"dp\" }\nequals = true\n",
      "t.toml"));
  CHECK(one_host.passed());
  // Two hosts of two GPUs: tp groups [0, 1] and [2, 3] stay on one host, dp groups [0, 2] and
  // [1, 3] cross. Groups: WORLD, two of dp, two of tp; each rank is in three.
  const ScenarioResult r = run_scenario(load_scenario_text(
      "[scenario]\nname = \"t\"\nworld_size = 4\ngpus_per_node = 2\n" + mesh +
          "[[expect]]\nintra_node = { mesh = \"m\", dim = \"tp\" }\nequals = true\n"
          "[[expect]]\nintra_node = { mesh = \"m\", dim = \"dp\" }\nequals = false\n"
          "[[expect]]\nmy_group = { mesh = \"m\", dim = \"dp\" }\nequals = [\"rank % 2\", "
          "\"rank % 2 + 2\"]\n"
          "[[expect]]\nprocess_groups = \"created\"\nequals = 5\n"
          "[[expect]]\nprocess_groups = \"joined\"\nequals = 3\n"
          // by_rank may name some ranks only: the others record nothing.
          "[[expect]]\nmy_group = { mesh = \"m\", dim = \"tp\" }\nby_rank = { 1 = [0, 1], 2 = "
          "[2, 3] }\n",
      "t.toml"));
  REQUIRE(r.listed_checks() == 22);
  for (const ExpectationRecord& e : r.expectations) {
    INFO(e.what << " on rank " << e.rank << ": " << e.observed.dump());
    CHECK(e.passed);
  }
}

TEST_CASE("queries: collectives, dtensor metadata, from_local's keywords", "[sim][query]") {
  const std::string mesh = "[[mesh]]\nname = \"m\"\nshape = [2, 2]\ndims = [\"dp\", \"tp\"]\n";
  CHECK(load_error(kWorld4 + mesh + "[[step]]\ncount_collectives = \"begin\"\n") ==
        "t.toml:9:21: count_collectives is \"start\" (a fresh count) or \"stop\"");
  CHECK(load_error(kWorld4 + mesh + "[[expect]]\ncollectives = \"all\"\nequals = 1\n") ==
        "t.toml:9:15: collectives is \"counts\", \"total\" or { op, mesh, dim }");
  CHECK(load_error(kWorld4 + mesh +
                   "[[expect]]\ncollectives = { op = \"allreduce\" }\nequals = 1\n") ==
        "t.toml:9:22: op is one of all_reduce, all_gather, all_gather_into_tensor, reduce_scatter, "
        "broadcast, all_to_all, broadcast_object_list, all_gather_object (CommDebugMode counts no "
        "send, recv or barrier)");
  CHECK(load_error(kWorld4 + mesh + "[[expect]]\ncollectives = { mesh = \"m\" }\nequals = 1\n") ==
        "t.toml:9:15: collectives in a mesh of several dims needs a dim");
  const std::string x = mesh +
                        "[[step]]\ndtensor = { name = \"x\", mesh = \"m\", shape = [4], "
                        "placements = [\"R\", \"S(0)\"] }\n";
  CHECK(load_error(kWorld4 + x +
                   "[[expect]]\ndtensor = { name = \"x\", field = \"size\" }\nequals = 1\n") ==
        "t.toml:11:33: field is one of shape, stride, dtype, placements, shard_order, mesh_shape, "
        "mesh_dims, local_shape, requires_grad");
  CHECK(load_error(kWorld4 + x +
                   "[[step]]\nfrom_local = { name = \"y\", local = \"x\", mesh = \"m\", "
                   "shape = [8] }\n") ==
        "t.toml:11:14: ('Found shape:(8,), stride:None.', 'Please pass both shape and stride at "
        "the same time.') (RuntimeError in PyTorch)");

  // Counting covers what DTensor issues itself, not a barrier, and stops at "stop"; a group
  // filter keeps one dim's.
  const ScenarioResult r = run_text(kWorld4 + x + R"toml(
[[step]]
count_collectives = "start"
[[step]]
redistribute = { tensor = "x", placements = ["R", "R"], out = "y" }
[[step]]
all_reduce = { tensor = "ones(2)", group = { mesh = "m", dim = "dp" }, out = "z" }
[[step]]
barrier = "WORLD"
[[step]]
count_collectives = "stop"
[[step]]
all_reduce = { tensor = "ones(2)", group = { mesh = "m", dim = "tp" }, out = "after" }
[[expect]]
collectives = "counts"
equals = { all_gather_into_tensor = 1, all_reduce = 1 }
[[expect]]
collectives = { mesh = "m", dim = "dp" }
equals = { all_reduce = 1 }
[[expect]]
dtensor = { name = "y", field = "placements" }
equals = ["R", "Replicate()"]
)toml");
  CHECK(r.passed());
  CHECK(r.listed_checks() == 12);
}

TEST_CASE("hang expectations: several desyncs, wait-for edges, no hang", "[sim][outcome]") {
  // Two desyncs: group m.x#0 (rank 1 differs) and m.x#1 (rank 3 calls a barrier).
  const std::string two_desyncs =
      "[[mesh]]\nname = \"m\"\nshape = [2, 2]\ndims = [\"d\", \"x\"]\n"
      "[[step]]\nall_reduce = { tensor = \"ones(4)\", group = { mesh = \"m\", dim = \"x\" }, out "
      "= \"y\" }\nwhen = \"rank % 2 == 0\"\n"
      "[[step]]\nall_reduce = { tensor = \"ones(2)\", group = { mesh = \"m\", dim = \"x\" }, out "
      "= \"y\" }\nwhen = \"rank == 1\"\n"
      "[[step]]\nbarrier = { group = { mesh = \"m\", dim = \"x\" } }\nwhen = \"rank == 3\"\n";
  auto passes = [&](const std::string& body, const std::string& expect) {
    const ScenarioResult r = run_text(kWorld4 + body + "[[expect]]\n" + expect + "\n");
    REQUIRE(r.listed_checks() == 1);
    INFO(expect << " observed " << r.expectations[0].observed.dump());
    return r.expectations[0].passed;
  };
  CHECK(passes(two_desyncs,
               "desync = { group = \"m.x#0\", signatures = { 1 = \"all_reduce(float32[2]\" } }"));
  CHECK(passes(two_desyncs, "desync = { group = \"m.x#1\", signatures = { 3 = \"barrier()\" } }"));
  CHECK(passes(two_desyncs, "desync = { count = 2 }"));
  CHECK_FALSE(passes(two_desyncs, "desync = { count = 1 }"));
  // One table describes one desync: m.x#1's group with m.x#0's odd signature matches neither.
  CHECK_FALSE(
      passes(two_desyncs, "desync = { group = \"m.x#1\", signatures = { 1 = \"all_reduce\" } }"));
  CHECK_FALSE(passes(two_desyncs, "desync = { group = \"m.x#2\" }"));

  // Ranks 0 and 1 wait in WORLD's all_reduce for ranks 2 and 3, which finished.
  const std::string skipped =
      "[[step]]\nall_reduce = { tensor = \"ones(4)\", out = \"y\" }\nwhen = \"rank < 2\"\n";
  CHECK(passes(skipped, "deadlock = { waits_for = { 0 = [2, 3], 1 = [2, 3] } }"));
  CHECK(
      passes(skipped, "deadlock = { waits_for = { 1 = [2, 3] }, waiting_in = { 0 = \"WORLD\" } }"));
  CHECK(passes(skipped, "deadlock = { waiting_in = { 0 = \"0\" } }"));  // c10d's id still names it
  CHECK_FALSE(passes(skipped, "deadlock = { waits_for = { 0 = [2] } }"));
  CHECK_FALSE(passes(skipped, "deadlock = { waiting_in = { 2 = \"WORLD\" } }"));  // rank 2 finished
  CHECK_FALSE(passes(skipped, "no_hang = true"));

  // A rank that fails alone: the others finish, and the run has no hang.
  const ScenarioResult r = run_text(
      kWorld4 +
      "[[step]]\ntensor = { name = \"t\", value = \"ones(2)\" }\n[[step]]\nrecv = { like = \"t\", "
      "src = \"rank\", out = \"u\" }\nwhen = \"rank == 2\"\n"
      "[[expect]]\nrank_failed = { rank = 2, type = \"ValueError\" }\n[[expect]]\nno_hang = "
      "true\n");
  REQUIRE(r.listed_checks() == 2);
  CHECK(r.expectations[0].passed);
  CHECK(r.expectations[1].passed);
  // A send/recv abort names its peer relative to the rank; meshsim 1's wording (the peer by
  // number, "waiting for rank(s) N") still matches, as an alias.
  const ScenarioResult p2p =
      run_text(kWorld4 +
               "[[step]]\nsend = { tensor = \"ones(2)\", dst = 3 }\nwhen = \"rank == 1\"\n"
               "[[expect]]\nrank_failed = { rank = 1, contains = \"send (dst=rank+2)\" }\n"
               "[[expect]]\nrank_failed = { rank = 1, contains = \"waiting for rank(s) 3\" }\n"
               "[[expect]]\nrank_failed = { rank = 1, contains = \"(dst=3)\" }\n"
               "[[expect]]\nrank_failed = { rank = 1, contains = \"waiting for rank(s) 2\" }\n");
  REQUIRE(p2p.expectations.size() == 4);
  CHECK(p2p.expectations[0].passed);
  CHECK(p2p.expectations[1].passed);
  CHECK(p2p.expectations[2].passed);
  CHECK_FALSE(p2p.expectations[3].passed);
  // A rank that finished is where its last step ran, not at a step its `when` skipped.
  const ScenarioResult short_send = run_text(
      kWorld4 +
      "[[step]]\nrepeat = { var = \"i\", count = 2 }\n"
      "[[step]]\nsend = { tensor = \"ones(2)\", dst = 0 }\nwhen = \"rank == 1 and i == 0\"\n"
      "[[step]]\nrecv = { like = \"zeros(2)\", src = 1, out = \"x\" }\nwhen = \"rank == 0\"\n"
      "[[step]]\nend_repeat = \"i\"\n");
  REQUIRE(short_send.hang_text);
  CHECK(short_send.hang_text->find(
            "rank 1 did not post the send at line 6 (i=1) (`when` false); rank 0 waits for it in "
            "its 2nd recv from it (WORLD p2p 1→0 seq 2): 1 send posted, the last pair met at line "
            "6 (i=0) (send) and line 9 (i=0) (recv); rank 1 then finished after t.toml:6:1 "
            "(send, i=0)") != std::string::npos);
  CHECK(short_send.hang_text->find("ranks 2-3: finished\n") != std::string::npos);
  // Rank tables are checked when the file loads, never silently empty or mistyped.
  CHECK(load_error(kWorld4 + "[[expect]]\ndeadlock = { waits_for = {} }\n") ==
        "t.toml:5:26: waits_for is a table keyed by rank: { 0 = [1, 2] }");
  CHECK(load_error(kWorld4 + "[[expect]]\ndeadlock = { waiting_in = \"WORLD\" }\n") ==
        "t.toml:5:27: waiting_in is a table keyed by rank: { 0 = \"world.tp#0\" }");
  CHECK(load_error(kWorld4 + "[[expect]]\ndeadlock = { waiting_in = { 00 = \"WORLD\" } }\n") ==
        "t.toml:5:29: waiting_in keys are ranks from 0 to 3, not \"00\"");
  CHECK(load_error(kWorld4 + "[[expect]]\ndeadlock = { waits_for = { 0 = \"1\" } }\n") ==
        "t.toml:5:32: the ranks it waits for must be an array of integers, not a string");
  // Rank lists name ranks of the world; a desync expectation expects at least one.
  CHECK(load_error(kWorld4 + "[[expect]]\ndeadlock = { waits_for = { 0 = [1, 30] } }\n") ==
        "t.toml:5:36: 30 is not a rank of this world (0 to 3)");
  CHECK(load_error(kWorld4 + "[[expect]]\ndeadlock = { culprits = [99] }\n") ==
        "t.toml:5:26: 99 is not a rank of this world (0 to 3)");
  CHECK(load_error(kWorld4 + "[[expect]]\ntimeout = { late = [-1] }\n") ==
        "t.toml:5:21: -1 is not a rank of this world (0 to 3)");
  CHECK(load_error(kWorld4 + "[[expect]]\ndesync = { count = 0 }\n") ==
        "t.toml:5:20: a desync expectation's count is at least 1 (no desync: write no_hang = "
        "true)");
  CHECK(load_error(kWorld4 + "[[expect]]\nvalue = 1\nby_rank = {}\n") ==
        "t.toml:6:11: by_rank names no rank");
  CHECK(load_error(kWorld4 + "[[expect]]\nno_hang = false\n") ==
        "t.toml:5:11: no_hang = true says the run ends without a hang; to expect one, write "
        "deadlock, desync or timeout");
}

TEST_CASE("hang reports: a hung new_group names the PyTorch call creating the groups",
          "[sim][runner][hang]") {
  const std::string world =
      "[[mesh]]\nname = \"w\"\nshape = [2, 2, 1]\ndims = [\"pp\", \"dp\", \"tp\"]\n";
  // Rank 3 skips the mesh step; the others wait in its new_group.
  const std::vector<std::pair<std::string, std::string>> cases{
      {"mesh = { name = \"f\", from = \"w\", slice = [\"dp\", \"tp\"], flatten = \"dptp\" }",
       "new_group creating f.dptp's 2 groups of 2 ([0, 1], ...) for w[\"dp\", "
       "\"tp\"]._flatten(\"dptp\")"},
      {"mesh = { name = \"f\", from = \"w\", slice = [\"dp\", \"tp\"], flatten = true }",
       "new_group creating f.dp_tp's 2 groups of 2 ([0, 1], ...) for w[\"dp\", "
       "\"tp\"]._flatten()"},
      {"mesh = { name = \"u\", from = \"w\", unflatten = { dim = \"dp\", sizes = [2, 1], names = "
       "[\"a\", \"b\"] } }",
       "for w._unflatten(\"dp\", (2, 1), (\"a\", \"b\"))"},
      {"mesh = { name = \"t\", ranks = [[0, 1], [2, 3]], dims = [\"x\", \"y\"], device = \"cpu\" "
       "}",
       "new_group creating t.x's 2 groups of 2 ([0, 2], ...) for DeviceMesh(\"cpu\", <2x2 rank "
       "table>, mesh_dim_names=(\"x\", \"y\"))"},
      {"mesh = { name = \"m\", shape = [2, 2] }",
       "new_group creating m.dim0's 2 groups of 2 ([0, 2], ...) for init_device_mesh(\"cuda\", "
       "(2, 2))"},
  };
  for (const auto& [step, expected] : cases) {
    const ScenarioResult r =
        run_text(kWorld4 + world + "[[step]]\n" + step + "\nwhen = \"rank != 3\"\n");
    REQUIRE(r.hang_text);
    INFO(*r.hang_text);
    CHECK(r.hang_text->find(expected) != std::string::npos);
  }
}
