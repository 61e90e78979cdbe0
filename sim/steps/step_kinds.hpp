// The step kinds meshsim ships, each registered by the file that implements it, and the parsers
// they share with the [[mesh]] and [[expect]] arrays.
#pragma once

#include <memory>
#include <optional>

#include "sim/scenario/load_context.hpp"
#include "sim/scenario/outcome_expectation.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/scenario/step_registry.hpp"

namespace meshsim::sim {

// The entries of the [[mesh]] and [[expect]] arrays (and of the mesh, dump and expect steps).
std::unique_ptr<Step> parse_mesh_definition(const toml::table& table, LoadContext& ctx,
                                            Raises raises);
std::unique_ptr<Step> parse_expectation(const toml::table& table, LoadContext& ctx);
std::unique_ptr<Step> parse_dump(const toml::node& value, const toml::table& entry,
                                 LoadContext& ctx);

// Registers tensor, the collectives, send/recv, object collectives and sleep.
void register_collective_steps(StepRegistry& registry);
// Registers view: indexing, permute and .contiguous() of a plain tensor.
void register_view_step(StepRegistry& registry);

// An [[expect]] with `distinct` or `equal`: a step every rank runs to record what it holds, and
// the comparison across ranks after the run. nullopt for any other [[expect]].
struct CrossRankExpectation {
  std::unique_ptr<Step> record;
  std::unique_ptr<OutcomeExpectation> check;
};
std::optional<CrossRankExpectation> parse_cross_rank_expectation(const toml::table& entry,
                                                                 LoadContext& ctx);

// Registers dtensor, manual_seed, rand, randn, the in-place random ops and distribute_region.
void register_random_steps(StepRegistry& registry);
// Registers linear, parallelize, fully_shard, to_empty and reset_parameters.
void register_module_steps(StepRegistry& registry);

// Registers decouple_backend_at_save, from_local, save, load, reassign_mesh, rebind_groups and
// corrupt_file.
void register_checkpoint_steps(StepRegistry& registry);

// Registers redistribute, full_tensor and to_local.
void register_dtensor_steps(StepRegistry& registry);

}  // namespace meshsim::sim
