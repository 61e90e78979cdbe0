// `meshsim fr analyze`: why a real job hung, from its ranks' Flight Recorder dumps (one file per
// rank, pickle or JSON, named with the rank at the end: rank3.pkl, nccl_trace_rank_3): the
// cause, the culprits and one line per story of ranks, as meshsim's own hang reports say it; text,
// JSON or a Graphviz wait-for graph. `meshsim fr to-scenario`: the same dumps as a scenario that
// replays the job's calls. See docs/flight-recorder.md.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meshsim::sim {

struct FrFlags {
  std::vector<std::string> paths;  // dump files, or directories of them
  std::string world_size;          // ranks of the job, when the last ranks left no dump
  // fr analyze
  bool json = false;
  std::string graph;         // write the wait-for graph (DOT) here
  std::string gpu = "H200";  // whose kernel grid places a recorded program's random draws
  // fr to-scenario
  std::string output;  // the scenario file ("" or "-": standard output)
  std::string name;    // the scenario's name
};

// Adds `fr analyze` and `fr to-scenario` to `app`; test the returned `fr` command for parsed().
CLI::App* add_fr_command(CLI::App& app, FrFlags& flags);

// Runs the `fr` subcommand that was parsed.
// analyze: 0 when the dumps show no hang, 1 when they show one (or a mismatch; for a recorder's
// dumps also ranks whose program failed, and draws that overlap or replicas that differ), 2 after
// a clear message for bad flags, no dumps, or a dump that cannot be read (the others are still
// analysed).
// to-scenario: 0 when the scenario is written, 2 as for analyze (a scenario is still written
// when some dumps cannot be read).
int run_fr_command(const CLI::App& fr, const FrFlags& flags);

// The rank a dump's file name ends with, before an extension .pkl, .pickle or .json:
// "rank3.pkl" -> 3, "nccl_trace_rank_12" -> 12; none for a name without one.
std::optional<int64_t> rank_in_dump_name(std::string_view name);

}  // namespace meshsim::sim
