// The `meshsim` command: run, check and list scenario steps.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "sim/cli/ckpt_command.hpp"
#include "sim/cli/cli_numbers.hpp"
#include "sim/cli/fr_command.hpp"
#include "sim/cli/rng_command.hpp"
#include "sim/cli/swarm_command.hpp"
#include "sim/report/report.hpp"
#include "sim/run/backend_factory.hpp"
#include "sim/run/isolated_run.hpp"
#include "sim/run/rank_error.hpp"
#include "sim/run/runner.hpp"
#include "sim/run/scenario_dir_name.hpp"
#include "sim/runtime/fiber_stack.hpp"
#include "sim/scenario/input_files.hpp"
#include "sim/steps/builtin_steps.hpp"
#include "src/enum_names.hpp"
#include "src/tensor/memory_budget.hpp"

namespace {

namespace fs = std::filesystem;
using namespace meshsim::sim;

constexpr int kExitPass = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUnusable = 2;
constexpr uint64_t kMinStackKib = 16;
constexpr uint64_t kMaxStackKib = 65536;
// A dump of this many entries stays within what `meshsim fr analyze` reads of one file.
constexpr uint64_t kMaxFrBufferSize = 100'000;

void print_unusable(const UnusableInput& u) {
  std::cout << u.where.to_string() << ": error: " << u.message << "\n";
}

int exit_code(const RunReport& report) {
  if (!report.unusable.empty()) return kExitUnusable;
  for (const ScenarioResult& r : report.results) {
    if (!r.passed()) return kExitFailed;
  }
  return kExitPass;
}

struct RunFlags {
  std::string json_path;
  std::string graph_path;
  std::string trace_path;
  bool trace_setup = false;
  bool verbose = false;
  bool warnings_as_errors = false;
  bool with_time = true;
  std::string schedule = "fifo";
  uint64_t seed = 0;
  size_t stack_kib = kDefaultStackBytes / 1024;
  std::string backend = BackendChoice{}.name;
  std::optional<uint64_t> faults_seed;
  uint64_t max_memory = 0;
  std::string max_memory_text;  // as given, for the rerun line
  std::string stack_guard = "auto";
  bool in_process = false;
  std::string keep_checkpoints;
  std::string payload_hashes_path;
  std::string fr_dump_dir;
  uint64_t fr_buffer_size = RunOptions{}.fr_buffer_size;
  std::string timeout_text;  // as given, for the rerun line
  bool quiet = false;
};

// Records a problem with a path the way unusable scenario files are recorded.
void add_problems(const ExpandedPaths& expanded, RunReport& report) {
  for (const PathProblem& p : expanded.problems)
    report.unusable.push_back({{p.path, 0, 0}, p.message});
}

// The command line that reproduces one scenario's run.
std::string rerun_line(const std::string& file, const RunFlags& flags) {
  std::string line = "meshsim run " + file;
  if (flags.schedule != "fifo")
    line += fmt::format(" --schedule {} --seed {}", flags.schedule, flags.seed);
  if (flags.backend != BackendChoice{}.name) line += " --backend " + flags.backend;
  if (flags.stack_kib != kDefaultStackBytes / 1024)
    line += fmt::format(" --stack-kib {}", flags.stack_kib);
  if (flags.stack_guard != "auto") line += " --stack-guard " + flags.stack_guard;
  if (flags.faults_seed) line += fmt::format(" --faults-seed {}", *flags.faults_seed);
  if (!flags.max_memory_text.empty()) line += " --max-memory " + flags.max_memory_text;
  if (!flags.keep_checkpoints.empty()) line += " --keep-checkpoints " + flags.keep_checkpoints;
  if (!flags.timeout_text.empty()) line += " --timeout " + flags.timeout_text;
  return line;
}

// Writes one output file; false (after saying why) when it cannot be written completely.
bool write_output(const std::string& path, const std::string& content) {
  const std::string error = write_output_file(path, content);
  if (error.empty()) return true;
  std::cerr << "meshsim: cannot write " << path << ": " << error << "\n";
  return false;
}

// One hung scenario's wait-for graph, as DOT.
struct HungGraph {
  std::string scenario;
  std::string dot;
};

// --graph: into a directory (one exists, or the path ends with '/'), one file per hung scenario
// named after it; into a file, the one graph (a file holds one digraph), saying so when there
// were more.
bool write_graphs(const std::string& path, const std::vector<HungGraph>& graphs) {
  std::error_code ec;
  const bool into_directory = path.ends_with('/') || std::filesystem::is_directory(path, ec);
  if (!into_directory) {
    if (graphs.size() > 1) {
      std::cout << fmt::format(
          "--graph: {} scenarios hung; {} holds the first ({}). Give a directory for one file "
          "each.\n",
          graphs.size(), path, graphs.front().scenario);
    }
    return write_output(path, graphs.empty()
                                  ? "// no hang: no wait-for graph\ndigraph wait_for {}\n"
                                  : graphs.front().dot);
  }
  std::filesystem::create_directories(path, ec);
  if (ec) {
    std::cerr << "meshsim: cannot write " << path << ": " << ec.message() << "\n";
    return false;
  }
  bool written = true;
  std::set<std::string> used;
  std::vector<std::string> names;
  for (const HungGraph& g : graphs) {
    // The scenario's name, made a safe file name, unique within the run.
    std::string stem = g.scenario;
    for (char& c : stem) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
    }
    if (stem.empty() || stem.size() > 100) stem = stem.substr(0, 100) + "scenario";
    // Unique even where the file system ignores case.
    auto lower = [](std::string text) {
      for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return text;
    };
    std::string name = stem + ".dot";
    for (int n = 2; used.contains(lower(name)); ++n) name = fmt::format("{}-{}.dot", stem, n);
    used.insert(lower(name));
    names.push_back(name);
    written &= write_output((std::filesystem::path(path) / name).string(), g.dot);
  }
  std::cout << (graphs.empty()
                    ? fmt::format("--graph: no hang, nothing written to {}\n", path)
                    : fmt::format("--graph: wrote {} to {}\n", fmt::join(names, ", "), path));
  return written;
}

