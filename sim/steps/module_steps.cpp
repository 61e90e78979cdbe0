// nn.Linear and its parallelisation, as docs/rng.md 3.4's seed tests build it: `linear`,
// `parallelize` (ColwiseParallel / RowwiseParallel), `fully_shard`, `to_empty` and
// `reset_parameters`.
#include <fmt/format.h>

#include "sim/run/rank_state.hpp"
#include "sim/steps/step_kinds.hpp"

namespace meshsim::sim {

namespace {

std::string weight_of(const std::string& module) {
  return module + ".weight";
}
std::string bias_of(const std::string& module) {
  return module + ".bias";
}

// reset_parameters' two draws; plain tensors draw from the default generator, DTensors through
// DTensor's dispatcher. A zero-element weight is left alone, as kaiming_uniform_ does.
void reset_parameters(RankState& rank, const Step& step, const std::string& module) {
  const RankState::LinearModule& m = rank.module(module);
  auto draw = [&](const std::string& name, double bound, const char* init) {
    rank.random_in_place(step, name,
                         RandomOp{RandomOp::Kind::kUniform, -bound, bound,
                                  fmt::format("{}(bound {:.6g})", init, bound)});
  };
  if (m.in > 0 && m.out > 0)
    draw(weight_of(module), kaiming_uniform_bound(m.in), "kaiming_uniform_");
  if (m.bias) draw(bias_of(module), linear_bias_bound(m.in), "uniform_");
}

// `linear = { name, in, out, bias = true, dtype, meta = false }`: nn.Linear, whose constructor
// initialises its parameters (a draw, unless they are on the meta device).
class LinearStep final : public Step {
 public:
  void run(RankState& rank) const override {
    const auto storage = meta_ ? Tensor::Storage::kMeta : Tensor::Storage::kMaterialized;
    rank.set_module(name_, module_);
    rank.set_tensor(weight_of(name_), Tensor({module_.out, module_.in}, dtype_, storage));
    if (module_.bias) rank.set_tensor(bias_of(name_), Tensor({module_.out}, dtype_, storage));
    reset_parameters(rank, *this, name_);
  }
  std::string name_;
  RankState::LinearModule module_;
  DType dtype_ = DType::kFloat32;
  bool meta_ = false;
};

// parallelize, fully_shard, to_empty and reset_parameters: one module, parameter by parameter.
class ModuleStep final : public Step {
 public:
  enum class Kind { kParallelize, kFullyShard, kToEmpty, kResetParameters };
  void run(RankState& rank) const override {
    const RankState::LinearModule& m = rank.module(module_);
    if (kind_ == Kind::kResetParameters) {
      reset_parameters(rank, *this, module_);
      return;
    }
    std::vector<std::string> names{weight_of(module_)};
    if (m.bias) names.push_back(bias_of(module_));
    for (const std::string& name : names) {
      const Parameter& p = rank.value(name);
      switch (kind_) {
        case Kind::kParallelize:
          rank.set_dtensor(name,
                           parallelize_parameter(p, name != names[0], rank.mesh(mesh_), style_));
          break;
        case Kind::kFullyShard:
          rank.set_dtensor(name, fully_shard_parameter(p, rank.mesh(mesh_)));
          break;
        case Kind::kToEmpty:
          // Real storage for meta parameters (PyTorch leaves it uninitialised; meshsim zeroes it).
          if (const DTensor* d = std::get_if<DTensor>(&p)) {
            rank.set_dtensor(name, DTensor::zeros(d->spec()));
          } else {
            const Tensor& t = std::get<Tensor>(p);
            rank.set_tensor(name, Tensor(t.shape(), t.dtype()));
          }
          break;
        case Kind::kResetParameters:
          break;
      }
    }
  }
  Kind kind_ = Kind::kToEmpty;
  std::string module_;
  std::string mesh_;
  TpStyle style_ = TpStyle::kColwise;
};

std::string module_of(const toml::node& node, const LoadContext& ctx) {
  const std::string name = ctx.string_of(node, "module");
  if (!ctx.has_module(name))
    ctx.fail(node, fmt::format("no module \"{}\" is created before this (linear = {{ name, ... }})",
                               name));
  return name;
}

StepParser module_parser(ModuleStep::Kind kind, std::string_view key) {
  return [kind, key](const toml::node& value, const toml::table&,
                     LoadContext& ctx) -> std::unique_ptr<Step> {
    auto step = std::make_unique<ModuleStep>();
    step->kind_ = kind;
    if (kind == ModuleStep::Kind::kToEmpty || kind == ModuleStep::Kind::kResetParameters) {
      step->module_ = module_of(value, ctx);
      return step;
    }
    const toml::table* args = value.as_table();
    if (args == nullptr) ctx.fail(value, fmt::format("{} must be a table of arguments", key));
    if (kind == ModuleStep::Kind::kParallelize) {
      ctx.only_keys(*args, {"module", "mesh", "style"}, key);
      const toml::node& style = ctx.require(*args, "style", key);
      const std::optional<TpStyle> s = parse_tp_style(ctx.string_of(style, "style"));
      if (!s)
        ctx.fail(style,
                 "style must be \"colwise\" (ColwiseParallel) or \"rowwise\" (RowwiseParallel)");
      step->style_ = *s;
    } else {
      ctx.only_keys(*args, {"module", "mesh"}, key);
    }
    step->module_ = module_of(ctx.require(*args, "module", key), ctx);
    const toml::node& mesh = ctx.require(*args, "mesh", key);
    step->mesh_ = ctx.string_of(mesh, "mesh");
    ctx.require_mesh(mesh, step->mesh_);
    return step;
  };
}

}  // namespace

void register_module_steps(StepRegistry& r) {
  r.add("linear", "{ name, in, out, bias = true, dtype, meta = false }", "nn.Linear",
        [](const toml::node& value, const toml::table&, LoadContext& ctx) -> std::unique_ptr<Step> {
          const toml::table* args = value.as_table();
          if (args == nullptr) ctx.fail(value, "linear must be a table { name, in, out, ... }");
          ctx.only_keys(*args, {"name", "in", "out", "bias", "dtype", "meta"}, "linear");
          auto step = std::make_unique<LinearStep>();
          step->name_ = ctx.string_of(ctx.require(*args, "name", "linear"), "name");
          for (auto [key, field] :
               {std::pair{"in", &step->module_.in}, std::pair{"out", &step->module_.out}}) {
            const toml::node& n = ctx.require(*args, key, "linear");
            *field = ctx.integer_of(n, key);
            if (*field < 0) ctx.fail(n, fmt::format("{} must be zero or positive", key));
          }
          if (const toml::node* b = args->get("bias"))
            step->module_.bias = ctx.boolean_of(*b, "bias");
          if (const toml::node* m = args->get("meta")) step->meta_ = ctx.boolean_of(*m, "meta");
          if (const toml::node* d = args->get("dtype")) {
            const std::optional<DType> dt = parse_dtype(ctx.string_of(*d, "dtype"));
            if (!dt || !is_floating(*dt)) ctx.fail(*d, "dtype must be a floating dtype");
            step->dtype_ = *dt;
          }
          ctx.declare_module(step->name_);
          ctx.declare_tensor(weight_of(step->name_));
          if (step->module_.bias) ctx.declare_tensor(bias_of(step->name_));
          return step;
        });
  r.add("parallelize", "{ module, mesh (the TP mesh), style = colwise | rowwise }",
        "parallelize_module", module_parser(ModuleStep::Kind::kParallelize, "parallelize"));
  r.add("fully_shard", "{ module, mesh (the DP mesh) }", "FSDP2's fully_shard",
        module_parser(ModuleStep::Kind::kFullyShard, "fully_shard"));
  r.add("to_empty", "\"module\"", "module.to_empty(device): real storage for meta parameters",
        module_parser(ModuleStep::Kind::kToEmpty, "to_empty"));
  r.add("reset_parameters", "\"module\"",
        "module.reset_parameters(): kaiming_uniform_ weight and uniform_ bias",
        module_parser(ModuleStep::Kind::kResetParameters, "reset_parameters"));
}

}  // namespace meshsim::sim
