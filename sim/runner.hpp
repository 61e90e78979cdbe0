// Runs a scenario's program on every rank and collects what happened.
#pragma once

#include "sim/results.hpp"
#include "sim/scenario.hpp"

namespace meshsim::sim {

// Every rank runs the steps in order. A step whose `when` is false is skipped; a model error is
// checked against the step's `raises`; an unexpected error (or an expected one that did not
// happen) stops that rank and is recorded with the step's location.
// Ranks run one after another: this foundation has no collectives, so no rank waits for another.
ScenarioResult run_scenario(const Scenario& scenario);

}  // namespace meshsim::sim
