// What a training script does with a DTensor's layout: `redistribute` (with the collectives
// DTensor issues), `full_tensor` and `to_local`.
#include <fmt/format.h>

#include "sim/run/query.hpp"
#include "sim/run/rank_state.hpp"
#include "sim/steps/step_kinds.hpp"
#include "src/dtensor/redistribute.hpp"

namespace meshsim::sim {

namespace {

MeshDimGroup groups_of(const RankState& rank) {
  return [&rank](const DeviceMesh& mesh, size_t dim) { return rank.mesh_dim_group(mesh, dim); };
}

RedistributeWarning warnings_of(RankState& rank) {
  return [&rank](std::string text) { rank.warn(std::move(text)); };
}

// The devices a host holds as DTensor's cost model sees them: torch.cuda.device_count(), the
// scenario's gpus_per_node (8 when unset), or torch.cpu's 1 for a "cpu" mesh.
int64_t devices_per_host(const RankState& rank, const DeviceMesh& mesh) {
  if (mesh.device_type() == "cpu") return 1;
  return rank.gpus_per_node().value_or(8);
}

// `redistribute = { tensor, placements, mesh, out }`: out = tensor.redistribute(mesh, placements).
class RedistributeStep final : public Step {
 public:
  void run(RankState& rank) const override {
    const DTensor& t = rank.dtensor(tensor_);
    const DeviceMesh& mesh = mesh_.empty() ? t.spec().mesh : rank.mesh(mesh_);
    const std::vector<Placement> placements =
        shard_order_.empty() ? placements_
                             : encode_shard_order(placements_, shard_order_, mesh.shape());
    DTensor out = redistribute(t, mesh, placements, rank.backend(), groups_of(rank),
                               warnings_of(rank), devices_per_host(rank, t.spec().mesh));
    rank.set_dtensor(out_, std::move(out));
  }
  std::string tensor_, mesh_, out_;
  std::vector<Placement> placements_;
  std::vector<ShardOrderEntry> shard_order_;
};

// `full_tensor = { tensor, out }` and `to_local = { tensor, out }`: plain tensors from a DTensor,
// the whole one (every shard gathered, every partial reduced) or this rank's shard as it is.
class ToTensorStep final : public Step {
 public:
  void run(RankState& rank) const override {
    const DTensor& t = rank.dtensor(tensor_);
    if (!full_) {
      rank.set_tensor(out_, t.local());
      return;
    }
    const DeviceMesh& mesh = t.spec().mesh;
    const std::vector<Placement> replicated(mesh.ndim(), Replicate{});
    rank.set_tensor(out_, redistribute(t, mesh, replicated, rank.backend(), groups_of(rank),
                                       warnings_of(rank), devices_per_host(rank, mesh))
                              .local());
  }
  bool full_ = false;
  std::string tensor_, out_;
};

std::string out_name(const toml::table& args, std::string_view what, LoadContext& ctx,
                     LoadContext::TensorFacts facts) {
  std::string out = ctx.string_of(ctx.require(args, "out", what), "out");
  ctx.declare_tensor(out, std::move(facts));
  return out;
}

}  // namespace

void register_dtensor_steps(StepRegistry& r) {
  r.add(
      "redistribute", "{ tensor, placements, shard_order, mesh, out }",
      "DTensor.redistribute with the collectives it issues (out defaults to tensor)",
      [](const toml::node& value, const toml::table&, LoadContext& ctx) -> std::unique_ptr<Step> {
        const toml::table& args = ctx.table_of(value, "redistribute");
        ctx.only_keys(args, {"tensor", "placements", "shard_order", "mesh", "out"}, "redistribute");
        auto step = std::make_unique<RedistributeStep>();
        step->tensor_ = ctx.tensor_name(args, "tensor", "redistribute");
        LoadContext::TensorFacts facts = ctx.tensor_facts(step->tensor_);
        if (const toml::node* m = args.get("mesh")) {
          step->mesh_ = ctx.string_of(*m, "mesh");
          ctx.require_mesh(*m, step->mesh_);
          facts.mesh = step->mesh_;
        }
        // Checked against the tensor's dims and mesh where the file tells them.
        step->placements_ = placements_of(ctx.require(args, "placements", "redistribute"), ctx,
                                          facts.mesh, facts.ndim);
        if (const toml::node* order = args.get("shard_order"))
          step->shard_order_ = shard_order_of(*order, ctx);
        step->out_ = step->tensor_;
        if (args.contains("out")) step->out_ = out_name(args, "redistribute", ctx, facts);
        return step;
      });
  for (const bool full : {true, false}) {
    const char* key = full ? "full_tensor" : "to_local";
    r.add(key, "{ tensor, out }",
          full ? "DTensor.full_tensor(): the whole tensor on every rank of its mesh (collective)"
               : "DTensor.to_local(): this rank's shard as a plain tensor",
          [full, key](const toml::node& value, const toml::table&,
                      LoadContext& ctx) -> std::unique_ptr<Step> {
            const toml::table& args = ctx.table_of(value, key);
            ctx.only_keys(args, {"tensor", "out"}, key);
            auto step = std::make_unique<ToTensorStep>();
            step->full_ = full;
            step->tensor_ = ctx.tensor_name(args, "tensor", key);
            step->out_ = out_name(args, key, ctx, {ctx.tensor_facts(step->tensor_).ndim, ""});
            return step;
          });
  }
}

}  // namespace meshsim::sim
