#include "src/rng/rank_rng.hpp"

#include <fmt/format.h>

#include "src/enum_names.hpp"
#include "src/error.hpp"
#include "src/rng/cuda_random_kernel.hpp"
#include "src/rng/dropout_kernel.hpp"
#include "src/rng/dtensor_rng_offsets.hpp"

namespace meshsim {

namespace {

// Only CUDA generators are modelled: a CPU mesh would draw from mt19937 instead of Philox.
void require_cuda(const DeviceMesh& mesh) {
  if (mesh.device_type() != "cuda") {
    throw Error(PyErrorType::kNotImplementedError,
                fmt::format("meshsim models DTensor random ops on CUDA meshes only, not on a "
                            "\"{}\" mesh",
                            mesh.device_type()));
  }
}

}  // namespace

uint64_t add_offset(uint64_t offset, int64_t increment) {
  const uint64_t inc = static_cast<uint64_t>(increment);
  if (offset > UINT64_MAX - inc) {
    throw overflow_error(fmt::format("the generator's offset {} + {} passes 2^64", offset, inc));
  }
  return offset + inc;
}

constexpr EnumName<RngProfile> kRngProfileNames[] = {
    {RngProfile::kLatest, "latest"},
    {RngProfile::kTorch26, "2.6"},
};

std::string_view rng_profile_name(RngProfile profile) {
  return name_in(kRngProfileNames, profile);
}

std::optional<RngProfile> parse_rng_profile(std::string_view text) {
  if (const std::optional<RngProfile> named = value_in(kRngProfileNames, text)) return named;
  // 2.9 and every later 2.x release behave as the latest.
  if (text.starts_with("2.")) {
    int minor = 0;
    const std::string_view digits = text.substr(2);
    if (digits.empty() || digits.size() > 3) return std::nullopt;
    for (char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      minor = minor * 10 + (c - '0');
    }
    if (minor >= 9) return RngProfile::kLatest;
  }
  return std::nullopt;
}

std::string RandomOp::describe() const {
  if (!label.empty()) return label;
  switch (kind) {
    case Kind::kUniform:
      return fmt::format("uniform_({}, {})", a, b);
    case Kind::kNormal:
      return fmt::format("normal_({}, {})", a, b);
    case Kind::kBernoulli:
      return fmt::format("bernoulli_({})", a);
    case Kind::kExponential:
      return fmt::format("exponential_({})", a);
    case Kind::kLogNormal:
      return fmt::format("log_normal_({}, {})", a, b);
    case Kind::kGeometric:
      return fmt::format("geometric_({})", a);
    case Kind::kDropout:
      return fmt::format("dropout({})", a);
  }
  return "?";
}

bool RandomOp::dtensor_random() const {
  return kind != Kind::kExponential && kind != Kind::kLogNormal && kind != Kind::kGeometric;
}

constexpr EnumName<Draw::Generator> kGeneratorNames[] = {
    {Draw::Generator::kDefault, "cuda default"},
    {Draw::Generator::kTracker, "DTensor tracker"},
};

std::string_view generator_name(Draw::Generator g) {
  return name_in(kGeneratorNames, g);
}

std::optional<Draw::Generator> parse_generator(std::string_view name) {
  return value_in(kGeneratorNames, name);
}

std::optional<PhiloxState> RankRng::tracker_state() const {
  if (!tracker_ || profile_ != RngProfile::kTorch26) return std::nullopt;
  return tracker_->state;
}

bool RankRng::distribute_region_enabled() const {
  return tracker_ ? tracker_->distribute_region : true;
}

void RankRng::set_distribute_region_enabled(bool enabled) {
  if (!tracker_) {
    // random._rng_tracker is still None in PyTorch.
    throw Error(PyErrorType::kAttributeError,
                "'NoneType' object has no attribute 'distribute_region_enabled' (no DTensor RNG "
                "tracker yet: manual_seed or a first DTensor random op creates it)");
  }
  tracker_->distribute_region = enabled;
}

void RankRng::dtensor_manual_seed(uint64_t seed, const DeviceMesh& mesh) {
  require_cuda(mesh);
  if (!tracker_) tracker_ = Tracker{default_, true};  // no broadcast: run_state_sync=False
  if (!mesh.coordinate()) {
    throw runtime_error(
        "manual_seed requires the current rank to be a part of the device mesh otherwise DTensor "
        "RNG state on the rank will not be initialized and the behavior of DTensor random ops is "
        "undefined.");
  }
  dtensor_generator() = PhiloxState{seed, 0};
  ++(profile_ == RngProfile::kLatest ? default_epoch_ : tracker_epoch_);
}

RankRng::Snapshot RankRng::snapshot() const {
  Snapshot s;
  s.profile = profile_;
  s.default_generator = default_;
  s.has_tracker = tracker_.has_value();
  if (tracker_) {
    s.tracker_state = tracker_->state;
    s.distribute_region = tracker_->distribute_region;
  }
  return s;
}

void RankRng::restore(const Snapshot& saved) {
  if (saved.profile != profile_) {
    throw runtime_error(fmt::format(
        "the RNG state was saved with the torch {} profile and cannot resume under torch {}",
        rng_profile_name(saved.profile), rng_profile_name(profile_)));
  }
  default_ = saved.default_generator;
  tracker_.reset();
  if (saved.has_tracker) tracker_ = Tracker{saved.tracker_state, saved.distribute_region};
  ++default_epoch_;
  ++tracker_epoch_;
}

bool RankRng::create_tracker_synced(const BroadcastFromRank0& broadcast) {
  const PhiloxState mine = default_;
  const PhiloxState rank0 = broadcast(mine);
  tracker_ = Tracker{rank0, true};
  if (profile_ == RngProfile::kLatest) default_ = rank0;
  return !(rank0 == mine);
}

PhiloxState& RankRng::dtensor_generator() {
  return profile_ == RngProfile::kLatest ? default_ : tracker_->state;
}

void check_arguments(const RandomOp& op, DType dtype) {
  switch (op.kind) {
    case RandomOp::Kind::kUniform:
      check_uniform_bounds(dtype, op.a, op.b);
      return;
    case RandomOp::Kind::kNormal:
      check_normal(dtype, op.b);
      return;
    case RandomOp::Kind::kBernoulli:
      check_bernoulli(op.a);
      return;
    case RandomOp::Kind::kExponential:
      check_exponential(dtype, op.a);
      return;
    case RandomOp::Kind::kLogNormal:
      check_log_normal(dtype, op.b);
      return;
    case RandomOp::Kind::kGeometric:
      check_geometric(dtype, op.a);
      return;
    case RandomOp::Kind::kDropout:
      check_dropout(dtype, op.a);
      return;
  }
}

std::optional<Draw> RankRng::draw_local(Tensor& t, const RandomOp& op, PhiloxState& state,
                                        Draw::Generator g) {
  check_arguments(op, t.dtype());
  if (t.is_meta()) return std::nullopt;  // meta tensors consume nothing
  Draw d;
  d.generator = g;
  d.seed = state.seed;
  d.offset = state.offset;
  d.numel = t.numel();
  d.op = op.describe();
  d.seed_epoch = g == Draw::Generator::kDefault ? default_epoch_ : tracker_epoch_;
  Tensor values;
  if (runner_ != nullptr &&
      (op.kind == RandomOp::Kind::kUniform || op.kind == RandomOp::Kind::kNormal)) {
    // The launch and the offset advance are the prediction's; the values are the runner's.
    const KernelLaunch launch = KernelLaunch::plan(t.numel(), t.dtype(), gpu_);
    values =
        launch.numel == 0 ? Tensor({0}, t.dtype()) : runner_->run(state, launch, op, t.dtype());
    state.offset += launch.counter_offset;
  } else {
    switch (op.kind) {
      case RandomOp::Kind::kUniform:
        values = predict_uniform(state, t.numel(), t.dtype(), gpu_, op.a, op.b);
        break;
      case RandomOp::Kind::kNormal:
        values = predict_normal(state, t.numel(), t.dtype(), gpu_, op.a, op.b);
        break;
      case RandomOp::Kind::kBernoulli:
        values = predict_bernoulli(state, t.numel(), t.dtype(), gpu_, op.a);
        break;
      case RandomOp::Kind::kExponential:
        values = predict_exponential(state, t.numel(), t.dtype(), gpu_, op.a);
        break;
      case RandomOp::Kind::kLogNormal:
        values = predict_log_normal(state, t.numel(), t.dtype(), gpu_, op.a, op.b);
        break;
      case RandomOp::Kind::kGeometric:
        values = predict_geometric(state, t.numel(), t.dtype(), gpu_, op.a);
        break;
      case RandomOp::Kind::kDropout:
        values = predict_dropout(state, t, op.a, gpu_, op.input_byte_offset);
        break;
    }
  }
  t = values.reshaped(t.shape());
  d.words = state.offset - d.offset;
  if (d.words == 0) return std::nullopt;  // an empty tensor draws nothing
  return d;
}

uint64_t random_op_words(const RandomOp& op, int64_t numel, DType dtype, const GpuProfile& gpu) {
  if (numel <= 0) return 0;
  // The plan refuses sizes past one launch for every op (dropout's kernel shares the limit).
  const KernelLaunch launch = KernelLaunch::plan(numel, dtype, gpu);
  return op.kind == RandomOp::Kind::kDropout ? dropout_counter_offset(numel, gpu)
                                             : launch.counter_offset;
}

RankRng::OpResult RankRng::random_(Tensor& t, const RandomOp& op) {
  return {draw_local(t, op, default_, Draw::Generator::kDefault), false};
}

RankRng::OpResult RankRng::run_local(DTensor& t, const RandomOp& op, PhiloxState& state,
                                     const DTensorRngOffsets& off) {
  Tensor local = t.local();
  OpResult r{draw_local(local, op, state, Draw::Generator::kDefault), false};
  if (r.draw) r.draw->shard_index = off.shard_linear_index;
  t.set_local(std::move(local));
  return r;
}

RankRng::OpResult RankRng::in_distribute_region(DTensor& t, const RandomOp& op,
                                                const DTensorRngOffsets& off) {
  PhiloxState& gen = dtensor_generator();
  const uint64_t old = gen.offset;
  PhiloxState state{gen.seed, add_offset(old, off.pre_op_increment)};
  Tensor local = t.local();
  OpResult out{draw_local(local, op, state,
                          profile_ == RngProfile::kLatest ? Draw::Generator::kDefault
                                                          : Draw::Generator::kTracker),
               false};
  if (out.draw) {
    out.draw->shard_index = off.shard_linear_index;
    out.draw->in_distribute_region = true;
  }
  t.set_local(std::move(local));
  gen.offset = add_offset(old, off.post_op_increment);
  return out;
}

RankRng::OpResult RankRng::random_(DTensor& t, const RandomOp& op,
                                   const BroadcastFromRank0& broadcast) {
  const DTensorSpec& spec = t.spec();
  require_cuda(spec.mesh);
  if (!t.participates()) return {};  // DTensor's dispatcher runs nothing off the mesh
  const DTensorRngOffsets off =
      dtensor_rng_offsets(spec.shape, spec.mesh.shape(), *spec.mesh.coordinate(), spec.placements);
  // exponential_, log_normal_ and geometric_ are not among DTensor's random ops: no tracker, no
  // offsets.
  const bool dtensor_random = op.dtensor_random();
  bool overwritten = false;
  if (dtensor_random && !tracker_) overwritten = create_tracker_synced(broadcast);
  OpResult r = dtensor_random && !t.local().is_meta() && tracker_->distribute_region
                   ? in_distribute_region(t, op, off)
                   : run_local(t, op, default_, off);
  r.state_overwritten_by_rank0 = overwritten;
  return r;
}

RankRng::OpResult RankRng::random_factory(DTensor& out, const RandomOp& op,
                                          const BroadcastFromRank0& broadcast) {
  const DTensorSpec& spec = out.spec();
  require_cuda(spec.mesh);
  bool overwritten = false;
  if (!tracker_) overwritten = create_tracker_synced(broadcast);
  OpResult r;
  if (!tracker_->distribute_region) {
    // The op runs on the device generator inside _distribute_region. The latest release then
    // puts back the state it read before: the generator does not move. 2.6 leaves it moved.
    PhiloxState copy = default_;
    PhiloxState& state = profile_ == RngProfile::kLatest ? copy : default_;
    Tensor local = out.local();
    r.draw = draw_local(local, op, state, Draw::Generator::kDefault);
    out.set_local(std::move(local));
  } else if (!out.participates()) {
    throw Error(PyErrorType::kAssertionError,
                "this rank is not in the DTensor's mesh: PyTorch's _compute_rng_offsets asserts "
                "on the missing coordinate (DeviceMesh._sym_get_coordinate)");
  } else {
    r = in_distribute_region(out, op,
                             dtensor_rng_offsets(spec.shape, spec.mesh.shape(),
                                                 *spec.mesh.coordinate(), spec.placements));
  }
  r.state_overwritten_by_rank0 = overwritten;
  return r;
}

}  // namespace meshsim
