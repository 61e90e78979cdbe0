// A ScenarioResult as JSON and back, whole (unlike the report, which shows what a person reads):
// how a scenario run in a child process hands its result to the parent.
#pragma once

#include <optional>

#include "sim/report/results.hpp"

namespace meshsim::sim {

Json encode_result(const ScenarioResult& result);
// nullopt when `j` is not what encode_result wrote (a child that died half-way).
std::optional<ScenarioResult> decode_result(const Json& j);

// One draw as the JSON report and the codec write it, and back.
Json draw_json(const DrawRecord& d);

}  // namespace meshsim::sim
