#include "sim/cli/fr_command.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "sim/cli/cli_numbers.hpp"
#include "sim/report/fr_render.hpp"
#include "sim/report/fr_replay.hpp"
#include "sim/report/fr_rng.hpp"
#include "sim/report/fr_settle.hpp"
#include "sim/runtime/group_label.hpp"
#include "sim/runtime/hang_phrases.hpp"
#include "sim/scenario/scenario_loader.hpp"
#include "src/error.hpp"
#include "src/io/atomic_file.hpp"
#include "src/io/fr_dump.hpp"
#include "src/printable.hpp"
#include "src/rng/gpu_profile.hpp"

namespace meshsim::sim {
namespace {

namespace fs = std::filesystem;

constexpr int kExitHang = 1;
constexpr int kExitUnusable = 2;
// A directory of more candidate files than this is refused before any is read.
constexpr size_t kMaxDumpFiles = size_t{1} << 20;

struct DumpFile {
  int64_t rank;
  std::string path;
};

// Every dump file the paths name: files as given (each must carry a rank), directories' files
// that carry one (others are skipped), in rank order, a rank's pickle before its JSON (the
// pickle has the Python frames).
std::vector<DumpFile> dump_files(const std::vector<std::string>& paths, size_t& skipped) {
  std::vector<DumpFile> out;
  for (const std::string& path : paths) {
    std::error_code error;
    if (fs::is_directory(path, error)) {
      std::vector<std::string> names;
      // Error codes throughout: a directory that changes or refuses a read is a message.
      for (fs::directory_iterator it(path, error), end; !error && it != end; it.increment(error)) {
        if (names.size() == kMaxDumpFiles)
          throw runtime_error(fmt::format("{}: more than {} files", path, kMaxDumpFiles));
        std::error_code kind_error;
        if (it->is_regular_file(kind_error)) names.push_back(it->path().filename().string());
      }
      if (error) throw runtime_error(fmt::format("{}: cannot list it: {}", path, error.message()));
      std::sort(names.begin(), names.end());
      for (const std::string& name : names) {
        if (const auto rank = rank_in_dump_name(name))
          out.push_back({*rank, (fs::path(path) / name).string()});
        else
          ++skipped;
      }
    } else if (fs::exists(path, error)) {
      const auto rank = rank_in_dump_name(fs::path(path).filename().string());
      if (!rank)
        throw runtime_error(fmt::format(
            "{}: its name does not end with a rank (as rank3.pkl or nccl_trace_rank_3)", path));
      out.push_back({*rank, path});
    } else {
      throw runtime_error(fmt::format(
          "{}: {}", path, error ? error.message() : std::string("no such file or directory")));
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const DumpFile& a, const DumpFile& b) {
    const bool a_json = a.path.ends_with(".json"), b_json = b.path.ends_with(".json");
    return std::tie(a.rank, a_json) < std::tie(b.rank, b_json);
  });
  return out;
}

}  // namespace

std::optional<int64_t> rank_in_dump_name(std::string_view name) {
  for (const std::string_view ext : {".pkl", ".pickle", ".json"})
    if (name.ends_with(ext)) {
      name.remove_suffix(ext.size());
      break;
    }
  size_t digits = 0;
  while (digits < name.size() && name[name.size() - 1 - digits] >= '0' &&
         name[name.size() - 1 - digits] <= '9')
    ++digits;
  if (digits == 0 || digits > 9) return std::nullopt;
  int64_t rank = 0;
  std::from_chars(name.data() + name.size() - digits, name.data() + name.size(), rank);
  return rank;
}

CLI::App* add_fr_command(CLI::App& app, FrFlags& flags) {
  CLI::App* fr = app.add_subcommand("fr", "read PyTorch Flight Recorder dumps of a real job");
  fr->require_subcommand(1);
  CLI::App* analyze = fr->add_subcommand(
      "analyze",
      "say why a job hung from its ranks' Flight Recorder dumps (pickle or JSON, one per rank): "
      "collectives some members never reached, members that disagreed on op, sizes or dtypes, "
      "sends and recvs whose peer went elsewhere, cycles of waits, the first call members made "
      "from different lines; ranks without a dump and buffers that wrapped are said");
  CLI::App* to_scenario = fr->add_subcommand(
      "to-scenario",
      "write a scenario that replays the job: every rank makes the calls its dump recorded, on "
      "the recorded groups, with tensors of the recorded sizes and dtypes, and the file expects "
      "the hang the dumps show; ranks with the same history share steps");
  for (CLI::App* command : {analyze, to_scenario}) {
    command
        ->add_option("paths", flags.paths,
                     "dump files, or directories of them; a file's name ends with its rank "
                     "(rank3.pkl, nccl_trace_rank_3)")
        ->required();
    command->add_option("--world-size", flags.world_size,
                        "ranks in the job, when the last ranks left no dump");
  }
  analyze->add_flag("--json", flags.json, "print JSON (schema in docs/flight-recorder.md)");
  analyze->add_option("--graph", flags.graph, "write the wait-for graph as Graphviz DOT to FILE");
  analyze->add_option("--gpu", flags.gpu,
                      "the GPU whose random kernels place a recorded program's draws (default "
                      "H200; `meshsim rng predict --gpu list` names them)");
  to_scenario->add_option("-o,--output", flags.output,
                          "the scenario file to write (default: standard output)");
  to_scenario->add_option("--name", flags.name,
                          "the scenario's name (default: the output file's name)");
  return fr;
}

namespace {

// The dumps `flags.paths` name, one per rank, read; what could not be read is said on stderr
// (prefixed with `command`) and in `evidence`. None when nothing usable is there.
struct LoadedDumps {
  std::vector<FrRankDump> dumps;
  // A recorder's dumps: pairs of sends and recvs counted over the whole histories, before they
  // are settled (nothing for a real job's).
  FrPairCounts unpaired;
  std::vector<std::string> evidence;
  uint64_t world = 0;
  bool unreadable = false;
};

std::optional<LoadedDumps> load_dumps(const FrFlags& flags, std::string_view command) {
  LoadedDumps loaded;
  if (!flags.world_size.empty()) {
    if (const std::string error = parse_unsigned(flags.world_size, 1, kMaxFrWorld, loaded.world);
        !error.empty()) {
      std::cerr << command << ": --world-size: " << error << "\n";
      return std::nullopt;
    }
  }
  std::vector<DumpFile> files;
  size_t skipped = 0;
  try {
    files = dump_files(flags.paths, skipped);
  } catch (const Error& e) {
    std::cerr << command << ": " << e.what() << "\n";
    return std::nullopt;
  }
  std::vector<FrRankDump>& dumps = loaded.dumps;
  const FrDumpLimits limits;
  // A rank's files in order (its pickle first): the first that reads is its dump; the others
  // are said.
  std::vector<int64_t> second_encoding;  // ranks whose JSON dump is not read: their pickle is
  for (size_t i = 0; i < files.size();) {
    size_t end = i;
    while (end < files.size() && files[end].rank == files[i].rank) ++end;
    bool read = false;
    for (size_t j = i; j < end; ++j) {
      const DumpFile& f = files[j];
      if (read) {
        if (f.path.ends_with(".json") && !files[i].path.ends_with(".json"))
          second_encoding.push_back(f.rank);
        else
          loaded.evidence.push_back(fmt::format("{} is not read: rank {} is read from {}", f.path,
                                                f.rank, dumps.back().file));
        continue;
      }
      try {
        dumps.push_back(
            {f.rank, f.path,
             read_fr_dump(read_file_bounded(f.path, limits.max_bytes), f.path, limits)});
        read = true;
      } catch (const Error& e) {
        std::cerr << command << ": " << e.what() << "\n";
        loaded.evidence.push_back(
            fmt::format("rank {}'s dump cannot be read: {}", f.rank, e.what()));
        loaded.unreadable = true;
      }
    }
    i = end;
  }
  if (!second_encoding.empty())
    loaded.evidence.push_back(fmt::format(
        "the JSON dumps of {} are not read: their pickles are (they carry the Python frames)",
        ranks_text(second_encoding)));
  if (dumps.empty()) {
    std::cerr << command << ": no readable dump"
              << (skipped > 0
                      ? fmt::format(" ({} files without a rank in their name skipped)", skipped)
                      : std::string())
              << "\n";
    return std::nullopt;
  }
  loaded.unpaired = unpaired_point_to_point(dumps);
  for (std::string& note : settle_recorded_histories(dumps))
    loaded.evidence.push_back(std::move(note));
  return loaded;
}

// The analysis of `dumps` (loaded's, moved or copied), with what loading found said first.
std::optional<FrAnalysis> analyze(std::vector<FrRankDump> dumps, const LoadedDumps& loaded,
                                  std::string_view command) {
  try {
    FrAnalysis analysis = analyze_fr_dumps(std::move(dumps), static_cast<int64_t>(loaded.world));
    analysis.evidence.insert(analysis.evidence.begin(), loaded.evidence.begin(),
                             loaded.evidence.end());
    return analysis;
  } catch (const Error& e) {
    std::cerr << command << ": " << e.what() << "\n";
    return std::nullopt;
  }
}

int run_fr_analyze(const FrFlags& flags) {
  constexpr std::string_view kCommand = "meshsim fr analyze";
  const std::optional<GpuProfile> gpu = find_gpu(flags.gpu);
  if (!gpu) {
    std::cerr << kCommand << ": --gpu: no GPU model named '" << printable(flags.gpu, 40)
              << "' (meshsim rng predict --gpu list names them)\n";
    return kExitUnusable;
  }
  std::optional<LoadedDumps> loaded = load_dumps(flags, kCommand);
  if (!loaded) return kExitUnusable;
  const FrRngFindings rng = check_recorded_rng(loaded->dumps, *gpu);
  const std::vector<int64_t> failed = failed_recorded_ranks(loaded->dumps);
  std::optional<FrAnalysis> analysis = analyze(std::move(loaded->dumps), *loaded, kCommand);
  if (!analysis) return kExitUnusable;
  // Only the report: a replay states the hang its own run will show.
  blame_unpaired(*analysis, loaded->unpaired);
  if (flags.json) {  // strings from the dumps that are not UTF-8 are replaced, not refused
    Json report = fr_analysis_json(*analysis);
    if (rng.recorded) report["rng"] = fr_rng_json(rng);
    if (!failed.empty()) report["failed_ranks"] = failed;
    std::cout << report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << fr_analysis_text(*analysis) << fr_rng_text(rng);
    if (!failed.empty())
      std::cout << fmt::format(
          "\nThe program failed on {} {} (the evidence says how): a real run fails there even "
          "where no rank waits for another.\n",
          failed.size() == 1 ? "rank" : "ranks", rank_ranges(failed));
  }
  if (!flags.graph.empty()) {
    try {
      write_file_atomically(flags.graph, fr_analysis_dot(*analysis));
    } catch (const Error& e) {
      std::cerr << kCommand << ": --graph: " << e.what() << "\n";
      return kExitUnusable;
    }
  }
  if (loaded->unreadable) return kExitUnusable;
  const bool clean =
      analysis->verdict == FrAnalysis::Verdict::kClean && rng.clean() && failed.empty();
  return clean ? 0 : kExitHang;
}

int run_fr_to_scenario(const FrFlags& flags) {
  constexpr std::string_view kCommand = "meshsim fr to-scenario";
  const std::optional<LoadedDumps> loaded = load_dumps(flags, kCommand);
  if (!loaded) return kExitUnusable;
  const std::optional<FrAnalysis> analysis = analyze(loaded->dumps, *loaded, kCommand);
  if (!analysis) return kExitUnusable;
  if (analysis->world_size > kMaxWorldSize) {
    std::cerr << fmt::format("{}: the dumps give a job of {} ranks; a scenario has at most {}\n",
                             kCommand, analysis->world_size, kMaxWorldSize);
    return kExitUnusable;
  }
  const bool to_stdout = flags.output.empty() || flags.output == "-";
  FrReplayOptions options;
  if (!flags.name.empty())
    options.name = flags.name;
  else if (!to_stdout)
    options.name = fs::path(flags.output).stem().string();
  options.source = fmt::format("{}", fmt::join(flags.paths, " "));
  const std::string scenario = fr_replay_scenario(loaded->dumps, *analysis, options);
  if (to_stdout) {
    std::cout << scenario;
  } else {
    try {
      write_file_atomically(flags.output, scenario);
    } catch (const Error& e) {
      std::cerr << kCommand << ": " << e.what() << "\n";
      return kExitUnusable;
    }
    std::cerr << fmt::format("{}: wrote {} ({}); run it with: meshsim run {}\n", kCommand,
                             flags.output, fr_verdict_name(analysis->verdict), flags.output);
  }
  return loaded->unreadable ? kExitUnusable : 0;
}

}  // namespace

int run_fr_command(const CLI::App& fr, const FrFlags& flags) {
  if (fr.get_subcommand("to-scenario")->parsed()) return run_fr_to_scenario(flags);
  return run_fr_analyze(flags);
}

}  // namespace meshsim::sim
