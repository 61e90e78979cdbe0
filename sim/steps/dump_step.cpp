// `dump = { mesh = "m", shape = [...], placements = [...] }`: records what a rank sees.
#include <fmt/format.h>

#include "sim/run/query.hpp"
#include "sim/scenario/step_registry.hpp"

namespace meshsim::sim {

namespace {

class DumpStep final : public Step {
 public:
  void run(RankState& rank) const override {
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
  ctx.only_keys(*table, {"mesh", "shape", "placements"}, "dump");
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
