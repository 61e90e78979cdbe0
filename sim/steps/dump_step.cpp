// `dump = { mesh = "m", shape = [...], placements = [...] }`, `dump = { tensor = "w" }` or
// `dump = { rng = true }`: records what a rank sees.
#include <fmt/format.h>

#include "sim/run/query.hpp"
#include "sim/steps/step_kinds.hpp"

namespace meshsim::sim {

namespace {

class DumpStep final : public Step {
 public:
  void run(RankState& rank) const override {
    if (!tensor_.empty()) {
      rank.record_dump(*this, fmt::format("tensor {}", tensor_), describe_value(rank, tensor_));
      return;
    }
    if (rng_) {
      rank.record_dump(*this, "rng", describe_rng(rank.rng()));
      return;
    }
    Json value = describe_mesh(rank, mesh_);
    std::string what = fmt::format("mesh {}", mesh_);
    if (shard_) {
      value["local_shard"] = shard_->observe(rank);
      value["owned_indices"] = indices_->observe(rank);
      what = shard_->describe();
    }
    rank.record_dump(*this, std::move(what), std::move(value));
  }

  std::string mesh_;
  std::string tensor_;
  bool rng_ = false;
  std::optional<Query> shard_;
  std::optional<Query> indices_;
};

}  // namespace

std::unique_ptr<Step> parse_dump(const toml::node& value, const toml::table&, LoadContext& ctx) {
  auto step = std::make_unique<DumpStep>();
  const toml::table* table = value.as_table();
  if (table == nullptr) {
    step->mesh_ = ctx.string_of(value, "dump (a mesh name or a table)");
    ctx.require_mesh(value, step->mesh_);
    return step;
  }
  ctx.only_keys(*table, {"mesh", "shape", "placements", "tensor", "rng"}, "dump");
  if (const toml::node* t = table->get("tensor")) {
    if (table->size() != 1) ctx.fail(*table, "dump = { tensor = ... } takes nothing else");
    step->tensor_ = ctx.string_of(*t, "tensor");
    if (!ctx.has_tensor(step->tensor_))
      ctx.fail(*t, fmt::format("no tensor \"{}\" is set before this", step->tensor_));
    return step;
  }
  if (const toml::node* r = table->get("rng")) {
    if (table->size() != 1 || !ctx.boolean_of(*r, "rng"))
      ctx.fail(*table, "write dump = { rng = true }");
    step->rng_ = true;
    return step;
  }
  const toml::node& mesh = ctx.require(*table, "mesh", "dump");
  step->mesh_ = ctx.string_of(mesh, "mesh");
  ctx.require_mesh(mesh, step->mesh_);
  if (table->contains("shape") || table->contains("placements")) {
    step->shard_ = Query::parse("local_shard", value, ctx);
    step->indices_ = Query::parse("owned_indices", value, ctx);
  }
  return step;
}

}  // namespace meshsim::sim
