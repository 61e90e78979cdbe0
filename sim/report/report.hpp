// Turning results into the text table and the JSON report (schema in README.md). Neither contains
// timings unless asked, so the same scenario gives byte-identical output.
#pragma once

#include <string>
#include <vector>

#include "sim/report/results.hpp"

namespace meshsim::sim {

// A file that could not be used, with where and why.
struct UnusableInput {
  SourceLocation where;
  std::string message;
};

struct RunReport {
  std::vector<ScenarioResult> results;
  std::vector<UnusableInput> unusable;
};

// One line per failed expectation or failed rank ("file:line:col: rank R: ..."), at most `limit`,
// then a count of the rest.
std::string format_failures(const ScenarioResult& result, size_t limit);
// The summary table: scenario, result, ranks, expectations, time (when `with_time`).
std::string format_table(const RunReport& report, bool with_time);
// Every run's warnings in a few lines, passing scenarios included: "warnings: 3 (redistribute 2,
// rng overlap 1)", then the first `listed` with their scenario and location. Empty without any.
std::string format_warnings(const RunReport& report, size_t listed);
size_t warning_count(const RunReport& report);
// "N passed, N failed" plus unusable inputs.
std::string format_totals(const RunReport& report);
// The machine-readable report; schema version 1.
Json report_json(const RunReport& report, const std::string& version);

}  // namespace meshsim::sim
