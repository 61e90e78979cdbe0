// Basic indexing, permute and the moves between a view and its storage, against shapes, strides
// and offsets torch 2.15.0 printed for the same indices of torch.arange(24).reshape(2, 3, 4).
#include <catch2/catch.hpp>

#include "src/error.hpp"
#include "src/tensor/strided_view.hpp"

using namespace meshsim;

namespace {

IndexEntry at(int64_t i) {
  IndexEntry e;
  e.kind = IndexEntry::Kind::kInteger;
  e.integer = i;
  return e;
}
IndexEntry slice(std::optional<int64_t> start = std::nullopt,
                 std::optional<int64_t> stop = std::nullopt, int64_t step = 1) {
  IndexEntry e;
  e.start = start;
  e.stop = stop;
  e.step = step;
  return e;
}
IndexEntry kind(IndexEntry::Kind k) {
  IndexEntry e;
  e.kind = k;
  return e;
}
const IndexEntry kNone = kind(IndexEntry::Kind::kNone);
const IndexEntry kEllipsis = kind(IndexEntry::Kind::kEllipsis);

ViewLayout base() {
  return ViewLayout::contiguous({2, 3, 4});
}

ViewLayout layout(std::vector<int64_t> shape, std::vector<int64_t> stride, int64_t offset) {
  return ViewLayout{std::move(shape), std::move(stride), offset};
}

std::string index_error_of(const std::vector<IndexEntry>& entries) {
  try {
    index_view(base(), entries);
  } catch (const Error& e) {
    return std::string(py_error_type_name(e.type())) + ": " + e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("strided view: indexing as torch does it", "[tensor][view]") {
  CHECK(index_view(base(), std::vector{kNone, at(1), kNone, kEllipsis, kNone}) ==
        layout({1, 1, 3, 4, 1}, {24, 12, 4, 1, 1}, 12));
  CHECK(index_view(base(), std::vector{slice(), slice(5), slice(10, 1)}) ==
        layout({2, 0, 0}, {12, 4, 1}, 16));
  CHECK(index_view(base(), std::vector{slice(), slice(5, std::nullopt, 2)}) ==
        layout({2, 0, 4}, {12, 8, 1}, 12));
  CHECK(index_view(base(), std::vector{slice(), slice(1, 2, 5)}) ==
        layout({2, 1, 4}, {12, 20, 1}, 4));
  CHECK(index_view(base(), std::vector{slice(), slice(-100, 100, 2)}) ==
        layout({2, 2, 4}, {12, 8, 1}, 0));
  CHECK(index_view(base(), std::vector{slice(1, 0, 2)}) == layout({0, 3, 4}, {24, 4, 1}, 12));
  CHECK(index_view(base(), std::vector{slice(1, 2, 3), kNone}) ==
        layout({1, 1, 3, 4}, {36, 12, 4, 1}, 12));
  // Each ellipsis stands for the dims the others leave; a second one for none.
  CHECK(index_view(base(), std::vector{kEllipsis, at(0), kEllipsis}) == layout({2, 3}, {12, 4}, 0));
  CHECK(index_view(base(), std::vector{at(0), kEllipsis, at(1), kEllipsis}) == layout({3}, {4}, 1));
  CHECK(index_view(base(), std::vector{at(0), at(0), at(0), kEllipsis, kNone}) ==
        layout({1}, {1}, 0));
  CHECK(index_view(index_view(layout({}, {}, 6), std::vector{kNone}), std::vector{at(0)}) ==
        layout({}, {}, 6));
}

TEST_CASE("strided view: PyTorch's errors for bad indices", "[tensor][view]") {
  // The dim an error names is the entry's position in the index.
  CHECK(index_error_of({at(0), at(5)}) ==
        "IndexError: index 5 is out of bounds for dimension 1 with size 3");
  CHECK(index_error_of({kNone, at(0), at(5)}) ==
        "IndexError: index 5 is out of bounds for dimension 2 with size 3");
  CHECK(index_error_of({kEllipsis, at(10)}) ==
        "IndexError: index 10 is out of bounds for dimension 1 with size 4");
  CHECK(index_error_of({at(-3)}) ==
        "IndexError: index -3 is out of bounds for dimension 0 with size 2");
  CHECK(index_error_of({slice(std::nullopt, std::nullopt, 0)}) ==
        "ValueError: slice step cannot be zero");
  CHECK(index_error_of({slice(std::nullopt, std::nullopt, -1)}) ==
        "ValueError: step must be greater than zero");
  CHECK(index_error_of({at(1), at(2), at(3), at(4)}) ==
        "IndexError: too many indices for tensor of dimension 3");
  CHECK_THROWS_WITH(index_view(layout({}, {}, 0), std::vector{slice()}),
                    "slice() cannot be applied to a 0-dim tensor.");
  // Another integer than 0 on a 0-dim tensor is out of bounds of a dim of size 0; written as a
  // tuple (t[0,]) even 0 is one index too many.
  CHECK_THROWS_WITH(index_view(layout({}, {}, 0), std::vector{at(5)}),
                    "index 5 is out of bounds for dimension 0 with size 0");
  CHECK_THROWS_WITH(index_view(layout({}, {}, 0), std::vector{at(0)}, /*as_tuple=*/true),
                    "too many indices for tensor of dimension 0");
  // Integers count against the dims before any None adds one.
  CHECK_THROWS_WITH(index_view(layout({}, {}, 0), std::vector{kNone, at(0)}),
                    "too many indices for tensor of dimension 0");
}

TEST_CASE("strided view: permute and contiguity", "[tensor][view]") {
  const ViewLayout p =
      permute_view(index_view(base(), std::vector{slice(), slice(std::nullopt, std::nullopt, 2)}),
                   std::vector<int64_t>{2, 0, 1});
  CHECK(p == layout({4, 2, 2}, {1, 12, 8}, 0));
  CHECK_FALSE(p.is_contiguous());
  CHECK(permute_view(base(), std::vector<int64_t>{-1, 0, 1}) == layout({4, 2, 3}, {1, 12, 4}, 0));
  CHECK_THROWS_WITH(permute_view(base(), std::vector<int64_t>{0, 0, 1}),
                    "permute(): duplicate dims are not allowed.");
  CHECK_THROWS_WITH(permute_view(base(), std::vector<int64_t>{0, 1, 3}),
                    "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
  // A slice of size 1 is contiguous; one that skips rows is not.
  CHECK(layout({2, 0, 4}, {12, 4, 1}, 0).is_contiguous());
  CHECK_FALSE(layout({2, 1, 4}, {12, 4, 1}, 4).is_contiguous());
  CHECK(layout({1, 3, 4}, {12, 4, 1}, 0).is_contiguous());
  // Channels-last: NCHW (2, 3, 4, 5) permuted from NHWC storage.
  const ViewLayout nhwc =
      permute_view(ViewLayout::contiguous({2, 4, 5, 3}), std::vector<int64_t>{0, 3, 1, 2});
  CHECK(nhwc.strides_like_channels_last());
  CHECK(nhwc.is_channels_last_contiguous());
  CHECK(nhwc.is_contiguous_for_collectives());
  CHECK_FALSE(nhwc.is_contiguous());
  // Ambiguous N111 is row-major for PyTorch; torch found (1, 2, 4, 1) @ (8, 1, 2, 8) neither.
  CHECK_FALSE(layout({4, 1, 1, 1}, {1, 1, 1, 1}, 0).strides_like_channels_last());
  CHECK_FALSE(layout({1, 2, 4, 1}, {8, 1, 2, 8}, 0).is_contiguous_for_collectives());
  // Dense: a permutation of a contiguous block; a slice with gaps is not.
  CHECK(nhwc.is_non_overlapping_and_dense());
  CHECK(layout({4, 2, 3}, {1, 12, 4}, 0).is_non_overlapping_and_dense());
  CHECK_FALSE(layout({2, 2}, {4, 2}, 0).is_non_overlapping_and_dense());
  CHECK(layout({2, 2}, {4, 2}, 3).memory_run() == layout({4}, {1}, 3));
}

TEST_CASE("strided view: gather and scatter through the storage", "[tensor][view]") {
  Tensor storage = Tensor::arange(8, DType::kInt64);
  const ViewLayout cols = index_view(ViewLayout::contiguous({2, 4}),
                                     std::vector{slice(), slice(std::nullopt, std::nullopt, 2)});
  const Tensor got = gather_view(storage, cols);
  REQUIRE(got.shape() == std::vector<int64_t>{2, 2});
  CHECK(got.get_int(0) == 0);
  CHECK(got.get_int(1) == 2);
  CHECK(got.get_int(2) == 4);
  CHECK(got.get_int(3) == 6);
  scatter_view(storage, cols, Tensor::full({2, 2}, -1, DType::kInt64));
  std::vector<int64_t> after;
  for (int64_t i = 0; i < 8; ++i) after.push_back(storage.get_int(i));
  CHECK(after == std::vector<int64_t>{-1, 1, -1, 3, -1, 5, -1, 7});
  // A layout reaching past the storage is an error, not a read out of bounds.
  CHECK_THROWS_AS(gather_view(storage, layout({2, 2}, {4, 3}, 2)), Error);
  CHECK(gather_view(Tensor({8}, DType::kInt64, Tensor::Storage::kMeta), cols).is_meta());
}
