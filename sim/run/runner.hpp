// Runs a scenario's program on every rank (one fiber per rank) and collects what happened.
#pragma once

#include <optional>

#include "sim/report/results.hpp"
#include "sim/run/backend_factory.hpp"
#include "sim/run/run_watch.hpp"
#include "sim/runtime/hang_report.hpp"
#include "sim/runtime/world.hpp"
#include "sim/scenario/scenario.hpp"

namespace meshsim::sim {

struct RunOptions {
  WorldOptions world;  // schedule, seed, stack size
  // When set, one fault drawn from this seed is added to the scenario's own.
  std::optional<uint64_t> faults_seed;
  // Record a Chrome trace into ScenarioResult::trace; with trace_setup, new_group's store
  // barriers too (a big world creates many groups: they would crowd the trace).
  bool trace = false;
  bool trace_setup = false;
  // The collective backend the ranks talk through.
  BackendChoice backend;
  // --keep-checkpoints DIR: save steps write under DIR/<scenario name>, kept after the run;
  // otherwise under a temporary directory removed when the run ends.
  std::optional<std::string> keep_checkpoints;
  // --fr-dump DIR: every rank's flight recorder, holding its newest fr_buffer_size calls
  // (TORCH_FR_BUFFER_SIZE), is written under DIR/<scenario name> as PyTorch writes dumps.
  std::optional<std::string> fr_dump_dir;
  size_t fr_buffer_size = 2000;
  // Set on the second run of a hang whose report asked for it: these ranks record their skips in
  // a window of calls (HangReport::probe). A run with a probe is not run again.
  std::optional<ProbeRequest> probe;
  // --timeout: stop the run after this many wall-clock seconds, reporting where every rank was;
  // and where the progress line of a long run goes (-1: nowhere).
  RunWatchOptions watch;
  // Whether what a scenario's child process writes to stderr is also written to this process's
  // (it is kept in the result of a child that crashed either way); a swarm of thousands of runs
  // keeps it to the results.
  bool echo_child_stderr = true;
};

// Every rank runs the steps in order as a fiber. A step whose `when` is false is skipped; a model
// error is checked against the step's `raises`; an unexpected error (or an expected one that did
// not happen) stops that rank. When no rank can run, the hang is analysed (deadlock or desync),
// the blocked ranks are aborted, and the report is kept in the result.
ScenarioResult run_scenario(const Scenario& scenario, const RunOptions& options = {});

}  // namespace meshsim::sim
