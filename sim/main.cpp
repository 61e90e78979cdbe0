// The `meshsim` command: run, check and list scenario steps.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "sim/report.hpp"
#include "sim/runner.hpp"
#include "sim/scenario_loader.hpp"
#include "sim/step_registry.hpp"

namespace {

namespace fs = std::filesystem;
using namespace meshsim::sim;

constexpr int kExitPass = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUnusable = 2;

// Files as given, directories expanded to their *.toml files in sorted order.
std::vector<std::string> expand(const std::vector<std::string>& paths, RunReport& report) {
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::recursive_directory_iterator(p, ec)) {
        if (entry.is_regular_file() && entry.path().extension() == ".toml") {
          found.push_back(entry.path().string());
        }
      }
      std::sort(found.begin(), found.end());
      if (found.empty())
        report.unusable.push_back({{p, 0, 0}, "no .toml scenario files in this directory"});
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::exists(p, ec)) {
      files.push_back(p);
    } else {
      report.unusable.push_back({{p, 0, 0}, "no such file or directory"});
    }
  }
  return files;
}

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
  bool verbose = false;
  bool with_time = true;
  std::string schedule = "fifo";
  uint64_t seed = 0;
  size_t stack_kib = 64;
  std::optional<uint64_t> faults_seed;
};

// The command line that reproduces one scenario's run.
std::string rerun_line(const std::string& file, const RunFlags& flags) {
  std::string line = "meshsim run " + file;
  if (flags.schedule != "fifo")
    line += fmt::format(" --schedule {} --seed {}", flags.schedule, flags.seed);
  if (flags.stack_kib != 64) line += fmt::format(" --stack-kib {}", flags.stack_kib);
  if (flags.faults_seed) line += fmt::format(" --faults-seed {}", *flags.faults_seed);
  return line;
}

int run_command(const std::vector<std::string>& paths, const RunFlags& flags) {
  const bool verbose = flags.verbose;
  RunOptions options;
  options.world.policy =
      flags.schedule == "random" ? SchedulePolicy::kRandom : SchedulePolicy::kFifo;
  options.world.seed = flags.seed;
  options.world.stack_size = flags.stack_kib * 1024;
  options.faults_seed = flags.faults_seed;
  options.trace = !flags.trace_path.empty();
  nlohmann::json trace_events = nlohmann::json::array();
  std::string dot;
  RunReport report;
  const std::vector<std::string> files = expand(paths, report);
  for (const UnusableInput& u : report.unusable) print_unusable(u);
  for (size_t i = 0; i < files.size(); ++i) {
    std::cout << fmt::format("[{}/{}] {} ... ", i + 1, files.size(), files[i]) << std::flush;
    try {
      const Scenario scenario = load_scenario_file(files[i]);
      ScenarioResult result = run_scenario(scenario, options);
      std::cout << (result.passed() ? "pass" : "FAIL") << "\n";
      // A passing scenario's failures and hangs are the ones it expects: shown with -v only.
      if (!result.passed() || verbose)
        std::cout << format_failures(result, verbose ? SIZE_MAX : 20);
      if (!result.passed()) std::cout << "  rerun: " << rerun_line(files[i], flags) << "\n";
      if (options.trace) {
        // One process per scenario in the trace.
        for (auto& e : result.trace) {
          e["pid"] = static_cast<int64_t>(i);
          trace_events.push_back(std::move(e));
        }
        result.trace = nlohmann::json::array();
      }
      if (!result.hang_dot.empty()) {
        dot += fmt::format("// {} ({})\n{}", result.name, files[i], result.hang_dot);
      }
      if (verbose) {
        for (const DumpRecord& d : result.dumps) {
          std::cout << fmt::format("  {}: rank {}: {}: {}\n", d.where.to_string(), d.rank, d.what,
                                   d.value.dump());
        }
      }
      report.results.push_back(std::move(result));
    } catch (const InputError& e) {
      std::cout << "unusable\n";
      report.unusable.push_back({e.where(), e.what()});
      std::cout << "  " << e.what() << "\n";
    }
  }
  if (!report.results.empty()) std::cout << "\n" << format_table(report, flags.with_time);
  std::cout << format_totals(report);
  if (!flags.json_path.empty()) {
    std::ofstream out(flags.json_path);
    out << report_json(report, MESHSIM_VERSION).dump(2) << "\n";
    if (!out) {
      std::cerr << "meshsim: cannot write " << flags.json_path << "\n";
      return kExitUnusable;
    }
  }
  if (options.trace) {
    std::ofstream out(flags.trace_path);
    out << nlohmann::json{{"traceEvents", trace_events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
    if (!out) {
      std::cerr << "meshsim: cannot write " << flags.trace_path << "\n";
      return kExitUnusable;
    }
  }
  if (!flags.graph_path.empty()) {
    std::ofstream out(flags.graph_path);
    out << (dot.empty() ? "// no hang: no wait-for graph\ndigraph wait_for {}\n" : dot);
    if (!out) {
      std::cerr << "meshsim: cannot write " << flags.graph_path << "\n";
      return kExitUnusable;
    }
  }
  return exit_code(report);
}

int check_command(const std::vector<std::string>& paths) {
  RunReport report;
  const std::vector<std::string> files = expand(paths, report);
  for (const UnusableInput& u : report.unusable) print_unusable(u);
  int ok = 0;
  for (const std::string& f : files) {
    try {
      const Scenario s = load_scenario_file(f);
      std::cout << fmt::format("{}: ok ({} ranks, {} steps)\n", f, s.world_size, s.steps.size());
      ++ok;
    } catch (const InputError& e) {
      std::cout << e.what() << "\n";
      report.unusable.push_back({e.where(), e.what()});
    }
  }
  return report.unusable.empty() ? kExitPass : kExitUnusable;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"meshsim: simulate distributed PyTorch SPMD programs and check what must hold"};
  app.set_version_flag("--version", std::string("meshsim ") + MESHSIM_VERSION);
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
  run->add_option("--graph", flags.graph_path,
                  "write the wait-for graph of every hang as Graphviz DOT");
  run->add_flag("-v,--verbose", flags.verbose, "print every failure, hang report and dump");
  run->add_flag("--no-time", no_time, "leave wall-clock times out of the table (diffable output)");
  run->add_option("--schedule", flags.schedule,
                  "fifo (default) or random: a seeded permutation of the ready ranks")
      ->check(CLI::IsMember({"fifo", "random"}));
  run->add_option("--seed", flags.seed, "seed of the random schedule");
  run->add_option("--faults-seed", flags.faults_seed,
                  "inject one fault (crash, stall or backend error) drawn from this seed");
  run->add_option("--stack-kib", flags.stack_kib, "fiber stack size per rank in KiB (default 64)")
      ->check(CLI::Range(16, 65536));

  std::vector<std::string> check_paths;
  CLI::App* check = app.add_subcommand("check", "validate scenario files without running them");
  check->add_option("paths", check_paths, "scenario files (.toml) or directories")->required();

  CLI::App* steps = app.add_subcommand("steps", "list the step kinds scenario files can use");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitUnusable;
  }
  flags.with_time = !no_time;
  if (run->parsed()) return run_command(run_paths, flags);
  if (check->parsed()) return check_command(check_paths);
  if (steps->parsed()) {
    for (const auto& kind : StepRegistry::builtin().kinds()) {
      std::cout << fmt::format("{:<10} {}\n", kind.key, kind.summary);
    }
  }
  return kExitPass;
}