// The files `run` writes, by flag.
std::array<std::pair<const char*, const std::string*>, 4> output_flags(const RunFlags& flags) {
  return {{{"--json", &flags.json_path},
           {"--trace", &flags.trace_path},
           {"--graph", &flags.graph_path},
           {"--payload-hashes", &flags.payload_hashes_path}}};
}

// An output flag that would overwrite one of the scenario files being run (a slip such as
// `--graph a.toml a.toml`), or "" when none does.
std::string output_over_input(const RunFlags& flags, const std::vector<std::string>& files) {
  for (const auto& [flag, path] : output_flags(flags)) {
    std::error_code ec;
    if (path->empty() || !fs::is_regular_file(*path, ec)) continue;
    for (const std::string& file : files) {
      if (fs::equivalent(*path, file, ec)) {
        return fmt::format("{} {}: that is a scenario file of this run; it would be overwritten",
                           flag, *path);
      }
    }
  }
  return "";
}

int run_command(const std::vector<std::string>& paths, const RunFlags& flags) {
  const bool verbose = flags.verbose;
  RunOptions options;
  // CLI11 checked both names against the same tables.
  options.world.policy = value_in(kSchedulePolicyNames, flags.schedule).value();
  options.world.seed = flags.seed;
  options.world.stack_size = flags.stack_kib * 1024;
  options.world.stack_guard = value_in(kStackGuardNames, flags.stack_guard).value();
  options.faults_seed = flags.faults_seed;
  options.backend.name = flags.backend;  // CLI11 checked the name
  options.backend.payload_hashes = !flags.payload_hashes_path.empty();
  options.trace = !flags.trace_path.empty();
  options.trace_setup = flags.trace_setup;
  std::string payload_hashes;
  if (!flags.keep_checkpoints.empty()) options.keep_checkpoints = flags.keep_checkpoints;
  if (!flags.fr_dump_dir.empty()) options.fr_dump_dir = flags.fr_dump_dir;
  options.fr_buffer_size = static_cast<size_t>(flags.fr_buffer_size);
  if (!flags.timeout_text.empty()) {
    double seconds = 0;
    parse_duration(flags.timeout_text, seconds);  // checked when the flags were read
    options.watch.limit_s = seconds;
  }
  // A person at a terminal sees how a long run goes; tools reading the output never do.
  if (!flags.quiet && flags.with_time && ::isatty(STDERR_FILENO) == 1)
    options.watch.progress_fd = STDERR_FILENO;
  bool dumps_written = true;
  // The file whose scenario owns each per-scenario folder (--fr-dump, --keep-checkpoints).
  std::map<std::string, std::string> folder_owner;
  const bool keeps_folders = !flags.fr_dump_dir.empty() || !flags.keep_checkpoints.empty();
  nlohmann::json trace_events = nlohmann::json::array();
  std::vector<HungGraph> graphs;
  RunReport report;
  const ExpandedPaths expanded = expand_scenario_paths(paths);
  add_problems(expanded, report);
  const std::vector<std::string>& files = expanded.files;
  if (const std::string clash = output_over_input(flags, files); !clash.empty()) {
    std::cerr << "meshsim: " << clash << "\n";
    return kExitUnusable;
  }
  for (const UnusableInput& u : report.unusable) print_unusable(u);
  for (size_t i = 0; i < files.size(); ++i) {
    std::cout << fmt::format("[{}/{}] {} ... ", i + 1, files.size(), files[i]) << std::flush;
    FileOutcome outcome =
        run_scenario_file(files[i], builtin_steps(), options,
                          flags.in_process ? Isolation::kInProcess : Isolation::kChildProcess);
    if (!outcome.result) {
      std::cout << "unusable\n  " << outcome.unusable_message << "\n";
      report.unusable.push_back({*outcome.unusable_at, outcome.unusable_message});
      continue;
    }
    ScenarioResult& result = *outcome.result;
    std::cout << (!result.crash.empty() ? "CRASH" : result.passed() ? "pass" : "FAIL") << "\n";
    // A passing scenario's failures and hangs are the ones it expects: shown with -v only.
    if (!result.passed() || verbose) std::cout << format_failures(result, verbose ? SIZE_MAX : 20);
    if (!result.passed()) std::cout << "  rerun: " << rerun_line(files[i], flags) << "\n";
    if (keeps_folders) {
      const std::string folder = scenario_dir_name(result.name);
      const auto [owner, fresh] = folder_owner.emplace(folder, files[i]);
      if (!fresh) {
        std::cerr << fmt::format(
            "meshsim: the scenarios of {} and {} share the folder name {} under --fr-dump and "
            "--keep-checkpoints: the second overwrote what the first wrote; give them distinct "
            "names\n",
            owner->second, files[i], folder);
        dumps_written = false;
      }
    }
    if (!result.fr_dump_error.empty()) {
      std::cerr << "meshsim: " << result.fr_dump_error << "\n";
      dumps_written = false;
    } else if (!result.fr_dump_dir.empty()) {
      std::cout << fmt::format(
          "  flight recorder dumps: {}/pickle (torchfrtrace, meshsim fr "
          "analyze) and {}/json\n",
          result.fr_dump_dir, result.fr_dump_dir);
    }
    if (options.trace) {
      // One process per scenario in the trace.
      for (auto& e : result.trace) {
        e["pid"] = static_cast<int64_t>(i);
        trace_events.push_back(std::move(e));
      }
      result.trace = nlohmann::json::array();
    }
    if (options.backend.payload_hashes) {
      payload_hashes += fmt::format("# {} ({})\n", result.name, files[i]);
      for (const std::string& line : result.payload_hashes) payload_hashes += line + "\n";
    }
    if (!result.hang_dot.empty()) {
      graphs.push_back(
          {result.name, fmt::format("// {} ({})\n{}", result.name, files[i], result.hang_dot)});
    }
    if (verbose) {
      for (const DumpRecord& d : result.dumps) {
        std::cout << fmt::format("  {}: rank {}: {}: {}\n", d.where.to_string(), d.rank, d.what,
                                 json_text(d.value));
      }
    }
    report.results.push_back(std::move(result));
  }
  if (!report.results.empty()) std::cout << "\n" << format_table(report, flags.with_time);
  constexpr size_t kWarningsListed = 5;
  std::cout << format_warnings(report, verbose ? SIZE_MAX : kWarningsListed);
  const size_t warnings = warning_count(report);
  if (flags.warnings_as_errors && warnings > 0) {
    std::cout << fmt::format("{} warning{} with --warnings-as-errors: the run fails\n", warnings,
                             warnings == 1 ? "" : "s");
  }
  std::cout << format_totals(report);
  bool written = true;
  if (!flags.json_path.empty()) {
    written &=
        write_output(flags.json_path, json_text(report_json(report, MESHSIM_VERSION), 2) + "\n");
  }
  if (options.trace) {
    written &= write_output(
        flags.trace_path,
        json_text(Json{{"traceEvents", trace_events}, {"displayTimeUnit", "ms"}}, -1) + "\n");
  }
  if (options.backend.payload_hashes)
    written &= write_output(flags.payload_hashes_path, payload_hashes);
  if (!flags.graph_path.empty()) written &= write_graphs(flags.graph_path, graphs);
  if (!written || !dumps_written) return kExitUnusable;
  const int code = exit_code(report);
  return code == kExitPass && flags.warnings_as_errors && warnings > 0 ? kExitFailed : code;
}

