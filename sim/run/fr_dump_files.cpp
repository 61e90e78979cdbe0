#include "sim/run/fr_dump_files.hpp"

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "sim/report/fr_export.hpp"
#include "sim/run/scenario_dir_name.hpp"
#include "sim/scenario/input_files.hpp"
#include "src/error.hpp"
#include "src/io/fr_dump_writer.hpp"

namespace meshsim::sim {

std::string write_fr_dumps(const FrDumpTarget& target, const std::vector<RankActivity>& activity,
                           const GroupTable& groups) {
  namespace fs = std::filesystem;
  const fs::path base = fs::path(target.dir) / scenario_dir_name(target.scenario_name);
  const fs::path pickles = base / "pickle", jsons = base / "json";
  for (const fs::path& folder : {pickles, jsons}) {
    std::error_code ec;
    fs::remove_all(folder, ec);
    if (!ec) fs::create_directories(folder, ec);
    if (ec) {
      throw runtime_error(
          fmt::format("--fr-dump: cannot prepare {}: {}", folder.string(), ec.message()));
    }
  }
  for (size_t r = 0; r < activity.size(); ++r) {
    const FrDump dump =
        rank_fr_dump(static_cast<int64_t>(r), activity[r].history, groups, target.scenario_file);
    const std::string name = fmt::format("nccl_trace_rank_{}", r);
    // Fresh folders: plain writes, no rename or fsync per file (a big world has many).
    for (const auto& [path, bytes] :
         {std::pair{(pickles / name).string(), fr_dump_pickle(dump)},
          std::pair{(jsons / (name + ".json")).string(), fr_dump_json(dump)}}) {
      if (const std::string error = write_output_file(path, bytes); !error.empty())
        throw runtime_error(fmt::format("--fr-dump: cannot write {}: {}", path, error));
    }
  }
  return base.string();
}

}  // namespace meshsim::sim
