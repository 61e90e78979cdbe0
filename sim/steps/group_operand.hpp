// The process group a step runs over, as a scenario names it: "WORLD" (the default), a 1-D mesh,
// or { mesh = "m", dim = "tp" } (the group of that dim holding the rank).
#pragma once

#include <string>

#include <toml++/toml.h>

#include "sim/run/rank_state.hpp"
#include "sim/scenario/load_context.hpp"

namespace meshsim::sim {

struct GroupOperand {
  std::string mesh;  // empty: WORLD
  std::string dim;

  bool world() const { return mesh.empty(); }
  Group on(const RankState& rank) const { return rank.group(mesh, dim); }
};

// The `group` key of `args` (WORLD when absent). InputError at the key for an unknown mesh or dim,
// or a mesh of several dims without one named.
GroupOperand group_operand(const toml::table& args, const LoadContext& ctx);

}  // namespace meshsim::sim
