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

  // PyTorch's CUDA kernels handle at most 25 dims; so does meshsim.
  static constexpr size_t kMaxDims = 25;

  Tensor() : Tensor({0}, DType::kFloat32, Storage::kMeta) {}
  // Zero-filled (or meta). Throws meshsim::Error: ValueError on a negative size or more than
  // kMaxDims dims, RuntimeError when the byte size overflows int64 (as PyTorch), MemoryError when
  // the storage does not fit the MemoryBudget or the system refuses it.
  Tensor(std::vector<int64_t> shape, DType dtype, Storage storage = Storage::kMaterialized);

  // The bytes a tensor of this shape and dtype holds; throws what the constructor throws for a
  // shape that cannot exist (too many dims, negative sizes, a byte size past int64).
  static int64_t byte_size(std::span<const int64_t> shape, DType dtype);

  // Every element `value`. Throws RuntimeError, as torch.full does, when the dtype cannot hold it.
  static Tensor full(std::vector<int64_t> shape, int64_t value, DType dtype);
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
  // beyond 2^53). Throws RuntimeError on a meta tensor, IndexError out of range; set() throws
  // OverflowError when an integer dtype cannot hold the value (NaN included).
  double get(int64_t index) const;
  void set(int64_t index, double value);
  // Exact access for integer dtypes: set_int wraps to the dtype's width as two's-complement
  // hardware does (NCCL's integer sums), and converts for floating dtypes.
  int64_t get_int(int64_t index) const;
  void set_int(int64_t index, int64_t value);

  // The same elements under another shape of equal numel, sharing storage (a view, as
  // Tensor.view on a contiguous tensor). Throws RuntimeError when the numels differ.
  Tensor reshaped(std::vector<int64_t> shape) const;
  // Takes the values of `source` when it has this tensor's dtype and number of elements, keeping
  // this tensor's shape (a collective's in-place result, whose signature says the shapes agree):
  // copying a shape reads and writes its heap block. False, changing nothing, otherwise.
  bool adopt_values(const Tensor& source);

  // Same dtype, shape and bits (meta tensors: same dtype and shape, and both meta).
  bool same_as(const Tensor& other) const;
  // "float32[4, 2]" plus " (meta)".
  std::string describe() const;

 private:
  void check_index(int64_t index) const;
  // Makes the storage this tensor's own before a write.
  void detach();

  // Bytes counted against the MemoryBudget for as long as they live, zeroed when made. A tensor of
  // a few elements (most of what a step makes, and a collective's result) keeps them inline: one
  // allocation per tensor instead of two.
  class Buffer {
   public:
    explicit Buffer(size_t bytes);
    Buffer(const Buffer& other);
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer();
    std::span<std::byte> bytes() { return {size_ <= kInline ? inline_ : heap_.get(), size_}; }
    std::span<const std::byte> bytes() const {
      return {size_ <= kInline ? inline_ : heap_.get(), size_};
    }

   private:
    static constexpr size_t kInline = 32;
    size_t size_;
    std::unique_ptr<std::byte[]> heap_;  // beyond kInline bytes
    alignas(16) std::byte inline_[kInline]{};
  };

  std::vector<int64_t> shape_;
  DType dtype_;
  Storage storage_;
  int64_t numel_;
  std::shared_ptr<Buffer> data_;  // null for meta tensors
};

}  // namespace meshsim
