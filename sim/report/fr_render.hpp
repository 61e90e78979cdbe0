// An analysis of Flight Recorder dumps (fr_analysis.hpp) as people and tools read it, laid out as
// meshsim's hang reports are: text (the verdict and cause, the summary, one line per story of
// ranks, the last calls of one rank per story, what the evidence lacks), JSON (everything, by
// rank) and Graphviz DOT (who waits for whom, one box per story).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sim/report/fr_analysis.hpp"

namespace meshsim::sim {

std::string fr_analysis_text(const FrAnalysis& analysis);
nlohmann::json fr_analysis_json(const FrAnalysis& analysis);
std::string fr_analysis_dot(const FrAnalysis& analysis);

}  // namespace meshsim::sim
