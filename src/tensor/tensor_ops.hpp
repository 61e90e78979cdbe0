// Rearranging a tensor along one dim: the narrow, pad, cat and index_select that DTensor's
// redistribution does around its collectives, and the one division it does after them. Meta
// tensors get the shape and no data.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "src/tensor/tensor.hpp"

namespace meshsim {

// `length` consecutive positions of a dim from `start`, or, with start = kZeroPositions,
// `length` positions of zeros (padding).
struct DimPiece {
  static constexpr int64_t kZeroPositions = -1;
  int64_t start;
  int64_t length;
};

// A tensor whose dim `dim` is the pieces one after another (every other dim unchanged). Throws
// meshsim::Error: IndexError for a dim the tensor lacks or a piece outside it, what Tensor's
// constructor throws for the result.
Tensor assemble_along(const Tensor& t, size_t dim, std::span<const DimPiece> pieces);

// t.narrow(dim, start, length).
Tensor narrow(const Tensor& t, size_t dim, int64_t start, int64_t length);
// `count` zero positions appended to dim `dim` (DTensor's pad_tensor; count 0 returns t).
Tensor pad_end(const Tensor& t, size_t dim, int64_t count);
// torch.cat(parts, dim): the parts agree on dtype, rank and every other dim (RuntimeError
// otherwise, and for no parts).
Tensor concat_along(std::span<const Tensor> parts, size_t dim);
// torch.chunk(t, pieces, dim), with empty pieces added up to `pieces` as DTensor does.
std::vector<Tensor> chunk_along(const Tensor& t, size_t dim, int64_t pieces);

// t / divisor, PyTorch's true division: a floating tensor keeps its dtype (each element
// rounded once, as float32 arithmetic does), an integer or bool one becomes float32.
Tensor divided_by(const Tensor& t, int64_t divisor);

}  // namespace meshsim
