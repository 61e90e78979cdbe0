// `meshsim ckpt inspect`: what a torch.distributed.checkpoint directory holds, from its metadata
// alone (names, dtypes, shapes, chunks and which file holds each), with the files it needs
// checked for presence and size; or what a torch.save file of a DTensor or DeviceMesh holds.
// `meshsim ckpt plan`: what a load of it onto a given mesh and placements would read on every rank,
// and what it would miss. Text or JSON.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace meshsim::sim {

struct CkptInspectFlags {
  std::string path;  // a checkpoint directory, its .metadata file, or a torch.save file
  bool json = false;
  bool chunks = false;  // text: list every chunk under its tensor
  bool values = false;  // a torch.save file of a DTensor: print the saver's shard
};

struct CkptPlanFlags {
  std::string path;
  std::string mesh;                     // "2,4"
  std::vector<std::string> placements;  // one per mesh dim
  std::string names;                    // "a,b": load only these (default: everything)
  std::string rank;                     // list this rank's reads
  bool json = false;
};

struct CkptCommands {
  CLI::App* inspect;
  CLI::App* plan;
};

// Adds `ckpt inspect` and `ckpt plan` to `app`; test the returned subcommands for parsed().
CkptCommands add_ckpt_command(CLI::App& app, CkptInspectFlags& inspect, CkptPlanFlags& plan);

// 0 for a checkpoint whose files are all there, 1 when some are missing or short (listed under
// "problems"), 2 after a clear message for a path or metadata file that cannot be read.
int run_ckpt_inspect(const CkptInspectFlags& flags);

// 0 when every asked-for name loads completely, 1 when some are missing, mismatched or not fully
// saved (listed under "problems"), 2 after a clear message for bad flags or an unreadable
// checkpoint.
int run_ckpt_plan(const CkptPlanFlags& flags);

}  // namespace meshsim::sim
