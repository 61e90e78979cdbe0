// A contiguous tensor: dtype, shape and either storage or nothing at all (meta). Copies share
// storage until one of them is written (copy on write), so a collective's result can be handed to
// every rank without N copies of the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "src/tensor/dtype.hpp"

namespace meshsim {

class Tensor {
 public:
  // Meta tensors carry shape and dtype only, so huge worlds can run without data.
  enum class Storage { kMaterialized, kMeta };

  Tensor() : Tensor({0}, DType::kFloat32, Storage::kMeta) {}
  // Zero-filled (or meta). Throws meshsim::Error (ValueError) on a negative size.
  Tensor(std::vector<int64_t> shape, DType dtype, Storage storage = Storage::kMaterialized);

  static Tensor full(std::vector<int64_t> shape, double value, DType dtype);
  // 0, 1, ..., n-1.
  static Tensor arange(int64_t n, DType dtype);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  // Row-major strides in elements.
  std::vector<int64_t> strides() const;
  int64_t numel() const { return numel_; }
  bool is_meta() const { return storage_ == Storage::kMeta; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }

  // Raw storage; throws RuntimeError on a meta tensor.
  std::span<const std::byte> bytes() const;
  std::span<std::byte> mutable_bytes();

  // Element access by flat index, converting through double (exact for every dtype but int64
  // beyond 2^53). Throws RuntimeError on a meta tensor, IndexError out of range.
  double get(int64_t index) const;
  void set(int64_t index, double value);

  // Same dtype, shape and bits (meta tensors: same dtype and shape, and both meta).
  bool same_as(const Tensor& other) const;
  // "float32[4, 2]" plus " (meta)".
  std::string describe() const;

 private:
  void check_index(int64_t index) const;
  // Makes the storage this tensor's own before a write.
  void detach();

  std::vector<int64_t> shape_;
  DType dtype_;
  Storage storage_;
  int64_t numel_;
  std::shared_ptr<std::vector<std::byte>> data_;  // null for meta tensors
};

}  // namespace meshsim
