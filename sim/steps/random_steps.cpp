// DTensors and random numbers: `dtensor`, torch's and DTensor's `manual_seed`, the `rand` /
// `randn` factories, the in-place random ops, and `distribute_region`.
#include <fmt/format.h>

#include "sim/run/query.hpp"
#include "sim/run/rank_state.hpp"
#include "sim/steps/step_kinds.hpp"
#include "src/rng/dropout_kernel.hpp"

namespace meshsim::sim {

namespace {

// What a DTensor-making step says about the global tensor.
struct DTensorShape {
  std::string mesh;  // empty: a plain tensor of this rank (factories only)
  std::vector<int64_t> shape;
  std::vector<Placement> placements;  // empty: Replicate() on every mesh dim
  std::vector<ShardOrderEntry> shard_order;
  DType dtype = DType::kFloat32;

  DTensorSpec spec(const RankState& rank) const {
    const DeviceMesh& m = rank.mesh(mesh);
    std::vector<Placement> p = placements;
    if (p.empty()) p.assign(m.ndim(), Replicate{});
    if (!shard_order.empty()) p = encode_shard_order(p, shard_order, m.shape());
    return DTensorSpec{m, std::move(p), shape, dtype};
  }
  LoadContext::TensorFacts facts() const { return {shape.size(), mesh}; }
};

DType dtype_of(const toml::node& node, const LoadContext& ctx) {
  const std::string text = ctx.string_of(node, "dtype");
  const std::optional<DType> d = parse_dtype(text);
  if (!d) ctx.fail(node, fmt::format("unknown dtype \"{}\"", text));
  return *d;
}

DTensorShape dtensor_shape_of(const toml::table& args, LoadContext& ctx, std::string_view what,
                              bool mesh_required) {
  DTensorShape out;
  const toml::node& shape = ctx.require(args, "shape", what);
  out.shape = ctx.integers_of(shape, "shape");
  if (out.shape.size() > Tensor::kMaxDims)
    ctx.fail(shape, fmt::format("a tensor has at most {} dims", Tensor::kMaxDims));
  for (int64_t s : out.shape) {
    if (s < 0) ctx.fail(shape, "tensor sizes must be non-negative");
  }
  if (const toml::node* d = args.get("dtype")) out.dtype = dtype_of(*d, ctx);
  const toml::node* mesh = mesh_required ? &ctx.require(args, "mesh", what) : args.get("mesh");
  if (mesh == nullptr) {
    if (args.get("placements")) ctx.fail(*args.get("placements"), "placements need a mesh");
    if (args.get("shard_order")) ctx.fail(*args.get("shard_order"), "shard_order needs a mesh");
    return out;
  }
  out.mesh = ctx.string_of(*mesh, "mesh");
  ctx.require_mesh(*mesh, out.mesh);
  if (const toml::node* p = args.get("placements")) {
    out.placements = placements_of(*p, ctx, out.mesh, out.shape.size());
  }
  if (const toml::node* order = args.get("shard_order")) {
    if (out.placements.empty()) ctx.fail(*order, "shard_order needs placements");
    out.shard_order = shard_order_of(*order, ctx);
  }
  return out;
}

// `dtensor = { name, mesh, shape, placements, dtype, meta }`: zeros laid out over the mesh.
class DTensorStep final : public Step {
 public:
  void run(RankState& rank) const override {
    check_no_mixed_partials(shape_.placements);  // as distribute_tensor does
    DTensor t = fill_indices_
                    ? DTensor::global_indices(shape_.spec(rank))
                    : DTensor::zeros(shape_.spec(rank), meta_ ? Tensor::Storage::kMeta
                                                              : Tensor::Storage::kMaterialized);
    if (requires_grad_ && !is_floating(t.spec().dtype)) {
      throw runtime_error("only Tensors of floating point dtype can require gradients");
    }
    t.set_requires_grad(requires_grad_);
    rank.set_dtensor(name_, std::move(t));
  }
  std::string name_;
  DTensorShape shape_;
  bool meta_ = false;
  bool requires_grad_ = false;  // a parameter's
  bool fill_indices_ = false;   // fill = "index": each element its flat global index
};

// `manual_seed = "expr"` is torch.manual_seed; `manual_seed = { seed, mesh }` is DTensor's.
class ManualSeedStep final : public Step {
 public:
  void run(RankState& rank) const override {
    // Python's seeds are taken modulo 2^64: negative ones in two's complement.
    const auto seed = static_cast<uint64_t>(seed_->evaluate(rank));
    if (mesh_.empty()) {
      rank.rng().manual_seed(seed);
    } else {
      rank.rng().dtensor_manual_seed(seed, rank.mesh(mesh_));
    }
  }
  std::optional<Expression> seed_;
  std::string mesh_;
};

// `rand = { name, shape, mesh, placements, dtype }` (randn alike): DTensor factories with a mesh,
// torch.rand on this rank without one.
class FactoryStep final : public Step {
 public:
  void run(RankState& rank) const override {
    if (shape_.mesh.empty()) {
      rank.set_tensor(name_, Tensor(shape_.shape, shape_.dtype));
      rank.random_in_place(*this, name_, op_);
      return;
    }
    DTensor t = DTensor::zeros(shape_.spec(rank));
    const RankRng::OpResult drawn = rank.rng().random_factory(t, op_, rank.rng_state_broadcast());
    rank.set_dtensor(name_, std::move(t));
    rank.record_draw(*this, name_, drawn);
  }
  std::string name_;
  DTensorShape shape_;
  RandomOp op_;
};

// `rand_like = { name, like, dtype }` (randn_like alike): torch.rand_like on a tensor or a DTensor.
// A DTensor's copy keeps its spec, with Partial dims made Replicate (DTensor's rule for the `_like`
// factories), and draws as the in-place ops do: through the tracker, on the mesh's ranks only.
class LikeFactoryStep final : public Step {
 public:
  void run(RankState& rank) const override {
    const Parameter& like = rank.value(like_);
    if (const auto* t = std::get_if<Tensor>(&like)) {
      rank.set_tensor(name_, Tensor(t->shape(), dtype_.value_or(t->dtype()), storage(*t)));
    } else {
      const DTensor& d = std::get<DTensor>(like);
      DTensorSpec spec = d.spec();
      for (Placement& p : spec.placements) {
        if (std::holds_alternative<Partial>(p)) p = Replicate{};
      }
      if (dtype_) spec.dtype = *dtype_;
      rank.set_dtensor(name_, DTensor::zeros(std::move(spec), storage(d.local())));
    }
    rank.random_in_place(*this, name_, op_);
  }
  std::string name_;
  std::string like_;
  std::optional<DType> dtype_;
  RandomOp op_;

