#include "src/tensor/strided_view.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>

#include "src/checked_math.hpp"
#include "src/error.hpp"

namespace meshsim {

namespace {

Error index_error(std::string message) {
  return Error(PyErrorType::kIndexError, std::move(message));
}

int64_t checked_or_throw(std::optional<int64_t> value, const char* what) {
  if (!value) throw runtime_error(fmt::format("{} of a view does not fit in int64", what));
  return *value;
}

// The order in which channels-last formats lay dims out, innermost first.
std::span<const size_t> channels_last_order(size_t ndim) {
  static constexpr std::array<size_t, 4> kOrder2d = {1, 3, 2, 0};
  static constexpr std::array<size_t, 5> kOrder3d = {1, 4, 3, 2, 0};
  if (ndim == 4) return kOrder2d;
  if (ndim == 5) return kOrder3d;
  return {};
}

// Moves the view's start `count` steps along `dim`.
void advance_offset(ViewLayout& view, size_t dim, int64_t count) {
  view.storage_offset = checked_or_throw(
      checked_add(view.storage_offset,
                  checked_or_throw(checked_mul(count, view.stride[dim]), "the storage offset")),
      "the storage offset");
}

// Python's slice on a dim of `size` with a positive step: bounds counted from the end when
// negative, then clamped into the dim, an empty range starting where it would have.
void apply_slice(ViewLayout& view, size_t dim, const IndexEntry& entry) {
  const int64_t size = view.shape[dim];
  auto bound = [size](std::optional<int64_t> given, int64_t otherwise) {
    if (!given) return otherwise;
    int64_t b = *given < 0 ? *given + size : *given;  // no overflow: size >= 0 > *given
    return std::clamp<int64_t>(b, 0, size);
  };
  const int64_t start = bound(entry.start, 0);
  const int64_t stop = std::max(start, bound(entry.stop, size));
  const int64_t step = entry.step;
  advance_offset(view, dim, start);
  view.shape[dim] = (stop - start) / step + ((stop - start) % step != 0 ? 1 : 0);
  view.stride[dim] = checked_or_throw(checked_mul(view.stride[dim], step), "a stride");
}

void apply_select(ViewLayout& view, size_t dim, int64_t index, size_t position) {
  const int64_t size = view.shape[dim];
  if (index < -size || index >= size) {
    throw index_error(fmt::format("index {} is out of bounds for dimension {} with size {}", index,
                                  position, size));
  }
  advance_offset(view, dim, index < 0 ? index + size : index);
  view.shape.erase(view.shape.begin() + static_cast<ptrdiff_t>(dim));
  view.stride.erase(view.stride.begin() + static_cast<ptrdiff_t>(dim));
}

// Tensor.unsqueeze(dim)'s stride: what stepping over the whole next dim takes, 1 at the end.
void apply_new_axis(ViewLayout& view, size_t dim) {
  const int64_t stride =
      dim >= view.shape.size()
          ? 1
          : checked_or_throw(checked_mul(view.shape[dim], view.stride[dim]), "a stride");
  view.shape.insert(view.shape.begin() + static_cast<ptrdiff_t>(dim), 1);
  view.stride.insert(view.stride.begin() + static_cast<ptrdiff_t>(dim), stride);
}

// The largest element index the view reaches, or nullopt for a view without elements.
std::optional<int64_t> last_element(const ViewLayout& view) {
  int64_t last = view.storage_offset;
  for (size_t d = 0; d < view.shape.size(); ++d) {
    if (view.shape[d] == 0) return std::nullopt;
    last = checked_or_throw(
        checked_add(last,
                    checked_or_throw(checked_mul(view.shape[d] - 1, view.stride[d]), "the extent")),
        "the extent");
  }
  return last;
}

void check_fits(const Tensor& storage, const ViewLayout& view) {
  const std::optional<int64_t> last = last_element(view);
  if (last && (view.storage_offset < 0 || *last >= storage.numel())) {
    throw index_error(fmt::format(
        "a view of shape [{}], stride [{}] and storage offset {} reaches element {} of a storage "
        "of {} elements",
        fmt::join(view.shape, ", "), fmt::join(view.stride, ", "), view.storage_offset, *last,
        storage.numel()));
  }
}

// Calls visit(storage_index) for each element of the view in row-major order, with an odometer
// rather than recursion.
template <typename Visit>
void for_each_storage_index(const ViewLayout& view, Visit visit) {
  if (view.numel() == 0) return;
  const size_t ndim = view.shape.size();
  int64_t at = view.storage_offset;
  if (ndim == 0) {
    visit(at);
    return;
  }
  std::vector<int64_t> counter(ndim, 0);
  for (;;) {
    visit(at);
    size_t d = ndim;
    while (d > 0) {
      --d;
      if (++counter[d] < view.shape[d]) {
        at += view.stride[d];
        break;
      }
      at -= (view.shape[d] - 1) * view.stride[d];
      counter[d] = 0;
      if (d == 0) return;
    }
  }
}

}  // namespace

ViewLayout ViewLayout::contiguous(std::vector<int64_t> shape) {
  ViewLayout view;
  view.stride.assign(shape.size(), 1);
  int64_t step = 1;
  for (size_t d = shape.size(); d > 0; --d) {
    view.stride[d - 1] = step;
    step = checked_or_throw(checked_mul(step, std::max<int64_t>(shape[d - 1], 1)), "a stride");
  }
  view.shape = std::move(shape);
  return view;
}

int64_t ViewLayout::numel() const {
  return checked_or_throw(checked_product(shape), "the number of elements");
}

bool ViewLayout::is_contiguous() const {
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (size_t d = shape.size(); d > 0; --d) {
    if (shape[d - 1] == 1) continue;
    if (stride[d - 1] != expected) return false;
    expected *= shape[d - 1];
  }
  return true;
}

bool ViewLayout::is_channels_last_contiguous() const {
  const std::span<const size_t> order = channels_last_order(shape.size());
  if (order.empty()) return false;
  int64_t expected = 1;
  for (size_t d : order) {
    if (shape[d] == 1) continue;
    if (stride[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

bool ViewLayout::strides_like_channels_last() const {
  const std::span<const size_t> order = channels_last_order(shape.size());
  if (order.empty() || stride[1] == 0) return false;
  int64_t min = 0;
  for (size_t d : order) {
    if (shape[d] == 0 || stride[d] < min) return false;
    // A dim 0 no wider than the channels is the ambiguous N111 case, which PyTorch calls
    // row-major.
    if (d == 0 && min == stride[1]) return false;
    min = stride[d];
    if (shape[d] > 1) min *= shape[d];
  }
  return true;
}

bool ViewLayout::is_non_overlapping_and_dense() const {
  if (numel() == 0) return true;
  // Dims of size 1 take no room; the others, innermost first, must each step over the last.
  std::vector<size_t> dims;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != 1) dims.push_back(d);
  }
  std::sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return stride[a] < stride[b]; });
  int64_t expected = 1;
  for (size_t d : dims) {
    if (stride[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

ViewLayout ViewLayout::memory_run() const {
  return ViewLayout{{numel()}, {1}, storage_offset};
}

ViewLayout index_view(const ViewLayout& view, std::span<const IndexEntry> entries, bool as_tuple) {
  int64_t specified = 0;
  for (const IndexEntry& e : entries) {
    if (e.kind == IndexEntry::Kind::kInteger || e.kind == IndexEntry::Kind::kSlice) ++specified;
  }
  const int64_t ndim = static_cast<int64_t>(view.shape.size());
  if (ndim == 0 && entries.size() == 1 && !as_tuple) {
    // A lone integer or slice on a 0-dim tensor takes Tensor.__getitem__'s short paths; another
    // integer than 0 is out of bounds of a dim of size 0 there.
    if (entries[0].kind == IndexEntry::Kind::kInteger) {
      if (entries[0].integer != 0) {
        throw index_error(fmt::format("index {} is out of bounds for dimension 0 with size 0",
                                      entries[0].integer));
      }
      throw index_error(
          "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` "
          "in C++ to convert a 0-dim tensor to a number");
    }
    if (entries[0].kind == IndexEntry::Kind::kSlice) {
      throw index_error("slice() cannot be applied to a 0-dim tensor.");
    }
  }
  if (specified > ndim) {
    throw index_error(fmt::format("too many indices for tensor of dimension {}", ndim));
  }
  ViewLayout out = view;
  size_t dim = 0;
  for (size_t position = 0; position < entries.size(); ++position) {
    const IndexEntry& e = entries[position];
    if (e.kind == IndexEntry::Kind::kEllipsis) {
      dim += static_cast<size_t>(ndim - specified);
      continue;
    }
    if (e.kind == IndexEntry::Kind::kNone) {
      if (dim > out.shape.size() || out.shape.size() >= Tensor::kMaxDims) {
        throw runtime_error(fmt::format(
            "meshsim cannot place None at position {} of this index (after a second ellipsis, "
            "or past {} dims)",
            position, Tensor::kMaxDims));
      }
      apply_new_axis(out, dim);
      ++dim;
      continue;
    }
    if (dim >= out.shape.size()) {
      throw runtime_error(fmt::format(
          "meshsim does not model entry {} of this index: a second ellipsis left no dim for it",
          position));
    }
    if (e.kind == IndexEntry::Kind::kInteger) {
      apply_select(out, dim, e.integer, position);
    } else {
      if (e.step == 0) throw value_error("slice step cannot be zero");
      if (e.step < 0) throw value_error("step must be greater than zero");
      apply_slice(out, dim, e);
      ++dim;
    }
  }
  return out;
}

ViewLayout permute_view(const ViewLayout& view, std::span<const int64_t> dims) {
  const int64_t ndim = static_cast<int64_t>(view.shape.size());
  if (static_cast<int64_t>(dims.size()) != ndim) {
    throw runtime_error(fmt::format(
        "permute(sparse_coo): number of dimensions in the tensor input does not match the length "
        "of the desired ordering of dimensions i.e. input.dim() = {} is not equal to len(dims) = "
        "{}",
        ndim, dims.size()));
  }
  ViewLayout out;
  std::vector<bool> seen(dims.size(), false);
  for (int64_t d : dims) {  // ndim >= 1 here: a 0-dim view takes no dims
    if (d < -ndim || d >= ndim) {
      throw index_error(
          fmt::format("Dimension out of range (expected to be in range of [{}, {}], but got {})",
                      -ndim, ndim - 1, d));
    }
    const size_t at = static_cast<size_t>(d < 0 ? d + ndim : d);
    if (seen[at]) throw runtime_error("permute(): duplicate dims are not allowed.");
    seen[at] = true;
    out.shape.push_back(view.shape[at]);
    out.stride.push_back(view.stride[at]);
  }
  out.storage_offset = view.storage_offset;
  return out;
}

Tensor gather_view(const Tensor& storage, const ViewLayout& view) {
  if (storage.is_meta()) return Tensor(view.shape, storage.dtype(), Tensor::Storage::kMeta);
  check_fits(storage, view);
  Tensor out(view.shape, storage.dtype());
  const size_t width = dtype_size(storage.dtype());
  const std::span<const std::byte> from = storage.bytes();
  std::span<std::byte> to = out.mutable_bytes();
  size_t next = 0;
  for_each_storage_index(view, [&](int64_t at) {
    std::memcpy(to.data() + next, from.data() + static_cast<size_t>(at) * width, width);
    next += width;
  });
  return out;
}

void scatter_view(Tensor& storage, const ViewLayout& view, const Tensor& values) {
  MESHSIM_ASSERT(values.shape() == view.shape && values.dtype() == storage.dtype(),
                 values.describe() + " written into a view of " + storage.describe());
  if (storage.is_meta() || values.is_meta()) return;
  check_fits(storage, view);
  const size_t width = dtype_size(storage.dtype());
  const std::span<const std::byte> from = values.bytes();
  std::span<std::byte> to = storage.mutable_bytes();
  size_t next = 0;
  for_each_storage_index(view, [&](int64_t at) {
    std::memcpy(to.data() + static_cast<size_t>(at) * width, from.data() + next, width);
    next += width;
  });
}

}  // namespace meshsim
