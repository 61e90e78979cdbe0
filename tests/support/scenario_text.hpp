// Scenarios written inline in tests: the loader's error for a text, or the run of one.
#pragma once

#include <string>

#include "sim/run/runner.hpp"
#include "sim/steps/builtin_steps.hpp"

namespace meshsim::testing {

// The header of a 4-rank scenario named "t"; its steps start on line 4 of "t.toml".
inline const std::string kWorld4 = "[scenario]\nname = \"t\"\nworld_size = 4\n";

// What the loader says of `text` (read as "t.toml"), or "(loaded)" when it takes it.
inline std::string load_error(const std::string& text) {
  try {
    sim::load_scenario_text(text, "t.toml");
  } catch (const sim::InputError& e) {
    return e.what();
  }
  return "(loaded)";
}

inline sim::ScenarioResult run_text(const std::string& text, const sim::RunOptions& options = {}) {
  return sim::run_scenario(sim::load_scenario_text(text, "t.toml"), options);
}

}  // namespace meshsim::testing
