#include "sim/steps/builtin_steps.hpp"

#include <fmt/format.h>

#include "sim/steps/step_kinds.hpp"

namespace meshsim::sim {

namespace {

// An [[expect]]: a comparison across ranks records on every rank and checks after the run, so it
// cannot sit inside a loop; any other expectation is a step.
ExpectEntry parse_expect_entry(const toml::table& table, LoadContext& ctx) {
  if (std::optional<CrossRankExpectation> c = parse_cross_rank_expectation(table, ctx)) {
    if (!ctx.open_loops().empty()) {
      ctx.fail(table, fmt::format("distinct and equal compare ranks once, after the run: move "
                                  "this out of the repeat \"{}\" (after its end_repeat)",
                                  ctx.open_loops().back().var));
    }
    return {std::move(c->record), std::move(c->check)};
  }
  return {parse_expectation(table, ctx), nullptr};
}

}  // namespace

const StepRegistry& builtin_steps() {
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
    r.set_expect_parser(parse_expect_entry);
    return r;
  }();
  return registry;
}

Scenario load_scenario_file(const std::string& path) {
  return load_scenario_file(path, builtin_steps());
}

Scenario load_scenario_text(std::string_view text, const std::string& file) {
  return load_scenario_text(text, file, builtin_steps());
}

}  // namespace meshsim::sim