// `meshsim steps`: one row per step kind, its arguments and what it does, in aligned columns
// (arguments wider than kArgsWidth take a line of their own).
std::string steps_table() {
  constexpr size_t kArgsWidth = 48;
  std::vector<std::array<std::string, 3>> rows{{"step", "arguments", "what it does"}};
  for (const auto& kind : builtin_steps().kinds())
    rows.push_back({kind.key, kind.args, kind.summary});
  rows.push_back({"repeat", "{ var, count } ... end_repeat = \"var\"",
                  "run the steps up to end_repeat count times, var = 0, 1, ..."});
  size_t key_width = 0, args_width = 0;
  for (const auto& row : rows) {
    key_width = std::max(key_width, row[0].size());
    if (row[1].size() <= kArgsWidth) args_width = std::max(args_width, row[1].size());
  }
  std::string out;
  for (const auto& [key, args, what] : rows) {
    if (args.size() <= args_width) {
      out += fmt::format("{:<{}}  {:<{}}  {}\n", key, key_width, args, args_width, what);
    } else {
      out += fmt::format("{:<{}}  {}\n{:<{}}  {:<{}}  {}\n", key, key_width, args, "", key_width,
                         "", args_width, what);
    }
  }
  return out;
}

int check_command(const std::vector<std::string>& paths) {
  RunReport report;
  const ExpandedPaths expanded = expand_scenario_paths(paths);
  add_problems(expanded, report);
  for (const UnusableInput& u : report.unusable) print_unusable(u);
  for (const std::string& f : expanded.files) {
    try {
      const Scenario s = load_scenario_file(f);
      std::cout << fmt::format("{}: ok ({} ranks, {} steps)\n", f, s.world_size, s.steps.size());
    } catch (const InputError& e) {
      std::cout << e.what() << "\n";
      report.unusable.push_back({e.where(), e.what()});
    } catch (...) {
      const RankError e = classify_current_exception();
      std::cout << fmt::format("{}: error: {}: {}\n", f, py_error_type_name(e.type), e.message);
      report.unusable.push_back({{f, 0, 0}, e.message});
    }
  }
  return report.unusable.empty() ? kExitPass : kExitUnusable;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"meshsim: simulate distributed PyTorch SPMD programs and check what must hold"};
  app.set_version_flag("--version", std::string("meshsim ") + MESHSIM_VERSION +
                                        (built_with_asan() ? " (AddressSanitizer)" : ""));
  app.require_subcommand(1);

  std::vector<std::string> run_paths;
  RunFlags flags;
  bool no_time = false;
  CLI::App* run = app.add_subcommand("run", "run scenario files or directories of them");
  run->add_option("paths", run_paths, "scenario files (.toml) or directories")->required();
  run->add_option("--json", flags.json_path,
                  "write the full report (schema in README.md) to this file");
  run->add_option("--trace", flags.trace_path,
                  "write a Chrome trace (open in Perfetto): a track per rank, virtual time");
  run->add_flag("--trace-setup", flags.trace_setup,
                "with --trace: also trace new_group's store barriers (group creation)");
  run->add_option("--graph", flags.graph_path,
                  "write the wait-for graph of a hang as Graphviz DOT; a directory (or a path "
                  "ending in /) gets one file per hung scenario");
  run->add_option("--payload-hashes", flags.payload_hashes_path,
                  "write one line per member of every collective: what it received, hashed "
                  "(compare two backends' files with diff)");
  run->add_flag("-v,--verbose", flags.verbose, "print every failure, hang report and dump");
  run->add_flag("--warnings-as-errors", flags.warnings_as_errors,
                "fail the run (exit 1) when any scenario warns");
  run->add_flag("--no-time", no_time,
                "leave wall-clock times out of the table (diffable output; no progress line)");
  run->add_flag("-q,--quiet", flags.quiet,
                "no progress line (a run longer than a few seconds shows one on a terminal)");
  run->add_option("--timeout", flags.timeout_text,
                  "stop each scenario after this much wall-clock time (90, 1.5s, 10m, 2h) and "
                  "report it failed with where every rank was (virtual time has its own "
                  "watchdog: the scenario's timeout_s)");
  run->add_option("--schedule", flags.schedule,
                  "fifo (default) or random: a seeded permutation of the ready ranks")
      ->check(CLI::IsMember(names_of(kSchedulePolicyNames)));
  // Numbers are read as text and parsed strictly (CLI11 would wrap "-1" into 2^64-1).
  std::string seed_text, faults_seed_text, stack_text, memory_text;
  run->add_option("--seed", seed_text, "seed of the random schedule (0 to 2^64-1)");
  run->add_option("--faults-seed", faults_seed_text,
                  "inject one fault (crash, stall or backend error) drawn from this seed");
  run->add_option("--stack-kib", stack_text,
                  fmt::format("fiber stack size per rank in KiB, {} to {} (default {})",
                              kMinStackKib, kMaxStackKib, kDefaultStackBytes / 1024));
  std::vector<std::string> backend_names;
  std::vector<std::string> backend_help;
  for (const BackendEntry& e : builtin_backends().entries()) {
    backend_names.push_back(e.name);
    backend_help.push_back(fmt::format("{}: {}", e.name, e.summary));
  }
  run->add_option(
         "--backend", flags.backend,
         fmt::format("the collective backend: {} (default {}; {})", fmt::join(backend_names, ", "),
                     flags.backend, fmt::join(backend_help, "; ")))
      ->check(CLI::IsMember(backend_names));
  run->add_option("--stack-guard", flags.stack_guard,
                  "how a fiber stack overflow is caught: auto (default: guard pages while "
                  "vm.max_map_count allows them, else canaries), pages or canary")
      ->check(CLI::IsMember(names_of(kStackGuardNames)));
  run->add_flag("--in-process", flags.in_process,
                "run scenarios in this process (for a debugger) instead of one child process "
                "each, which keeps a crash in one from losing the others' results");
  run->add_option("--max-memory", memory_text,
                  "budget for tensor data of all ranks together: 8G, 512M, a byte count, or a "
                  "share of this machine's memory such as 50% (the default)");
  run->add_option("--keep-checkpoints", flags.keep_checkpoints,
                  "keep the files save steps write, under DIR/<scenario name> (default: a "
                  "temporary directory per run, removed afterwards)");
  CLI::Option* fr_dump =
      run->add_option("--fr-dump", flags.fr_dump_dir,
                      "write every rank's Flight Recorder dump as PyTorch does (pickle and JSON, "
                      "schema 2.10) under DIR/<scenario name>/pickle and .../json");
  std::string fr_buffer_text;
  run->add_option("--fr-buffer-size", fr_buffer_text,
                  fmt::format("calls each rank's recorder keeps for --fr-dump, as "
                              "TORCH_FR_BUFFER_SIZE (1 to {}, default {})",
                              kMaxFrBufferSize, flags.fr_buffer_size))
      ->needs(fr_dump);
  std::vector<std::string> check_paths;
  CLI::App* check = app.add_subcommand("check", "validate scenario files without running them");
  check->add_option("paths", check_paths, "scenario files (.toml) or directories")->required();
  check->add_option("--max-memory", memory_text,
                    "the tensor data budget the load-time size checks use (as for run)");

  CLI::App* steps = app.add_subcommand("steps", "list the step kinds scenario files can use");
  RngPredictFlags rng_flags;
  RngOffsetsFlags offsets_flags;
  const RngCommands rng = add_rng_command(app, rng_flags, offsets_flags);
  CkptInspectFlags inspect_flags;
  CkptPlanFlags plan_flags;
  const CkptCommands ckpt = add_ckpt_command(app, inspect_flags, plan_flags);
  FrFlags fr_flags;
  CLI::App* fr = add_fr_command(app, fr_flags);
  SwarmFlags swarm_flags;
  const SwarmCommands swarm = add_swarm_command(app, swarm_flags, memory_text);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitUnusable;
  }
  flags.with_time = !no_time;
  auto bad_flag = [](std::string_view flag, const std::string& error) {
    std::cerr << "meshsim: " << flag << ": " << error << "\n";
    return kExitUnusable;
  };
  std::string error;
  if (!seed_text.empty() && !(error = parse_unsigned(seed_text, 0, UINT64_MAX, flags.seed)).empty())
    return bad_flag("--seed", error);
  if (!faults_seed_text.empty()) {
    uint64_t v = 0;
    if (!(error = parse_unsigned(faults_seed_text, 0, UINT64_MAX, v)).empty())
      return bad_flag("--faults-seed", error);
    flags.faults_seed = v;
  }
  if (!stack_text.empty()) {
    uint64_t v = 0;
    if (!(error = parse_unsigned(stack_text, kMinStackKib, kMaxStackKib, v)).empty())
      return bad_flag("--stack-kib", error);
    flags.stack_kib = static_cast<size_t>(v);
  }
  if (!fr_buffer_text.empty() &&
      !(error = parse_unsigned(fr_buffer_text, 1, kMaxFrBufferSize, flags.fr_buffer_size)).empty())
    return bad_flag("--fr-buffer-size", error);
  if (!flags.timeout_text.empty()) {
    double seconds = 0;
    if (!(error = parse_duration(flags.timeout_text, seconds)).empty())
      return bad_flag("--timeout", error);
  }
  flags.max_memory_text = memory_text;
  if (!(error = parse_byte_size(memory_text.empty() ? "50%" : memory_text,
                                meshsim::physical_memory_bytes(), flags.max_memory))
           .empty()) {
    if (!memory_text.empty()) return bad_flag("--max-memory", error);
    flags.max_memory = uint64_t{8} << 30;  // the machine's size is unknown: 8 GiB
  }
  meshsim::MemoryBudget::set_limit(flags.max_memory);
  if (rng.predict->parsed()) return run_rng_predict(rng_flags);
  if (rng.offsets->parsed()) return run_rng_offsets(offsets_flags);
  if (ckpt.inspect->parsed()) return run_ckpt_inspect(inspect_flags);
  if (ckpt.plan->parsed()) return run_ckpt_plan(plan_flags);
  if (fr->parsed()) return run_fr_command(*fr, fr_flags);
  if (swarm.merge->parsed()) return run_swarm_merge(swarm_flags);
  if (swarm.swarm->parsed()) return run_swarm_command(swarm_flags, memory_text);
  for (const auto& [flag, path] : output_flags(flags)) {
    if (run->count(flag) > 0 && path->empty()) return bad_flag(flag, "needs a path (it was empty)");
  }
  if (run->count("--fr-dump") > 0 && flags.fr_dump_dir.empty())
    return bad_flag("--fr-dump", "needs a directory (it was empty)");
  if (run->parsed()) return run_command(run_paths, flags);
  if (check->parsed()) return check_command(check_paths);
  if (steps->parsed()) std::cout << steps_table();
  return kExitPass;
}
