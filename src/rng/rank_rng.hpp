// One rank's random state as PyTorch keeps it on a CUDA device: the default generator and, once
// created, DTensor's RNG tracker (docs/rng.md section 3), with the random ops that draw from them.
// Every draw is returned to the caller, which logs it and checks draws across ranks.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/dtensor/dtensor.hpp"
#include "src/rng/dtensor_rng_offsets.hpp"
#include "src/rng/gpu_profile.hpp"
#include "src/rng/philox_state.hpp"
#include "src/rng/random_kernel_runner.hpp"

namespace meshsim {

// Which PyTorch release's DTensor seeding is modelled (docs/rng.md 3.2). The offset arithmetic is
// the same in both.
enum class RngProfile {
  // 2.9 and later (the default): DTensor's manual_seed calls torch.manual_seed, and DTensor ops
  // read and advance the default generator.
  kLatest,
  // 2.6, the change request: the tracker keeps its own state ("parallel-rng"); DTensor ops leave
  // the default generator alone.
  kTorch26,
};
std::string_view rng_profile_name(RngProfile profile);
// "latest" (also "2.9" and later minor versions), or "2.6"; nullopt otherwise.
std::optional<RngProfile> parse_rng_profile(std::string_view text);

// What a random op draws: the kind and its two parameters (from/to, mean/std, p, lambda).
struct RandomOp {
  // kDropout replaces the tensor's values by F.dropout's of them (a: the probability p).
  enum class Kind { kUniform, kNormal, kBernoulli, kExponential, kLogNormal, kGeometric, kDropout };
  Kind kind = Kind::kUniform;
  double a = 0.0;
  double b = 1.0;
  // What the user called, when it is not the in-place op itself ("rand", "kaiming_uniform_").
  std::string label;
  // kDropout: where its input starts in its allocation, in bytes (the kernel vectorizes by it).
  uint64_t input_byte_offset = 0;
  // The label, or "uniform_(-0.5, 0.5)", "normal_(0, 1)", "bernoulli_(0.3)", "exponential_(1)",
  // "log_normal_(1, 2)", "geometric_(0.3)", "dropout(0.2)".
  std::string describe() const;
  // Whether DTensor's dispatcher treats the op as random (PyTorch 2.15's list): the others run
  // on each rank's local shard with its default generator, without the tracker's offsets.
  bool dtensor_random() const;
};

// How far `op`'s kernel moves the generator's offset over `numel` elements of `dtype` on `gpu`
// (a draw's `words`), without drawing. Throws what KernelLaunch::plan throws.
uint64_t random_op_words(const RandomOp& op, int64_t numel, DType dtype, const GpuProfile& gpu);

// `offset + increment`; OverflowError past 2^64.
uint64_t add_offset(uint64_t offset, int64_t increment);

// One kernel's draw from a Philox stream: it consumed counter blocks [offset / 4,
// (offset + words) / 4) of every thread (subsequence) it ran, under `seed`.
struct Draw {
  enum class Generator { kDefault, kTracker };
  Generator generator = Generator::kDefault;
  uint64_t seed = 0;
  uint64_t offset = 0;  // where the kernel started, in 32-bit words
  uint64_t words = 0;   // how far it moved the offset
  int64_t numel = 0;
  std::string op;
  // For DTensor ops: the rank's shard linear index (ranks with equal indices hold replicas), and
  // whether DTensor's distribute region set the offsets (false: the local op ran as is).
  std::optional<int64_t> shard_index;
  bool in_distribute_region = false;
  // How many times this rank had seeded the generator drawn from (torch's or DTensor's
  // manual_seed) before the draw. Draws of different epochs that repeat each other's numbers
  // are a deliberate restart of the stream.
  int64_t seed_epoch = 0;
};
std::string_view generator_name(Draw::Generator g);
// nullopt for a name generator_name never gives.
std::optional<Draw::Generator> parse_generator(std::string_view name);

class RankRng {
 public:
  // The seed of a fresh CUDA generator (c10's default_rng_seed_val).
  static constexpr uint64_t kDefaultSeed = 67280421310721;

  RankRng(RngProfile profile, GpuProfile gpu) : profile_(profile), gpu_(std::move(gpu)) {}

