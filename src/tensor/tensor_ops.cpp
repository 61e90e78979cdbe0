#include "src/tensor/tensor_ops.hpp"

#include <cstring>

#include <fmt/format.h>

#include "src/checked_math.hpp"
#include "src/dtensor/local_shard.hpp"
#include "src/error.hpp"

namespace meshsim {

namespace {

void check_dim(const Tensor& t, size_t dim) {
  if (dim >= t.shape().size()) {
    throw Error(PyErrorType::kIndexError, fmt::format("dim {} of {}, which has {} dims", dim,
                                                      t.describe(), t.shape().size()));
  }
}

// Elements before and after `dim`: the tensor is `outer` blocks of shape[dim] rows of `inner`.
struct Blocks {
  int64_t outer = 1;
  int64_t inner = 1;
};
Blocks blocks_around(std::span<const int64_t> shape, size_t dim) {
  Blocks b;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d < dim) b.outer *= shape[d];
    if (d > dim) b.inner *= shape[d];
  }
  return b;  // no overflow: the tensor exists, so its numel fits
}

}  // namespace

Tensor assemble_along(const Tensor& t, size_t dim, std::span<const DimPiece> pieces) {
  check_dim(t, dim);
  const int64_t size = t.shape()[dim];
  int64_t total = 0;
  for (const DimPiece& p : pieces) {
    const bool zeros = p.start == DimPiece::kZeroPositions;
    if (p.length < 0 || (!zeros && (p.start < 0 || p.start > size || p.length > size - p.start))) {
      throw Error(PyErrorType::kIndexError,
                  fmt::format("positions [{}, {} + {}) of dim {} of {}", p.start, p.start, p.length,
                              dim, t.describe()));
    }
    const std::optional<int64_t> sum = checked_add(total, p.length);
    if (!sum) throw runtime_error(fmt::format("dim {} would have more than 2^63 positions", dim));
    total = *sum;
  }
  std::vector<int64_t> shape = t.shape();
  shape[dim] = total;
  if (t.is_meta()) return Tensor(shape, t.dtype(), Tensor::Storage::kMeta);
  Tensor out(shape, t.dtype());
  if (out.nbytes() == 0) return out;
  const Blocks b = blocks_around(shape, dim);
  const size_t row = static_cast<size_t>(b.inner) * dtype_size(t.dtype());
  const std::byte* from = t.bytes().data();
  std::byte* to = out.mutable_bytes().data();
  for (int64_t o = 0; o < b.outer; ++o) {
    const std::byte* block = from + static_cast<size_t>(o * size) * row;
    for (const DimPiece& p : pieces) {
      const size_t bytes = static_cast<size_t>(p.length) * row;
      if (p.start != DimPiece::kZeroPositions && bytes > 0)
        std::memcpy(to, block + static_cast<size_t>(p.start) * row, bytes);
      to += bytes;  // zero positions stay as the constructor left them
    }
  }
  return out;
}

Tensor narrow(const Tensor& t, size_t dim, int64_t start, int64_t length) {
  if (start < 0) {  // DimPiece's kZeroPositions is no position to start from
    throw Error(PyErrorType::kIndexError,
                fmt::format("narrow from position {} of dim {} of {}", start, dim, t.describe()));
  }
  const DimPiece piece{start, length};
  return assemble_along(t, dim, {&piece, 1});
}

Tensor pad_end(const Tensor& t, size_t dim, int64_t count) {
  check_dim(t, dim);
  if (count == 0) return t;
  const DimPiece pieces[] = {{0, t.shape()[dim]}, {DimPiece::kZeroPositions, count}};
  return assemble_along(t, dim, pieces);
}

Tensor concat_along(std::span<const Tensor> parts, size_t dim) {
  if (parts.empty()) throw runtime_error("torch.cat() expects a non-empty list of tensors");
  const Tensor& first = parts[0];
  check_dim(first, dim);
  std::vector<int64_t> shape = first.shape();
  int64_t total = 0;
  for (const Tensor& p : parts) {
    bool fits = p.dtype() == first.dtype() && p.shape().size() == shape.size();
    for (size_t d = 0; fits && d < shape.size(); ++d) fits = d == dim || p.shape()[d] == shape[d];
    if (!fits || p.is_meta() != first.is_meta()) {
      throw runtime_error(fmt::format("cannot concatenate {} with {} along dim {}",
                                      first.describe(), p.describe(), dim));
    }
    const std::optional<int64_t> sum = checked_add(total, p.shape()[dim]);
    if (!sum) throw runtime_error(fmt::format("dim {} would have more than 2^63 positions", dim));
    total = *sum;
  }
  shape[dim] = total;
  if (first.is_meta()) return Tensor(shape, first.dtype(), Tensor::Storage::kMeta);
  Tensor out(shape, first.dtype());
  if (out.nbytes() == 0) return out;
  const Blocks b = blocks_around(shape, dim);
  const size_t row = static_cast<size_t>(b.inner) * dtype_size(first.dtype());
  std::byte* to = out.mutable_bytes().data();
  for (int64_t o = 0; o < b.outer; ++o) {
    for (const Tensor& p : parts) {
      const size_t bytes = static_cast<size_t>(p.shape()[dim]) * row;
      if (bytes == 0) continue;
      std::memcpy(to, p.bytes().data() + static_cast<size_t>(o) * bytes, bytes);
      to += bytes;
    }
  }
  return out;
}

std::vector<Tensor> chunk_along(const Tensor& t, size_t dim, int64_t pieces) {
  check_dim(t, dim);
  if (pieces <= 0) throw runtime_error(fmt::format("chunk expects pieces > 0, got {}", pieces));
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(pieces));
  for (int64_t i = 0; i < pieces; ++i) {
    const auto [start, length] = chunk_range(t.shape()[dim], pieces, i);
    out.push_back(narrow(t, dim, start, length));
  }
  return out;
}

Tensor divided_by(const Tensor& t, int64_t divisor) {
  const DType dtype = is_floating(t.dtype()) ? t.dtype() : DType::kFloat32;
  Tensor out(t.shape(), dtype,
             t.is_meta() ? Tensor::Storage::kMeta : Tensor::Storage::kMaterialized);
  if (t.is_meta()) return out;
  // Integers become float32 before dividing, as PyTorch promotes them. One division in double
  // rounded to the dtype is the float32 (or narrower) quotient: double holds more than twice
  // float32's precision, so rounding twice cannot differ from rounding once.
  const auto as_float32 = [](double v) { return static_cast<double>(static_cast<float>(v)); };
  const double d = t.dtype() == DType::kFloat64 ? static_cast<double>(divisor)
                                                : as_float32(static_cast<double>(divisor));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double x =
        is_floating(t.dtype()) ? t.get(i) : as_float32(static_cast<double>(t.get_int(i)));
    out.set(i, x / d);
  }
  return out;
}

}  // namespace meshsim
