#include "sim/cli/swarm_command.hpp"

#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "sim/cli/cli_numbers.hpp"
#include "sim/run/rank_error.hpp"
#include "sim/scenario/input_files.hpp"
#include "sim/scenario/scenario_loader.hpp"
#include "sim/steps/builtin_steps.hpp"
#include "sim/swarm/swarm_json.hpp"
#include "sim/swarm/swarm_render.hpp"
#include "sim/swarm/swarm_workers.hpp"
#include "src/error.hpp"
#include "src/io/atomic_file.hpp"

namespace meshsim::sim {

namespace {

constexpr int kExitPass = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUnusable = 2;
constexpr uint64_t kMaxShards = 1'000'000;
constexpr unsigned kMaxJobs = 1024;
constexpr uint64_t kMaxShardFileBytes = uint64_t{256} << 20;
constexpr size_t kListed = 20;  // distinct failures the text lists without -v

int bad_flag(std::string_view flag, const std::string& error) {
  std::cerr << "meshsim swarm: " << flag << ": " << error << "\n";
  return kExitUnusable;
}

// An environment variable as a whole number, or the error naming it.
std::string env_number(const char* name, bool required, uint64_t& out) {
  const char* value = std::getenv(name);
  if (value == nullptr) return required ? fmt::format("${} is not set", name) : "";
  const std::string error = parse_unsigned(value, 0, UINT64_MAX, out);
  return error.empty() ? "" : fmt::format("${}: {}", name, error);
}

// --shard: "I/N"; "slurm", from a job array's task id and count; "k8s/N", from an Indexed Job's
// completion index (Kubernetes gives the pod its index, not the completions).
std::string parse_shard(const std::string& text, Shard& out) {
  const std::string expected =
      "expected I/N (0 <= I < N), slurm (in a Slurm job array) or k8s/N (in a Kubernetes "
      "Indexed Job of N completions)";
  std::string error;
  uint64_t index = 0, count = 0;
  if (text == "slurm") {
    uint64_t first = 0, last = 0, step = 1;
    if (!(error = env_number("SLURM_ARRAY_TASK_ID", true, index)).empty() ||
        !(error = env_number("SLURM_ARRAY_TASK_COUNT", true, count)).empty() ||
        !(error = env_number("SLURM_ARRAY_TASK_MIN", false, first)).empty() ||
        !(error = env_number("SLURM_ARRAY_TASK_MAX", false, last)).empty() ||
        !(error = env_number("SLURM_ARRAY_TASK_STEP", false, step)).empty())
      return error + " (--shard slurm runs in a Slurm job array: sbatch --array=0-N)";
    if (step != 1 || (std::getenv("SLURM_ARRAY_TASK_MAX") != nullptr &&
                      (last < first || last - first + 1 != count))) {
      return fmt::format(
          "the job array is not one contiguous range (min {}, max {}, count {}, step {}): every "
          "shard must run; use --array=0-{}",
          first, last, count, step, count == 0 ? 0 : count - 1);
    }
    if (index < first)
      return fmt::format("$SLURM_ARRAY_TASK_ID {} is below its minimum {}", index, first);
    index -= first;
  } else if (text.starts_with("k8s/")) {
    if (!(error = parse_unsigned(text.substr(4), 1, kMaxShards, count)).empty())
      return fmt::format("k8s/N: N: {}", error);
    if (!(error = env_number("JOB_COMPLETION_INDEX", true, index)).empty())
      return error + " (--shard k8s/N runs in a Kubernetes Job with completionMode: Indexed)";
  } else {
    const size_t slash = text.find('/');
    if (slash == std::string::npos)
      return expected + fmt::format(", got \"{}\"", text.substr(0, 40));
    if (!(error = parse_unsigned(text.substr(slash + 1), 1, kMaxShards, count)).empty())
      return "N: " + error;
    if (!(error = parse_unsigned(text.substr(0, slash), 0, UINT64_MAX, index)).empty())
      return "I: " + error;
  }
  if (count == 0 || count > kMaxShards)
    return fmt::format("{} shards: expected 1 to {}", count, kMaxShards);
  if (index >= count)
    return fmt::format("shard {} of {}: the index must be below the count", index, count);
  out = Shard{index, count};
  return "";
}

bool write_json(const std::string& path, const nlohmann::ordered_json& j) {
  if (path.empty()) return true;
  const std::string error = write_output_file(path, swarm_json_text(j));
  if (error.empty()) return true;
  std::cerr << "meshsim swarm: cannot write " << path << ": " << error << "\n";
  return false;
}

// The progress of a long swarm on a terminal, rewritten at most twice a second.
class ProgressLine {
 public:
  explicit ProgressLine(bool shown) : shown_(shown) {}
  ~ProgressLine() {
    if (written_) std::cerr << "\r\033[K" << std::flush;
  }
  void update(const SwarmProgress& p) {
    if (!shown_) return;
    const auto now = std::chrono::steady_clock::now();
    if (written_ && now - last_ < std::chrono::milliseconds(500) && p.done != p.total) return;
    last_ = now;
    written_ = true;
    std::cerr << fmt::format("\r\033[Kswarm: {}/{} runs, {} failed ({} distinct)", p.done, p.total,
                             p.failed, p.distinct)
              << std::flush;
  }

