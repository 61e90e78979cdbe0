// A scenario's name as one path component, for the directories a run keeps per scenario
// (--keep-checkpoints, --fr-dump): letters, digits, '-', '_' and '.' kept, anything else '_'.
#pragma once

#include <string>

namespace meshsim::sim {

std::string scenario_dir_name(const std::string& name);

}  // namespace meshsim::sim