  RngProfile profile() const { return profile_; }
  const GpuProfile& gpu() const { return gpu_; }
  // uniform_ and normal_ kernels run on `runner` instead of the CPU prediction (bernoulli_ and
  // exponential_ stay predicted); the offsets advance the same way either way.
  void set_kernel_runner(std::shared_ptr<RandomKernelRunner> runner) {
    runner_ = std::move(runner);
  }
  const PhiloxState& default_generator() const { return default_; }
  bool has_tracker() const { return tracker_.has_value(); }
  // The tracker's own state (2.6 profile only; nullopt otherwise or before it exists).
  std::optional<PhiloxState> tracker_state() const;
  bool distribute_region_enabled() const;
  // Sets the tracker's flag; AttributeError when no tracker exists (PyTorch's _rng_tracker is
  // None).
  void set_distribute_region_enabled(bool enabled);

  // torch.manual_seed(seed) on this rank's device.
  void manual_seed(uint64_t seed) {
    default_ = PhiloxState{seed, 0};
    ++default_epoch_;
  }
  // torch.distributed.tensor._random.manual_seed(seed, mesh): creates the tracker without a
  // broadcast, then RuntimeError (PyTorch's text) when this rank is not in `mesh`, else seeds.
  void dtensor_manual_seed(uint64_t seed, const DeviceMesh& mesh);

  // The WORLD broadcast of rank 0's 16-byte generator state that lazy tracker creation runs;
  // returns rank 0's state. The caller makes it a real collective.
  using BroadcastFromRank0 = std::function<PhiloxState(const PhiloxState&)>;

  // What one random op did on this rank: the draw (none for meta or skipped ops) and whether the
  // tracker was just created with a state that differed from rank 0's (PyTorch warns).
  struct OpResult {
    std::optional<Draw> draw;
    bool state_overwritten_by_rank0 = false;
  };

  // A random op on a plain tensor of this rank: `t` is overwritten (meta: nothing is drawn).
  OpResult random_(Tensor& t, const RandomOp& op);
  // An in-place random op on a DTensor through DTensor's dispatcher: ranks outside its mesh do
  // nothing; otherwise the tracker is created lazily (with the broadcast) for the ops DTensor
  // counts as random, and the distribute region applies unless the local tensor is meta or the
  // region is disabled. exponential_, log_normal_ and geometric_ are not in DTensor's random-op
  // list (PyTorch 2.15): they run as local ops on every rank of the mesh.
  OpResult random_(DTensor& t, const RandomOp& op, const BroadcastFromRank0& broadcast);
  // torch.distributed.tensor.rand / randn: creates the tracker lazily (with the broadcast) on
  // every rank that calls it, members of the mesh or not, then draws the rank's shard in the
  // distribute region. A rank outside the mesh then fails as PyTorch does (AssertionError: it
  // has no coordinate) unless the region is disabled; with the region disabled the latest
  // release draws from the default generator's state and then restores it.
  OpResult random_factory(DTensor& out, const RandomOp& op, const BroadcastFromRank0& broadcast);

  // What a checkpoint keeps of this rank's random state: enough to resume the same
  // streams.
  struct Snapshot {
    RngProfile profile = RngProfile::kLatest;
    PhiloxState default_generator;
    bool has_tracker = false;
    PhiloxState tracker_state;  // 2.6 profile only
    bool distribute_region = true;
    friend bool operator==(const Snapshot&, const Snapshot&) = default;
  };
  Snapshot snapshot() const;
  // Resumes the saved streams (the next draws repeat those made after the save: a new seed
  // epoch). RuntimeError for a snapshot of the other profile.
  void restore(const Snapshot& saved);

 private:
  struct Tracker {
    PhiloxState state;  // 2.6 only
    bool distribute_region = true;
  };
  // Lazy creation with state sync; returns whether this rank's state changed.
  bool create_tracker_synced(const BroadcastFromRank0& broadcast);
  // The generator DTensor ops read in this profile.
  PhiloxState& dtensor_generator();
  // Checks the op's arguments (on meta tensors too, as PyTorch), then runs the local kernel on
  // `state` into `t` (same shape): the draw, or nullopt for a meta or empty tensor.
  std::optional<Draw> draw_local(Tensor& t, const RandomOp& op, PhiloxState& state,
                                 Draw::Generator g);
  // A DTensor's local op on `state` as is, or inside DTensor's distribute region.
  OpResult run_local(DTensor& t, const RandomOp& op, PhiloxState& state,
                     const DTensorRngOffsets& off);
  OpResult in_distribute_region(DTensor& t, const RandomOp& op, const DTensorRngOffsets& off);

  RngProfile profile_;
  GpuProfile gpu_;
  std::shared_ptr<RandomKernelRunner> runner_;
  PhiloxState default_{kDefaultSeed, 0};
  std::optional<Tracker> tracker_;
  int64_t default_epoch_ = 0;  // seeds of each generator so far (Draw::seed_epoch)
  int64_t tracker_epoch_ = 0;
};

}  // namespace meshsim
