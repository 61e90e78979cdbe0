// The step kinds a scenario can use, by the key that names them in a [[step]] table. Later parts
// (collectives, random ops, save/load) register theirs here.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sim/scenario/load_context.hpp"
#include "sim/scenario/scenario.hpp"

namespace meshsim::sim {

// Builds a step from the value of its key; `entry` is the whole [[step]] table.
using StepParser = std::function<std::unique_ptr<Step>(const toml::node& value,
                                                       const toml::table& entry, LoadContext& ctx)>;

class StepRegistry {
 public:
  struct Kind {
    std::string key;
    std::string args;  // what the value holds: "{ tensor, op = \"sum\", group, out }", "\"mesh\""
    std::string summary;
    StepParser parse;
  };

  void add(std::string key, std::string args, std::string summary, StepParser parse);
  const Kind* find(std::string_view key) const;
  const std::vector<Kind>& kinds() const { return kinds_; }
  std::vector<std::string> keys() const;

  // Every step kind meshsim ships.
  static const StepRegistry& builtin();

 private:
  std::vector<Kind> kinds_;
};

// Whether an entry declares the error it must raise: its static checks then leave that error to
// the run.
enum class Raises { kNo, kYes };

// Parsers the loader also calls for the [[mesh]] and [[expect]] arrays.
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

// Keys every entry may carry besides its kind.
inline constexpr std::string_view kCommonKeys[] = {"when", "raises"};

}  // namespace meshsim::sim
