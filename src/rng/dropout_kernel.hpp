// torch.nn.functional.dropout on CUDA as meshsim predicts it: ATen's fused dropout kernel, which
// draws curand_uniform4 per thread like the distribution kernels but lays elements out its own
// way, choosing a vectorized variant by the input's alignment and size (docs/random.md).
#pragma once

#include <cstdint>

#include "src/rng/gpu_profile.hpp"
#include "src/rng/philox_state.hpp"
#include "src/tensor/tensor.hpp"

namespace meshsim {

// F.dropout's own check: ValueError "dropout probability has to be between 0 and 1, but got p".
void check_dropout_probability(double p);
// That check, then the kernel's dispatch: RuntimeError (AT_DISPATCH's text) for a dtype that is
// not floating.
void check_dropout(DType dtype, double p);

// Whether F.dropout(x, p, training) runs the fused CUDA kernel (and so draws): training, 0 < p < 1
// and at least one element. Otherwise it returns x itself, or x * 0 for p = 1, drawing nothing.
bool dropout_draws(double p, bool training, int64_t numel);

// How far the fused kernel moves the generator's offset over `numel` elements (> 0): four words
// per thread per run of its grid, whatever its vector size.
uint64_t dropout_counter_offset(int64_t numel, const GpuProfile& gpu);

// How many elements each thread handles per iteration: 8, 4 or 2 (vectorized loads of 16 bytes
// at most, only where the input's address allows it and the size leaves no remainder), or 1 for
// the unrolled kernel. `input_byte_offset`: where the input starts in its allocation, which the
// caching allocator aligns to 512 bytes.
int dropout_vector_size(int64_t numel, DType dtype, uint64_t input_byte_offset);

// F.dropout(input, p) in training on a generator in `state`: each element kept where its uniform
// is below 1 - p and scaled by 1 / (1 - p) (computed in float, double for double tensors), zero
// (times the input, so NaN stays NaN) elsewhere; `state.offset` advanced as the kernel does.
// Throws what check_dropout throws.
Tensor predict_dropout(PhiloxState& state, const Tensor& input, double p, const GpuProfile& gpu,
                       uint64_t input_byte_offset = 0);

}  // namespace meshsim
