// `meshsim swarm`: every combination of scenario file x fault seed x schedule seed, run in
// worker processes, with each distinct failure reported once (the first combination that shows
// it, and its replay command). `--shard I/N` runs one deterministic share, so that a cluster's
// scheduler (a Slurm job array, a Kubernetes Indexed Job) spreads a swarm over machines;
// `meshsim swarm merge` joins the shards' JSON files into the report the unsharded run writes.
// See docs/swarm.md.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace meshsim::sim {

struct SwarmFlags {
  std::vector<std::string> paths;  // scenario files or directories; for merge, shard files
  std::string seeds = "0-99";
  std::string faults_seeds = "none";
  std::string shard;  // I/N, slurm, k8s/N; "" for the whole swarm
  std::string jobs;   // worker processes; "" for one per core
  std::string json_path;
  std::string timeout;
  std::string stack_kib;
  bool verbose = false;
  bool quiet = false;
};

struct SwarmCommands {
  CLI::App* swarm;
  CLI::App* merge;
};

// Adds `swarm` and `swarm merge` to `app`. `max_memory` is the --max-memory text the command
// line's other runs share (main sets the budget from it).
SwarmCommands add_swarm_command(CLI::App& app, SwarmFlags& flags, std::string& max_memory);

// `meshsim swarm`: 0 when every run passed, 1 when some failed, 2 after a message for bad flags,
// an unusable scenario or a worker that failed.
int run_swarm_command(const SwarmFlags& flags, const std::string& max_memory);
// `meshsim swarm merge`: as for swarm, 2 also for shard files that are not every shard of one
// swarm exactly once.
int run_swarm_merge(const SwarmFlags& flags);

}  // namespace meshsim::sim
