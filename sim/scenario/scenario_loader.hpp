// Reads a scenario file into a Scenario, refusing anything it cannot run before anything runs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sim/scenario/scenario.hpp"
#include "sim/scenario/step_registry.hpp"

namespace meshsim::sim {

// The most ranks a scenario may have.
inline constexpr int64_t kMaxWorldSize = int64_t{1} << 20;

// Throws InputError naming file:line:col for unreadable files, TOML syntax errors, unknown keys or
// steps, wrong types, unknown meshes or dims, meshes larger than the world and bad expressions.
// `steps`: the step kinds the file may use (builtin_steps() for meshsim's own).
Scenario load_scenario_file(const std::string& path, const StepRegistry& steps);
// The same from text; `file` is the name used in locations.
Scenario load_scenario_text(std::string_view text, const std::string& file,
                            const StepRegistry& steps);

}  // namespace meshsim::sim
