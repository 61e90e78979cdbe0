// What the checkpoint steps share: where files live (the run's checkpoint directory, paths that
// cannot leave it), archive formats, a mesh with placements, and errors that read the same on
// every run.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "sim/run/rank_state.hpp"
#include "sim/runtime/fiber_stack.hpp"
#include "sim/scenario/load_context.hpp"
#include "src/dtensor/placement.hpp"
#include "src/io/envelope.hpp"

namespace meshsim::sim {

// `mesh` (required) and `placements` (optional, one per mesh dim) of `args`.
struct MeshPlacements {
  std::string mesh;
  std::vector<Placement> placements;
};
// Placements that shard a dim are checked against `tensor_ndim` when it is known.
MeshPlacements mesh_placements_of(const toml::table& args, std::string_view what,
                                  const LoadContext& ctx,
                                  std::optional<size_t> tensor_ndim = std::nullopt);

// Whether every '/'-separated part of `path` (after removing {rank}) is a plain name: letters,
// digits, '.', '_' and '-', never "." or "..". Nothing such a path names can leave its directory.
bool plain_relative_path(const std::string& path, bool allow_directories);

// `pattern` with every {rank} replaced by `rank`.
std::string with_rank(std::string pattern, int64_t rank);
// The file `pattern` names for this rank, in the run's checkpoint directory.
std::string resolve(const RankState& rank, const std::string& pattern);

ArchiveFormat format_of(const toml::node& node, const LoadContext& ctx);

// `text` with every `from` replaced by `to`.
void replace_all(std::string& text, const std::string& from, std::string_view to);
// `e` with files named relative to the run's directory and temporary files without the process
// id, so that a report reads the same on every run.
Error stable_error(const RankState& rank, const Error& e);

// Runs `body`, throwing what it throws as stable_error makes it.
template <typename Body>
void with_stable_errors(const RankState& rank, Body&& body) {
  try {
    body();
  } catch (const Error& e) {
    forget_unwound_frames();  // ASan: this catch runs on a fiber stack
    throw stable_error(rank, e);
  }
}

// The whole-world forms of save and load (`checkpoint = ...`), for the save and load steps.
std::unique_ptr<Step> parse_world_save(const toml::table& args, LoadContext& ctx);
std::unique_ptr<Step> parse_world_load(const toml::table& args, LoadContext& ctx);

}  // namespace meshsim::sim