 private:
  static Tensor::Storage storage(const Tensor& t) {
    return t.is_meta() ? Tensor::Storage::kMeta : Tensor::Storage::kMaterialized;
  }
};

StepParser like_parser(RandomOp::Kind kind, std::string_view key) {
  return [kind, key](const toml::node& value, const toml::table&,
                     LoadContext& ctx) -> std::unique_ptr<Step> {
    const toml::table& args = ctx.table_of(value, key);
    ctx.only_keys(args, {"name", "like", "dtype"}, key);
    auto step = std::make_unique<LikeFactoryStep>();
    step->name_ = ctx.string_of(ctx.require(args, "name", key), "name");
    step->like_ = ctx.tensor_name(args, "like", key);
    if (const toml::node* d = args.get("dtype")) step->dtype_ = dtype_of(*d, ctx);
    step->op_ = RandomOp{kind, 0.0, 1.0, std::string(key)};
    ctx.declare_tensor(step->name_, ctx.tensor_facts(step->like_));
    return step;
  };
}

// `uniform_ = { tensor, from, to }`, `normal_ = { tensor, mean, std }`, `bernoulli_ = { tensor,
// p }`, `exponential_ = { tensor, lambda }`, `log_normal_ = { tensor, mean, std }`,
// `geometric_ = { tensor, p }`: in place on a tensor or a DTensor.
class InPlaceRandomStep final : public Step {
 public:
  void run(RankState& rank) const override { rank.random_in_place(*this, tensor_, op_); }
  std::string tensor_;
  RandomOp op_;
};

// `dropout = { tensor, p = 0.5, training = true, out }`: out = F.dropout(tensor, p, training),
// a new tensor or DTensor (the input keeps its values).
class DropoutStep final : public Step {
 public:
  void run(RankState& rank) const override {
    check_dropout_probability(p_);
    const Parameter& input = rank.value(tensor_);
    const DTensor* d = std::get_if<DTensor>(&input);
    const int64_t numel = d != nullptr ? d->spec().numel() : rank.tensor(tensor_).numel();
    if (!dropout_draws(p_, training_, numel)) {
      // No kernel runs: the input as it is, or for p = 1 the input times a zero.
      const bool zeroed = p_ == 1.0 && training_;
      if (d != nullptr) {
        DTensor out = *d;
        if (zeroed) out.set_local(times_zero(d->local()));
        rank.set_dtensor(out_, std::move(out));
      } else {
        const Tensor& t = rank.tensor(tensor_);
        rank.set_tensor(out_, zeroed ? times_zero(t) : t);
      }
      return;
    }
    RandomOp op{RandomOp::Kind::kDropout, p_, 0.0, {}};
    if (d != nullptr) {
      DTensor copy = *d;
      rank.set_dtensor(out_, std::move(copy));
    } else {
      const ViewLayout layout = rank.layout(tensor_);
      if (!layout.is_contiguous()) {
        throw runtime_error(fmt::format(
            "meshsim predicts dropout of contiguous tensors only, and \"{}\" is a non-contiguous "
            "view (the kernel then walks its memory order)",
            tensor_));
      }
      const Tensor& t = rank.tensor(tensor_);
      op.input_byte_offset = static_cast<uint64_t>(layout.storage_offset) * dtype_size(t.dtype());
      rank.set_tensor(out_, t);
    }
    rank.random_in_place(*this, out_, op);
  }
  std::string tensor_;
  std::string out_;
  double p_ = 0.5;
  bool training_ = true;

