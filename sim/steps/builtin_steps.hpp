// Every step kind meshsim ships, and the scenario loader with them.
#pragma once

#include <string>
#include <string_view>

#include "sim/scenario/scenario_loader.hpp"
#include "sim/scenario/step_registry.hpp"

namespace meshsim::sim {

const StepRegistry& builtin_steps();

// load_scenario_file and load_scenario_text with builtin_steps().
Scenario load_scenario_file(const std::string& path);
Scenario load_scenario_text(std::string_view text, const std::string& file);

}  // namespace meshsim::sim
