// The result codec a child process hands its result back with, and the JSON report built from
// results: a damaged or truncated encoding is refused (never a partial result), and the report
// carries a hang's wait-for graph under "dot", kept apart in the result.
#include <catch2/catch.hpp>

#include "sim/report/report.hpp"
#include "sim/report/result_codec.hpp"
#include "sim/run/runner.hpp"
#include "sim/steps/builtin_steps.hpp"

using namespace meshsim::sim;

namespace {

ScenarioResult hung_run() {
  return run_scenario(
      load_scenario_text("[scenario]\nname = \"h\"\nworld_size = 2\n"
                         "[[step]]\nwhen = \"rank == 0\"\nbarrier = \"WORLD\"\n",
                         "h.toml"));
}

}  // namespace

TEST_CASE("result codec: what it encodes it decodes, field for field", "[sim][report]") {
  const ScenarioResult r = hung_run();
  REQUIRE(r.hang.has_value());
  const std::optional<ScenarioResult> back = decode_result(encode_result(r));
  REQUIRE(back.has_value());
  CHECK(encode_result(*back) == encode_result(r));
  CHECK(back->hang_dot == r.hang_dot);
  CHECK(back->hang_text == r.hang_text);
}

TEST_CASE("result codec: a damaged encoding is refused whole", "[sim][report]") {
  const Json good = encode_result(hung_run());
  size_t refused = 0;
  // Every field missing, then every field of the wrong type.
  for (const auto& [key, value] : good.items()) {
    INFO(key);
    Json without = good;
    without.erase(key);
    const bool without_refused = !decode_result(without).has_value();
    CHECK(without_refused);
    refused += without_refused ? 1 : 0;
    Json wrong = good;
    wrong[key] = value.is_string() ? Json(17) : Json("seventeen");
    // A field holding any JSON (a dump's value, the trace) takes a string too.
    if (key != "trace" && key != "hang") CHECK_FALSE(decode_result(wrong).has_value());
  }
  CHECK(refused >= 20);
  CHECK_FALSE(decode_result(Json(nullptr)).has_value());
  CHECK_FALSE(decode_result(Json::array()).has_value());
}

TEST_CASE("report: a hang's graph is in the JSON report, not in the result's hang",
          "[sim][report]") {
  const ScenarioResult r = hung_run();
  REQUIRE(r.hang.has_value());
  CHECK_FALSE(r.hang->contains("dot"));
  CHECK_THAT(r.hang_dot, Catch::StartsWith("digraph"));
  RunReport report;
  report.results.push_back(r);
  const Json j = report_json(report, "test");
  REQUIRE(j.at("scenarios").size() == 1);
  CHECK(j.at("scenarios")[0].at("hang").at("dot") == r.hang_dot);
  CHECK(format_totals(report) == "0 passed, 1 failed\n");
}

TEST_CASE("report: ranks that fail one expectation alike share a line, their list cut at scale",
          "[sim][report]") {
  // Two ranks in three fail, each third alike: a thousand ranks on a line, not ten thousand
  // characters.
  const ScenarioResult r = run_scenario(
      load_scenario_text("[scenario]\nname = \"e\"\nworld_size = 3000\n"
                         "[[step]]\ntensor = { name = \"x\", value = \"full(1, rank % 3)\" }\n"
                         "[[expect]]\ntensor = \"x\"\nequals = [1]\nwhen = \"rank % 3 != 1\"\n",
                         "e.toml"));
  const std::string text = format_failures(r, 10);
  CHECK_THAT(text, Catch::Contains("e.toml:6:1: ranks 0, 3, 6, 9, "));
  CHECK_THAT(text, Catch::Contains(
                       ", 117, ... (1000 ranks in all; --json lists each): expected tensor(x) == "
                       "[1], got [0.0]"));
  CHECK_THAT(text, Catch::Contains(", ... (1000 ranks in all; --json lists each): expected "
                                   "tensor(x) == [1], got [2.0]"));
  CHECK(text.size() < 1000);
}

TEST_CASE("result codec: a draw from a generator it does not know is refused", "[sim][report]") {
  const ScenarioResult r =
      run_scenario(load_scenario_text("[scenario]\nname = \"d\"\nworld_size = 2\n"
                                      "[[step]]\nrand = { name = \"w\", shape = [4] }\n",
                                      "d.toml"));
  Json j = encode_result(r);
  REQUIRE_FALSE(j.at("draws").empty());
  CHECK(decode_result(j).has_value());
  j["draws"][0]["generator"] = "mersenne twister";
  CHECK_FALSE(decode_result(j).has_value());
}