 private:
  static Tensor times_zero(const Tensor& t) {
    Tensor out(t.shape(), t.dtype(),
               t.is_meta() ? Tensor::Storage::kMeta : Tensor::Storage::kMaterialized);
    if (t.is_meta() || !is_floating(t.dtype())) return out;
    for (int64_t i = 0; i < t.numel(); ++i) out.set(i, t.get(i) * 0.0);  // NaN and inf stay NaN
    return out;
  }
};

class DistributeRegionStep final : public Step {
 public:
  void run(RankState& rank) const override { rank.rng().set_distribute_region_enabled(enabled_); }
  bool enabled_ = true;
};

StepParser factory_parser(RandomOp::Kind kind, std::string_view key) {
  return [kind, key](const toml::node& value, const toml::table&,
                     LoadContext& ctx) -> std::unique_ptr<Step> {
    const toml::table& args = ctx.table_of(value, key);
    ctx.only_keys(args, {"name", "shape", "mesh", "placements", "shard_order", "dtype"}, key);
    auto step = std::make_unique<FactoryStep>();
    step->name_ = ctx.string_of(ctx.require(args, "name", key), "name");
    step->shape_ = dtensor_shape_of(args, ctx, key, false);
    step->op_ = RandomOp{kind, 0.0, 1.0, std::string(key)};
    ctx.declare_tensor(step->name_, step->shape_.facts());
    return step;
  };
}

struct OpKeys {
  std::string_view key;
  RandomOp::Kind kind;
  std::string_view a, b;  // parameter names ("" when the op takes fewer)
  double a_default, b_default;
  bool a_required = false;  // PyTorch gives the first parameter no default
};

StepParser in_place_parser(OpKeys k) {
  return
      [k](const toml::node& value, const toml::table&, LoadContext& ctx) -> std::unique_ptr<Step> {
        auto step = std::make_unique<InPlaceRandomStep>();
        step->op_ = RandomOp{k.kind, k.a_default, k.b_default, {}};
        const toml::node* tensor = &value;
        if (const toml::table* args = value.as_table()) {
          std::vector<std::string_view> keys{"tensor", k.a};
          if (!k.b.empty()) keys.push_back(k.b);
          for (const auto& [name, v] : *args) {
            if (std::find(keys.begin(), keys.end(), name.str()) == keys.end()) {
              throw InputError(ctx.at(name.source()),
                               fmt::format("unknown key \"{}\" in {} (expected: {})", name.str(),
                                           k.key, fmt::join(keys, ", ")));
            }
          }
          tensor = &ctx.require(*args, "tensor", k.key);
          if (const toml::node* a = args->get(k.a)) step->op_.a = ctx.number_of(*a, k.a);
          if (!k.b.empty()) {
            if (const toml::node* b = args->get(k.b)) step->op_.b = ctx.number_of(*b, k.b);
          }
        }
        if (k.a_required && (value.as_table() == nullptr || !value.as_table()->contains(k.a))) {
          ctx.fail(value, fmt::format("{} needs {}: {{ tensor, {} }}", k.key, k.a, k.a));
        }
        step->tensor_ = ctx.string_of(*tensor, "tensor");
        if (!ctx.has_tensor(step->tensor_))
          ctx.fail(*tensor, fmt::format("no tensor \"{}\" is set before this", step->tensor_));
        return step;
      };
}

}  // namespace

void register_random_steps(StepRegistry& r) {
  r.add("dtensor",
        "{ name, mesh, shape, placements = [\"Shard(0)\", ...], shard_order, dtype, meta, fill = "
        "\"index\", requires_grad }",
        "a zero DTensor",
        [](const toml::node& value, const toml::table&, LoadContext& ctx) -> std::unique_ptr<Step> {
          const toml::table& args = ctx.table_of(value, "dtensor");
          ctx.only_keys(args,
                        {"name", "mesh", "shape", "placements", "shard_order", "dtype", "meta",
                         "fill", "requires_grad"},
                        "dtensor");
          auto step = std::make_unique<DTensorStep>();
          step->name_ = ctx.string_of(ctx.require(args, "name", "dtensor"), "name");
          step->shape_ = dtensor_shape_of(args, ctx, "dtensor", true);
          if (const toml::node* m = args.get("meta")) step->meta_ = ctx.boolean_of(*m, "meta");
          if (const toml::node* g = args.get("requires_grad")) {
            step->requires_grad_ = ctx.boolean_of(*g, "requires_grad");
          }
          if (const toml::node* f = args.get("fill")) {
            if (ctx.string_of(*f, "fill") != "index")
              ctx.fail(*f, "fill = \"index\" is the only fill: each element its flat global index");
            if (step->meta_) ctx.fail(*f, "a meta DTensor has no values to fill");
            step->fill_indices_ = true;
          }
          ctx.declare_tensor(step->name_, step->shape_.facts());
          return step;
        });
  r.add("manual_seed", "\"seed\" or { seed, mesh }",
        "torch.manual_seed(seed), or DTensor's manual_seed on a mesh",
        [](const toml::node& value, const toml::table&, LoadContext& ctx) -> std::unique_ptr<Step> {
          auto step = std::make_unique<ManualSeedStep>();
          if (const toml::table* args = value.as_table()) {
            ctx.only_keys(*args, {"seed", "mesh"}, "manual_seed");
            step->seed_ = ctx.expression_of(ctx.require(*args, "seed", "manual_seed"), "seed");
            const toml::node& mesh = ctx.require(*args, "mesh", "manual_seed");
            step->mesh_ = ctx.string_of(mesh, "mesh");
            ctx.require_mesh(mesh, step->mesh_);
          } else {
            step->seed_ = ctx.expression_of(value, "seed");
          }
          return step;
        });
  r.add("rand", "{ name, shape, mesh, placements, shard_order, dtype }",
        "torch.rand / distributed.tensor.rand", factory_parser(RandomOp::Kind::kUniform, "rand"));
  r.add("randn", "{ name, shape, mesh, placements, shard_order, dtype }",
        "torch.randn / distributed.tensor.randn", factory_parser(RandomOp::Kind::kNormal, "randn"));
  r.add("rand_like", "{ name, like, dtype }",
        "torch.rand_like (a DTensor's spec, Partial made Replicate)",
        like_parser(RandomOp::Kind::kUniform, "rand_like"));
  r.add("randn_like", "{ name, like, dtype }",
        "torch.randn_like (a DTensor's spec, Partial made Replicate)",
        like_parser(RandomOp::Kind::kNormal, "randn_like"));
  r.add("uniform_", "{ tensor, from = 0, to = 1 }", "Tensor.uniform_",
        in_place_parser({"uniform_", RandomOp::Kind::kUniform, "from", "to", 0.0, 1.0}));
  r.add("normal_", "{ tensor, mean = 0, std = 1 }", "Tensor.normal_",
        in_place_parser({"normal_", RandomOp::Kind::kNormal, "mean", "std", 0.0, 1.0}));
  r.add("bernoulli_", "{ tensor, p = 0.5 }", "Tensor.bernoulli_",
        in_place_parser({"bernoulli_", RandomOp::Kind::kBernoulli, "p", "", 0.5, 0.0}));
  r.add("exponential_", "{ tensor, lambda = 1 }", "Tensor.exponential_",
        in_place_parser({"exponential_", RandomOp::Kind::kExponential, "lambda", "", 1.0, 0.0}));
  r.add("dropout", "{ tensor, p = 0.5, training = true, out }",
        "torch.nn.functional.dropout (ATen's fused CUDA kernel; a DTensor draws through the "
        "tracker)",
        [](const toml::node& value, const toml::table&, LoadContext& ctx) -> std::unique_ptr<Step> {
          const toml::table& args = ctx.table_of(value, "dropout");
          ctx.only_keys(args, {"tensor", "p", "training", "out"}, "dropout");
          auto step = std::make_unique<DropoutStep>();
          step->tensor_ = ctx.tensor_name(args, "tensor", "dropout");
          if (const toml::node* p = args.get("p")) step->p_ = ctx.number_of(*p, "p");
          if (const toml::node* t = args.get("training"))
            step->training_ = ctx.boolean_of(*t, "training");
          step->out_ = ctx.string_of(ctx.require(args, "out", "dropout"), "out");
          ctx.declare_tensor(step->out_, ctx.tensor_facts(step->tensor_));
          return step;
        });
  r.add("log_normal_", "{ tensor, mean = 1, std = 2 }", "Tensor.log_normal_",
        in_place_parser({"log_normal_", RandomOp::Kind::kLogNormal, "mean", "std", 1.0, 2.0}));
  r.add("geometric_", "{ tensor, p }", "Tensor.geometric_",
        in_place_parser({"geometric_", RandomOp::Kind::kGeometric, "p", "", 0.0, 0.0, true}));
  r.add("distribute_region", "true | false",
        "set the DTensor RNG tracker's distribute_region_enabled",
        [](const toml::node& value, const toml::table&, LoadContext& ctx) -> std::unique_ptr<Step> {
          auto step = std::make_unique<DistributeRegionStep>();
          step->enabled_ = ctx.boolean_of(value, "distribute_region");
          return step;
        });
}

}  // namespace meshsim::sim
