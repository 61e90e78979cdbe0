// PyTorch's elementwise CUDA random kernels as meshsim predicts them (docs/rng.md 2.3-2.5): how a
// launch is shaped on a given GPU, which Philox word each element takes, how words become numbers,
// and how far the generator's offset moves.
#pragma once

#include <cstdint>
#include <span>

#include "src/rng/gpu_profile.hpp"
#include "src/rng/philox.hpp"
#include "src/rng/philox_state.hpp"
#include "src/tensor/dtype.hpp"
#include "src/tensor/tensor.hpp"

namespace meshsim {

// The threads a CUDA random kernel launches for `numel` elements: blocks of 256, at most the GPU's
// cap of them (the distribution kernels and dropout shape their grid alike).
int64_t random_kernel_threads(int64_t numel, const GpuProfile& gpu);

// One launch of the distribution kernel over `numel` contiguous elements.
struct KernelLaunch {
  int64_t numel = 0;
  int64_t grid = 0;    // blocks of 256 threads: min(ceil(numel / 256), the GPU's cap)
  int64_t stride = 0;  // 256 * grid threads
  int64_t unroll = 0;  // elements per thread per Philox draw: 4 (32- and 16-bit floats), 2 (double)
  // How far the generator's offset moves, before the kernel runs (0 when numel is 0).
  uint64_t counter_offset = 0;

  // Any dtype (bernoulli_ writes integers and bool; the distributions check theirs). Throws
  // meshsim::Error (RuntimeError) for tensors whose byte offsets pass 2^31 - 1 (PyTorch splits
  // those into several launches, which is not modelled).
  static KernelLaunch plan(int64_t numel, DType dtype, const GpuProfile& gpu);
};

// Where element `index` of the output takes its random words from.
struct ElementSource {
  uint64_t call;      // the thread's k-th Philox draw: counter block offset / 4 + call
  int64_t component;  // which of the draw's outputs (float: word; double: word pair)
  uint64_t thread;    // the Philox subsequence
};
ElementSource element_source(const KernelLaunch& launch, uint64_t index);

// curand_uniform: (0, 1] from one word; curand_uniform2_double: (0, 1] from two.
float uniform_from_word(uint32_t x);
double uniform_from_words(uint32_t x, uint32_t y);

// torch.rand / Tensor.uniform_(from, to) on a CUDA generator in `state`: the tensor the kernel
// writes (float32, float64, float16 or bfloat16; shape [numel]), and `state.offset` advanced as
// the kernel advances it. Values equal to `to` after rounding become `from`, as PyTorch does.
// `u * range + from` is one fused multiply-add, as nvcc compiles it by default; it only matters
// in the last bit, and only when from is not 0.
// PyTorch's argument checks, with its messages (RuntimeError): check_uniform_bounds for a
// non-floating dtype, bounds outside the dtype, from > to, or a range wider than the dtype's
// largest value; normal_'s std < 0 and dtype; bernoulli_'s p outside [0, 1]; exponential_'s
// lambda <= 0 and dtype. PyTorch checks them on meta tensors too.
void check_uniform_bounds(DType dtype, double from, double to);
void check_normal(DType dtype, double std);
void check_bernoulli(double p);
void check_exponential(DType dtype, double lambda);
// log_normal_'s std <= 0 and non-floating dtype; geometric_'s p outside (0, 1) and bool.
void check_log_normal(DType dtype, double std);
void check_geometric(DType dtype, double p);

// `path` chooses how Philox runs (every path gives the same bits; tests compare them). Throws
// what check_uniform_bounds and KernelLaunch::plan throw.
Tensor predict_uniform(PhiloxState& state, int64_t numel, DType dtype, const GpuProfile& gpu,
                       double from = 0.0, double to = 1.0, PhiloxPath path = best_philox_path());

// torch.rand in float32 into `out` (numel = out.size()), for callers that keep the buffer.
void predict_rand_float32(PhiloxState& state, const GpuProfile& gpu, std::span<float> out,
                          PhiloxPath path = best_philox_path());

// torch.randn / Tensor.normal_(mean, std): Box-Muller on curand_normal4's draws, sine first.
// float32/16 use the GPU's fast sincos and log there, so these agree to about 1e-6
// (docs/rng.md 2.6); float64 computes sin(pi v) where the GPU has sinpi(v): equal to about 1e-15,
// absolute.
Tensor predict_normal(PhiloxState& state, int64_t numel, DType dtype, const GpuProfile& gpu,
                      double mean = 0.0, double std = 1.0);

// Tensor.bernoulli_(p): 1 where the element's (0, 1] uniform is below p (compared in float, or
// in double for double tensors), any dtype. RuntimeError, as PyTorch, for p outside [0, 1].
Tensor predict_bernoulli(PhiloxState& state, int64_t numel, DType dtype, const GpuProfile& gpu,
                         double p);

// Tensor.exponential_(lambda): -1/lambda * log(u), with -eps/2 in place of log(u) where u rounds
// to 1 (PyTorch's CUDA path). The GPU's logf and the host's may differ in the last bit, so the
// prediction is equal to about one float ulp (double: exactly, up to log's last bit).
// RuntimeError for lambda <= 0 and for integer dtypes, with PyTorch's messages.
Tensor predict_exponential(PhiloxState& state, int64_t numel, DType dtype, const GpuProfile& gpu,
                           double lambda);

// Tensor.log_normal_(mean, std): exp(mean + std * n) for predict_normal's draws n, computed in
// float (double for double tensors) before the store, as PyTorch's kernel does: the same offsets
// as normal_, and agreement to about 1e-6 relative, as normal_'s (the GPU's expf adds an ulp).
Tensor predict_log_normal(PhiloxState& state, int64_t numel, DType dtype, const GpuProfile& gpu,
                          double mean, double std);

// Tensor.geometric_(p): ceil(log(u) / log1p(-p)) for each element's (0, 1] uniform, in float (p
// rounded to float) or in double for double tensors; any dtype but bool (integers hold the count;
// a count past the dtype's range is an OverflowError, not modelled as the GPU converts it). The
// GPU's logf may differ from the host's in the last bit, which moves the count only where the
// quotient is within an ulp of an integer.
Tensor predict_geometric(PhiloxState& state, int64_t numel, DType dtype, const GpuProfile& gpu,
                         double p);

}  // namespace meshsim
