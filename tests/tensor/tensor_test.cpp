#include "src/tensor/tensor.hpp"

#include <bit>
#include <cmath>
#include <limits>

#include <catch2/catch.hpp>

#include "src/error.hpp"

using namespace meshsim;

TEST_CASE("tensor: dtypes have PyTorch's sizes and names", "[tensor]") {
  CHECK(dtype_size(DType::kBFloat16) == 2);
  CHECK(dtype_size(DType::kInt64) == 8);
  CHECK(dtype_size(DType::kBool) == 1);
  CHECK(parse_dtype("torch.half") == DType::kFloat16);
  CHECK(parse_dtype("long") == DType::kInt64);
  CHECK(parse_dtype("complex64") == std::nullopt);
  CHECK(dtype_name(DType::kBFloat16) == "bfloat16");
}

TEST_CASE("tensor: float16 and bfloat16 round to nearest even (known bit patterns)", "[tensor]") {
  CHECK(float_to_half_bits(1.0f) == 0x3c00);
  CHECK(float_to_half_bits(-2.0f) == 0xc000);
  CHECK(float_to_half_bits(65504.0f) == 0x7bff);
  CHECK(float_to_half_bits(65520.0f) == 0x7c00);               // ties to even: overflows to inf
  CHECK(float_to_half_bits(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  CHECK(float_to_half_bits(std::ldexp(1.0f, -25)) == 0x0000);  // tie rounds to even zero
  CHECK(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // tie to even
  CHECK(float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(float_to_half_bits(std::numeric_limits<float>::quiet_NaN()) == 0x7e00);
  CHECK(half_bits_to_float(0x3555) == Approx(0.333251953125f).epsilon(0));
  CHECK(float_to_bfloat16_bits(1.0f) == 0x3f80);
  CHECK(float_to_bfloat16_bits(std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // tie to even
  CHECK(float_to_bfloat16_bits(std::bit_cast<float>(0x3f818000u)) == 0x3f82);
  // Every half value survives a round trip through float.
  for (uint32_t bits = 0; bits < 0x7c00; ++bits) {
    REQUIRE(float_to_half_bits(half_bits_to_float(static_cast<uint16_t>(bits))) == bits);
  }
}

TEST_CASE("tensor: storage, element access and meta tensors", "[tensor]") {
  Tensor t = Tensor::arange(5, DType::kInt32);
  CHECK(t.numel() == 5);
  CHECK(t.get(4) == 4.0);
  CHECK(t.nbytes() == 20);
  Tensor f = Tensor::full({2, 3}, 1.5, DType::kBFloat16);
  CHECK(f.strides() == std::vector<int64_t>{3, 1});
  CHECK(f.get(5) == 1.5);
  CHECK(f.describe() == "bfloat16[2, 3]");
  Tensor m({1 << 20, 1 << 20}, DType::kFloat32, Tensor::Storage::kMeta);
  CHECK(m.numel() == (int64_t{1} << 40));
  CHECK(m.describe() == "float32[1048576, 1048576] (meta)");
  CHECK_THROWS_AS(m.get(0), Error);
  CHECK_THROWS_AS(t.get(5), Error);
  CHECK_THROWS_AS(Tensor({-1}, DType::kFloat32), Error);
  CHECK(Tensor::arange(3, DType::kFloat32).same_as(Tensor::arange(3, DType::kFloat32)));
  CHECK_FALSE(Tensor::arange(3, DType::kFloat32).same_as(Tensor::arange(3, DType::kFloat64)));
}

TEST_CASE("tensor: copies share storage until written (copy on write)", "[tensor]") {
  Tensor a = Tensor::arange(4, DType::kFloat32);
  Tensor b = a;
  CHECK(a.bytes().data() == b.bytes().data());  // shared
  b.set(0, 9.0);
  CHECK(a.get(0) == 0.0);  // the original is untouched
  CHECK(b.get(0) == 9.0);
  CHECK(a.bytes().data() != b.bytes().data());
  Tensor c = a;
  c.mutable_bytes()[0] = std::byte{1};
  CHECK(a.get(0) == 0.0);
  CHECK(a.same_as(Tensor::arange(4, DType::kFloat32)));
}
