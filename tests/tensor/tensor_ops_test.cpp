// narrow, pad, cat and chunk along a dim, against values written out by hand.
#include <catch2/catch.hpp>

#include "src/error.hpp"
#include "src/tensor/tensor_ops.hpp"

using namespace meshsim;

namespace {

// [[0, 1, 2], [3, 4, 5]]
Tensor two_by_three() {
  return Tensor::arange(6, DType::kInt64).reshaped({2, 3});
}

std::vector<int64_t> values(const Tensor& t) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.get_int(i));
  return out;
}

}  // namespace

TEST_CASE("tensor ops: along dim 0 and dim 1", "[tensor][ops]") {
  const Tensor t = two_by_three();
  CHECK(values(narrow(t, 1, 1, 2)) == std::vector<int64_t>{1, 2, 4, 5});
  CHECK(narrow(t, 1, 1, 2).shape() == std::vector<int64_t>{2, 2});
  CHECK(values(narrow(t, 0, 1, 1)) == std::vector<int64_t>{3, 4, 5});
  CHECK(values(pad_end(t, 1, 2)) == std::vector<int64_t>{0, 1, 2, 0, 0, 3, 4, 5, 0, 0});
  CHECK(values(pad_end(t, 0, 1)) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 0, 0, 0});
  const Tensor parts[] = {narrow(t, 1, 2, 1), narrow(t, 1, 0, 2)};
  CHECK(values(concat_along(parts, 1)) == std::vector<int64_t>{2, 0, 1, 5, 3, 4});
  // torch.chunk(3 columns, 4): 1, 1, 1 and an empty piece added, as DTensor fills them.
  const std::vector<Tensor> pieces = chunk_along(t, 1, 4);
  REQUIRE(pieces.size() == 4);
  CHECK(values(pieces[2]) == std::vector<int64_t>{2, 5});
  CHECK(pieces[3].shape() == std::vector<int64_t>{2, 0});
  const DimPiece order[] = {{2, 1}, {DimPiece::kZeroPositions, 1}, {0, 1}};
  CHECK(values(assemble_along(t, 1, order)) == std::vector<int64_t>{2, 0, 0, 5, 0, 3});
}

TEST_CASE("tensor ops: meta tensors get shapes only; bad arguments throw", "[tensor][ops]") {
  const Tensor meta({4, 1000000000}, DType::kFloat32, Tensor::Storage::kMeta);
  const Tensor padded = pad_end(meta, 0, 4);
  CHECK(padded.is_meta());
  CHECK(padded.shape() == std::vector<int64_t>{8, 1000000000});
  CHECK_THROWS_AS(narrow(two_by_three(), 2, 0, 1), Error);
  CHECK_THROWS_AS(narrow(two_by_three(), 1, 2, 2), Error);
  CHECK_THROWS_AS(narrow(two_by_three(), 1, -1, 1), Error);  // not a row of zeros
  CHECK_THROWS_AS(chunk_along(two_by_three(), 0, 0), Error);
  const Tensor mixed[] = {two_by_three(), Tensor({2, 3}, DType::kFloat32)};
  CHECK_THROWS_AS(concat_along(mixed, 0), Error);
}

TEST_CASE("tensor ops: true division rounds once, integers become float32", "[tensor][ops]") {
  // 1 / 3 in float32 is 0x3EAAAAAB; the float64 quotient keeps its 53 bits.
  Tensor f32({2}, DType::kFloat32);
  f32.set(0, 1.0);
  f32.set(1, -6.0);
  const Tensor q = divided_by(f32, 3);
  CHECK(q.dtype() == DType::kFloat32);
  CHECK(static_cast<float>(q.get(0)) == 1.0f / 3.0f);
  CHECK(q.get(1) == -2.0);
  Tensor f64({1}, DType::kFloat64);
  f64.set(0, 1.0);
  CHECK(divided_by(f64, 3).get(0) == 1.0 / 3.0);
  // float16: 1 / 3 rounds to 0x3555 (0.333251953125).
  Tensor f16({1}, DType::kFloat16);
  f16.set(0, 1.0);
  CHECK(divided_by(f16, 3).get(0) == 0.333251953125);
  // int64 7 / 2 is float32 3.5; 2^24 + 1 rounds to 2^24 on becoming float32, as in PyTorch.
  Tensor ints({2}, DType::kInt64);
  ints.set_int(0, 7);
  ints.set_int(1, (int64_t{1} << 24) + 1);
  const Tensor iq = divided_by(ints, 2);
  CHECK(iq.dtype() == DType::kFloat32);
  CHECK(iq.get(0) == 3.5);
  CHECK(iq.get(1) == static_cast<double>(int64_t{1} << 23));
  const Tensor meta({3, 1000000000}, DType::kBFloat16, Tensor::Storage::kMeta);
  CHECK(divided_by(meta, 4).is_meta());
  CHECK(divided_by(meta, 4).shape() == meta.shape());
}
