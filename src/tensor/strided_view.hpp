// Views as PyTorch makes them: basic indexing (t[1, ::2, None, ...]) and permute, described by
// sizes, strides and a storage offset over the storage of a contiguous tensor, and the moves of
// elements between a view and that storage. See docs/tensors.md for what meshsim models of them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "src/tensor/tensor.hpp"

namespace meshsim {

// Where a view's elements lie in its storage, in elements.
struct ViewLayout {
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;
  int64_t storage_offset = 0;

  // The whole of a contiguous tensor of this shape.
  static ViewLayout contiguous(std::vector<int64_t> shape);
  int64_t numel() const;
  // Tensor.is_contiguous(): row-major strides, where dims of size 1 may have any stride and a
  // tensor without elements always is.
  bool is_contiguous() const;
  // Tensor.is_contiguous(memory_format=...) for channels_last (4-D) or channels_last_3d (5-D):
  // row-major with the channel dim (1) innermost. False for other ranks.
  bool is_channels_last_contiguous() const;
  // What suggest_memory_format() decides from strides alone: a 4-D or 5-D view whose strides
  // order the dims as channels-last does, with PyTorch's tie-breaks towards row-major.
  bool strides_like_channels_last() const;
  // The test ProcessGroupNCCL makes before a collective: contiguous in the memory format the
  // strides suggest.
  bool is_contiguous_for_collectives() const {
    return strides_like_channels_last() ? is_channels_last_contiguous() : is_contiguous();
  }
  // Tensor.is_non_overlapping_and_dense(): its elements fill a block of storage exactly, in some
  // order of the dims (a permutation of a contiguous tensor).
  bool is_non_overlapping_and_dense() const;
  // The numel elements from the view's first one on, in storage order: what a backend moves for
  // a tensor from its data pointer, whatever its strides.
  ViewLayout memory_run() const;
  bool operator==(const ViewLayout&) const = default;
};

// One entry of Python's basic indexing.
struct IndexEntry {
  enum class Kind { kInteger, kSlice, kEllipsis, kNone };
  Kind kind = Kind::kSlice;
  int64_t integer = 0;           // kInteger
  std::optional<int64_t> start;  // kSlice: omitted bounds are the ends
  std::optional<int64_t> stop;
  int64_t step = 1;
};

// view[entries], as Tensor.__getitem__ with integers, slices, ... and None does it: an integer
// selects (negative counts from the end), a slice narrows with Python's clamping, None inserts a
// dim of size 1, and each ellipsis stands for the dims no other entry names. Throws meshsim::Error
// with PyTorch's type and text: IndexError for an integer out of range or too many indices,
// ValueError for a step below 1; RuntimeError for an entry past the end after a second ellipsis,
// which PyTorch answers with an error meshsim does not reproduce.
// `as_tuple`: the index was written with a comma (t[0,]), so a lone entry takes the tuple's
// paths, which differ from t[0]'s on a 0-dim tensor.
ViewLayout index_view(const ViewLayout& view, std::span<const IndexEntry> entries,
                      bool as_tuple = false);

// view.permute(dims): RuntimeError unless dims name every dim once (negative counts from the end).
ViewLayout permute_view(const ViewLayout& view, std::span<const int64_t> dims);

// The view's elements in row-major order, read from `storage` (any shape; its elements are the
// storage); a meta storage gives a meta tensor. Throws IndexError when the view reaches past it.
Tensor gather_view(const Tensor& storage, const ViewLayout& view);

// Writes `values` (the view's shape) into the view's places of `storage`; nothing for meta.
void scatter_view(Tensor& storage, const ViewLayout& view, const Tensor& values);

}  // namespace meshsim
