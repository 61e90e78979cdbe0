// Expectation records at scale: checks that pass the same way (same step, query and values)
// share one record whatever the number of ranks, while failures and differing values stay one
// per rank; the shared record carries its ranks and checks through the child-process codec and
// into the JSON report.
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "sim/report/rank_ranges.hpp"
#include "sim/report/report.hpp"
#include "sim/report/result_codec.hpp"
#include "sim/run/runner.hpp"
#include "sim/steps/builtin_steps.hpp"

using namespace meshsim::sim;

TEST_CASE("rank ranges hold a set of ranks as disjoint ranges", "[report][ranks]") {
  std::mt19937_64 random(11);
  for (int round = 0; round < 200; ++round) {
    RankRanges ranges;
    std::set<int64_t> reference;
    const int64_t span = 1 + static_cast<int64_t>(random() % 64);
    for (int i = 0; i < 80; ++i) {
      const int64_t rank = static_cast<int64_t>(random() % static_cast<uint64_t>(span));
      ranges.add(rank);
      reference.insert(rank);
    }
    CHECK(ranges.count() == reference.size());
    // Ascending, disjoint and never touching: the one form for a set.
    std::set<int64_t> held;
    for (size_t i = 0; i < ranges.ranges().size(); ++i) {
      const auto [first, last] = ranges.ranges()[i];
      REQUIRE(first <= last);
      if (i > 0) REQUIRE(first > ranges.ranges()[i - 1].second + 1);
      for (int64_t r = first; r <= last; ++r) held.insert(r);
    }
    CHECK(held == reference);
    RankRanges again;
    for (const auto& [first, last] : ranges.ranges()) again.add(first, last);
    CHECK(again == ranges);
  }
}

namespace {

ScenarioResult run_world(int64_t world, const std::string& steps) {
  return run_scenario(load_scenario_text(
      fmt::format("[scenario]\nname = \"e\"\nworld_size = {}\n{}", world, steps), "e.toml"));
}

}  // namespace

TEST_CASE("checks that pass alike share one record; others keep one per rank", "[report][ranks]") {
  const ScenarioResult r = run_world(1024, R"toml(
[[mesh]]
name = "m"
shape = [1024]
dims = ["d"]
[[step]]
all_reduce = { tensor = "ones(2)", out = "x" }
[[expect]]
tensor = "x"
equals = [1024, 1024]
[[step]]
repeat = { var = "i", count = 3 }
  [[expect]]
  tensor = "x"
  equals = [1024, 1024]
  when = "rank % 2 == 0"
[[step]]
end_repeat = "i"
[[expect]]
local_rank = "m"
equals = "rank"
[[expect]]
tensor = "x"
equals = [1024, 1024]
when = "rank != 5"
[[expect]]
tensor = "x"
equals = [1, 1]
when = "rank >= 1020"
)toml");
  // Every rank alike; the loop: the even ranks, three times each; local_rank: a value per
  // rank; then all but rank 5; and four failures.
  REQUIRE(r.listed_checks() == 1024 + 3 * 512 + 1024 + 1023 + 4);
  CHECK(r.failed_expectations() == 4);
  CHECK(r.expectations.size() == 1 + 1 + 1024 + 1 + 4);
  // The records of each [[expect]], in the file's order.
  std::map<int64_t, std::vector<const ExpectationRecord*>> by_line;
  for (const ExpectationRecord& e : r.expectations) by_line[e.where.line].push_back(&e);
  REQUIRE(by_line.size() == 5);
  std::vector<std::vector<const ExpectationRecord*>> in_order;
  for (const auto& [line, records] : by_line) in_order.push_back(records);
  REQUIRE(in_order[0].size() == 1);
  const ExpectationRecord& all = *in_order[0][0];
  CHECK(all.passed);
  CHECK(all.rank == 0);
  CHECK(all.ranks.ranges() == std::vector<std::pair<int64_t, int64_t>>{{0, 1023}});
  CHECK(all.checks == 1024);
  REQUIRE(in_order[1].size() == 1);
  const ExpectationRecord& even = *in_order[1][0];
  CHECK(even.ranks.count() == 512);
  CHECK(even.ranks.ranges().size() == 512);  // every other rank: no range to join
  CHECK(even.checks == 3 * 512);
  CHECK(in_order[2].size() == 1024);  // a value of its own on every rank
  for (const ExpectationRecord* e : in_order[2]) CHECK(e->ranks.empty());
  REQUIRE(in_order[3].size() == 1);
  CHECK(in_order[3][0]->ranks.ranges() ==
        std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {6, 1023}});
  REQUIRE(in_order[4].size() == 4);
  for (const ExpectationRecord* e : in_order[4]) {
    CHECK_FALSE(e->passed);
    CHECK(e->ranks.empty());  // a failure is its rank's alone
  }
  // Through the child process's codec, field for field, and into the report.
  const std::optional<ScenarioResult> back = decode_result(encode_result(r));
  REQUIRE(back.has_value());
  CHECK(encode_result(*back) == encode_result(r));
  for (size_t i = 0; i < r.expectations.size(); ++i) {
    CHECK(back->expectations[i].ranks == r.expectations[i].ranks);
    CHECK(back->expectations[i].checks == r.expectations[i].checks);
  }
  RunReport report;
  report.results.push_back(*back);
  const Json j = report_json(report, "test");
  size_t with_ranks = 0;
  for (const Json& e : j["scenarios"][0]["expectations"]) {
    if (e["location"]["line"] != all.where.line) {
      with_ranks += e.contains("ranks") ? 1 : 0;
      continue;
    }
    CHECK(e["rank"] == 0);
    CHECK(e["ranks"] == Json::parse("[[0, 1023]]"));
    CHECK(e["checks"] == 1024);
  }
  CHECK(with_ranks == 2);  // the loop's and all but rank 5's; rank-own values have none
  CHECK(format_table(report, false).find("4607/4611") != std::string::npos);
}
