#include "sim/scenario/step_registry.hpp"

#include <fmt/format.h>

namespace meshsim::sim {

void StepRegistry::add(std::string key, std::string args, std::string summary, StepParser parse) {
  kinds_.push_back({std::move(key), std::move(args), std::move(summary), std::move(parse)});
}

const StepRegistry::Kind* StepRegistry::find(std::string_view key) const {
  for (const Kind& k : kinds_) {
    if (k.key == key) return &k;
  }
  return nullptr;
}

std::vector<std::string> StepRegistry::keys() const {
  std::vector<std::string> out;
  for (const Kind& k : kinds_) out.push_back(k.key);
  return out;
}

const StepRegistry& StepRegistry::builtin() {
  static const StepRegistry registry = [] {
    StepRegistry r;
    r.add("mesh", "{ name, shape, dims, ... } (as [[mesh]])", "create a DeviceMesh",
          [](const toml::node& value, const toml::table& entry, LoadContext& ctx) {
            const toml::table* table = value.as_table();
            if (table == nullptr) ctx.fail(value, "mesh must be a table, like a [[mesh]] entry");
            return parse_mesh_definition(*table, ctx,
                                         entry.contains("raises") ? Raises::kYes : Raises::kNo);
          });
    r.add("dump", "{ mesh, shape, placements, tensor, rng }",
          "record a mesh's groups and coordinate (and a local shard) per rank", parse_dump);
    r.add("expect", "{ ... } (as [[expect]])", "an expectation",
          [](const toml::node& value, const toml::table&, LoadContext& ctx) {
            const toml::table* table = value.as_table();
            if (table == nullptr)
              ctx.fail(value, "expect must be a table, like an [[expect]] entry");
            return parse_expectation(*table, ctx);
          });
    register_collective_steps(r);
    register_view_step(r);
    register_random_steps(r);
    register_module_steps(r);
    register_checkpoint_steps(r);
    register_dtensor_steps(r);
    return r;
  }();
  return registry;
}

}  // namespace meshsim::sim