 private:
  bool shown_;
  bool written_ = false;
  std::chrono::steady_clock::time_point last_;
};

// The cores this process may run on (a Slurm task's or a container's cpuset, not the node's).
uint64_t usable_cores() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return static_cast<uint64_t>(CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// "" when `path` can be written (its folder exists and is writable), else why not: checked
// before a swarm of hours starts.
std::string unwritable(const std::string& path) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  const std::string dir = folder.empty() ? "." : folder.string();
  if (::access(dir.c_str(), W_OK) != 0) return fmt::format("{}: {}", dir, std::strerror(errno));
  return "";
}

int exit_for(const SwarmTally& tally) {
  return tally.failed() == 0 ? kExitPass : kExitFailed;
}

}  // namespace

SwarmCommands add_swarm_command(CLI::App& app, SwarmFlags& flags, std::string& max_memory) {
  CLI::App* swarm = app.add_subcommand(
      "swarm",
      "run every combination of scenario file x fault seed x schedule seed in worker "
      "processes and report each distinct failure once, with the first combination that shows "
      "it and its replay command (docs/swarm.md)");
  swarm->add_option("paths", flags.paths, "scenario files (.toml) or directories");
  swarm->add_option("--seeds", flags.seeds,
                    "schedule seeds of the random schedule: 0-99 (the default), 1,5,9-12");
  swarm->add_option("--faults-seeds", flags.faults_seeds,
                    "fault seeds, each injecting one fault as run's --faults-seed; none (the "
                    "default) is a run without: none,1-50");
  swarm->add_option("--shard", flags.shard,
                    "run one share of the combinations: I/N, slurm (a Slurm job array's task), "
                    "k8s/N (a Kubernetes Indexed Job's completion index)");
  swarm->add_option("-j,--jobs", flags.jobs,
                    "worker processes (default: one per core this process may use)");
  swarm->add_option("--json", flags.json_path,
                    "write the results: a shard's with --shard (for swarm merge), else the report");
  swarm->add_option("--timeout", flags.timeout,
                    "stop each run after this much wall-clock time (as for run), a failure");
  swarm->add_option("--stack-kib", flags.stack_kib, "fiber stack per rank in KiB (as for run)");
  swarm->add_option("--max-memory", max_memory,
                    "budget for tensor data of each run, as for run (default: half the RAM; up "
                    "to JOBS runs hold theirs at once)");
  swarm->add_flag("-v,--verbose", flags.verbose, "list every distinct failure");
  swarm->add_flag("-q,--quiet", flags.quiet, "no progress line on a terminal");
  CLI::App* merge = swarm->add_subcommand(
      "merge",
      "join the JSON files of every shard of a swarm into its report, the one the unsharded "
      "swarm writes");
  merge->add_option("shards", flags.paths, "the shard files (swarm --shard --json)")->required();
  merge->add_option("--json", flags.json_path, "write the report to this file");
  merge->add_flag("-v,--verbose", flags.verbose, "list every distinct failure");
  return {swarm, merge};
}

int run_swarm_command(const SwarmFlags& flags, const std::string& max_memory) {
  if (flags.paths.empty()) return bad_flag("paths", "give scenario files or directories");
  SwarmSpace space;
  std::string error;
  if (!(error = parse_seed_list(flags.seeds, false, space.schedule_seeds)).empty())
    return bad_flag("--seeds", error);
  if (!(error = parse_seed_list(flags.faults_seeds, true, space.fault_seeds)).empty())
    return bad_flag("--faults-seeds", error);
  Shard shard;
  if (!flags.shard.empty() && !(error = parse_shard(flags.shard, shard)).empty())
    return bad_flag("--shard", error);
  uint64_t jobs = usable_cores();
  if (!flags.jobs.empty() && !(error = parse_unsigned(flags.jobs, 1, kMaxJobs, jobs)).empty())
    return bad_flag("--jobs", error);
  RunOptions options;
  options.watch.progress_fd = -1;
  if (!flags.timeout.empty()) {
    double seconds = 0;
    if (!(error = parse_duration(flags.timeout, seconds)).empty())
      return bad_flag("--timeout", error);
    options.watch.limit_s = seconds;
    space.run_flags += " --timeout " + flags.timeout;
  }
  if (!flags.stack_kib.empty()) {
    uint64_t kib = 0;
    if (!(error = parse_unsigned(flags.stack_kib, 16, 65536, kib)).empty())
      return bad_flag("--stack-kib", error);
    options.world.stack_size = static_cast<size_t>(kib) * 1024;
    space.run_flags += " --stack-kib " + flags.stack_kib;
  }
  if (!max_memory.empty()) space.run_flags += " --max-memory " + max_memory;
  if (!flags.json_path.empty() && !(error = unwritable(flags.json_path)).empty())
    return bad_flag("--json", "cannot write there: " + error);
  if (!space.run_flags.empty()) space.run_flags.erase(0, 1);

  // Every file is checked before anything runs: a swarm over a file that cannot load would
  // report the same error thousands of times.
  const ExpandedPaths expanded = expand_scenario_paths(flags.paths);
  bool usable = expanded.problems.empty();
  for (const PathProblem& p : expanded.problems)
    std::cout << p.path << ": error: " << p.message << "\n";
  for (const std::string& file : expanded.files) {
    try {
      load_scenario_file(file, builtin_steps());
    } catch (const InputError& e) {
      std::cout << e.what() << "\n";
      usable = false;
      continue;
    } catch (...) {
      const RankError e = classify_current_exception();
      std::cout << fmt::format("{}: error: {}\n", file, e.message);
      usable = false;
      continue;
    }
    const std::optional<uint64_t> digest = file_digest(file);
    if (!digest) {
      std::cout << file << ": error: cannot be read again\n";
      usable = false;
      continue;
    }
    space.files.push_back({file, *digest});
  }
  if (!usable) {
    std::cout << "meshsim swarm: nothing ran: mend the files above first\n";
    return kExitUnusable;
  }
  if (!space.size()) return bad_flag("--seeds", "the swarm has more than 2^63 combinations");
  const unsigned workers = static_cast<unsigned>(
      std::min<uint64_t>(jobs, std::max<uint64_t>(1, shard.share_of(*space.size()))));
  std::cout << swarm_header(space, shard, workers) << std::flush;
  ShardResults results{MESHSIM_VERSION, space, shard, {}};
  try {
    ProgressLine line(!flags.quiet && ::isatty(STDERR_FILENO) == 1);
    results.tally = run_swarm(space, shard, workers, builtin_steps(), options,
                              [&](const SwarmProgress& p) { line.update(p); });
  } catch (const std::exception& e) {
    std::cerr << "meshsim swarm: " << e.what() << "\n";
    return kExitUnusable;
  }
  std::cout << swarm_report_text(space, results.tally, flags.verbose ? SIZE_MAX : kListed);
  const nlohmann::ordered_json j = flags.shard.empty()
                                       ? swarm_report_json(results.version, space, results.tally)
                                       : shard_json(results);
  if (!write_json(flags.json_path, j)) return kExitUnusable;
  return exit_for(results.tally);
}

int run_swarm_merge(const SwarmFlags& flags) {
  std::vector<NamedShard> shards;
  try {
    for (const std::string& path : flags.paths) {
      shards.push_back({path, read_shard_json(read_file_bounded(path, kMaxShardFileBytes), path)});
    }
    const ShardResults merged = merge_shards(shards);
    std::cout << swarm_report_text(merged.space, merged.tally, flags.verbose ? SIZE_MAX : kListed);
    if (!write_json(flags.json_path, swarm_report_json(merged.version, merged.space, merged.tally)))
      return kExitUnusable;
    return exit_for(merged.tally);
  } catch (const std::exception& e) {  // InputError, or meshsim::Error from the read
    std::cerr << "meshsim swarm merge: " << e.what() << "\n";
    return kExitUnusable;
  }
}

}  // namespace meshsim::sim
