// `run --fr-dump DIR`: every rank's flight recorder written where PyTorch's tools look for a
// job's dumps, DIR/<scenario>/pickle/nccl_trace_rank_<r> (the pickle a timed-out job writes,
// which torchfrtrace and `meshsim fr analyze` read) and DIR/<scenario>/json/
// nccl_trace_rank_<r>.json (_dump_fr_trace_json's). The two folders are emptied first, so no dump
// of an earlier run is left beside these. See docs/flight-recorder.md.
#pragma once

#include <string>
#include <vector>

#include "sim/runtime/rank_activity.hpp"
#include "src/comm/group_table.hpp"

namespace meshsim::sim {

struct FrDumpTarget {
  std::string dir;            // DIR
  std::string scenario_name;  // <scenario>, made a path component
  std::string scenario_file;  // the frames' file
};

// Writes the dumps; returns DIR/<scenario>, or throws meshsim::Error (RuntimeError naming the
// path) when a folder or file cannot be written.
std::string write_fr_dumps(const FrDumpTarget& target, const std::vector<RankActivity>& activity,
                           const GroupTable& groups);

}  // namespace meshsim::sim
