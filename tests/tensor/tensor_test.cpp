#include "src/tensor/tensor.hpp"

#include <bit>
#include <cmath>
#include <functional>
#include <limits>

#include <catch2/catch.hpp>

#include "src/error.hpp"
#include "src/tensor/memory_budget.hpp"

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
  Tensor f = Tensor::full({2, 3}, 1, DType::kBFloat16);
  CHECK(f.strides() == std::vector<int64_t>{3, 1});
  f.set(5, 1.5);
  CHECK(f.get(5) == 1.5);
  CHECK(f.get(4) == 1.0);
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

TEST_CASE("tensor: small and large storage alike start zeroed, copy on write and are counted",
          "[tensor][limits]") {
  // 32 bytes and less sit inline in the storage's block; more take a block of their own.
  for (const int64_t numel : {1, 8, 9, 1000}) {
    CAPTURE(numel);
    const uint64_t before = meshsim::MemoryBudget::in_use();
    {
      Tensor a({numel}, DType::kFloat32);
      CHECK(meshsim::MemoryBudget::in_use() == before + static_cast<uint64_t>(4 * numel));
      for (int64_t i = 0; i < numel; ++i) REQUIRE(a.get(i) == 0.0);
      CHECK(reinterpret_cast<uintptr_t>(a.bytes().data()) % 16 == 0);
      a.set(numel - 1, 7.0);
      Tensor b = a;
      CHECK(a.bytes().data() == b.bytes().data());
      b.set(0, 3.0);
      CHECK(a.bytes().data() != b.bytes().data());
      CHECK(meshsim::MemoryBudget::in_use() == before + static_cast<uint64_t>(8 * numel));
      if (numel > 1) CHECK(b.get(numel - 1) == 7.0);  // the copy took every byte
      CHECK(a.get(0) == (numel == 1 ? 7.0 : 0.0));
      CHECK_FALSE(a.same_as(b));
      b.set(0, a.get(0));
      CHECK(a.same_as(b));
    }
    CHECK(meshsim::MemoryBudget::in_use() == before);
  }
}

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(meshsim::py_error_type_name(e.type())) + ": " + e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("tensor: sizes that overflow int64 are errors, as in PyTorch", "[tensor][limits]") {
  // torch.empty(2**62, 4, device="meta") raises this RuntimeError; so do byte sizes past int64.
  CHECK(error_of([] {
          Tensor({int64_t{1} << 62, 4}, DType::kFloat32, Tensor::Storage::kMeta);
        }) ==
        "RuntimeError: Storage size calculation overflowed with sizes=[4611686018427387904, 4]");
  CHECK(error_of([] {
          Tensor({int64_t{1} << 61, 2}, DType::kFloat64, Tensor::Storage::kMeta);
        }).rfind("RuntimeError: Storage size calculation overflowed", 0) == 0);
  // A zero anywhere makes the tensor empty, whatever the other sizes.
  CHECK(Tensor({0, int64_t{1} << 62, 1 << 30}, DType::kFloat32, Tensor::Storage::kMeta).numel() ==
        0);
  CHECK(error_of([] { Tensor(std::vector<int64_t>(26, 1), DType::kFloat32); }) ==
        "ValueError: meshsim handles tensors of at most 25 dims (the limit of PyTorch's CUDA "
        "kernels), got 26");
}

TEST_CASE("tensor: full() refuses values the dtype cannot hold, like torch.full",
          "[tensor][limits]") {
  CHECK(error_of([] { Tensor::full({2}, 300, DType::kUInt8); }) ==
        "RuntimeError: value cannot be converted to type uint8_t without overflow");
  CHECK(error_of([] { Tensor::full({2}, int64_t{1} << 40, DType::kInt32); }) ==
        "RuntimeError: value cannot be converted to type int without overflow");
  CHECK(error_of([] { Tensor::full({2}, 70000, DType::kFloat16); }) ==
        "RuntimeError: value cannot be converted to type c10::Half without overflow");
  // int64 values are stored exactly, not through double.
  const int64_t big = (int64_t{1} << 62) + 1;
  CHECK(Tensor::full({2}, big, DType::kInt64).get_int(1) == big);
  CHECK(Tensor::full({1}, -1, DType::kBool).get_int(0) == 1);
  // A double that no integer dtype can hold is an error, never undefined behaviour.
  Tensor t({1}, DType::kInt64);
  CHECK(error_of([&] { t.set(0, std::nan("")); }).rfind("OverflowError: value nan", 0) == 0);
  CHECK(error_of([&] { t.set(0, 1e19); }).rfind("OverflowError", 0) == 0);
  Tensor i32({1}, DType::kInt32);
  i32.set_int(0, (int64_t{1} << 32) + 7);  // wraps at the width, like a 32-bit register
  CHECK(i32.get_int(0) == 7);
}

TEST_CASE("tensor: storage counts against the memory budget", "[tensor][limits]") {
  struct Restore {
    ~Restore() { meshsim::MemoryBudget::set_limit(meshsim::MemoryBudget::kUnlimited); }
  } restore;
  const uint64_t before = meshsim::MemoryBudget::in_use();
  meshsim::MemoryBudget::set_limit(before + 4096);
  {
    Tensor a({256}, DType::kFloat64);  // 2 KiB
    CHECK(meshsim::MemoryBudget::in_use() == before + 2048);
    Tensor shared = a;  // copy on write: no new bytes yet
    CHECK(meshsim::MemoryBudget::in_use() == before + 2048);
    shared.set(0, 1.0);  // now it has its own
    CHECK(meshsim::MemoryBudget::in_use() == before + 4096);
    CHECK(error_of([] { Tensor({1}, DType::kUInt8); }) ==
          "MemoryError: a tensor needs 1 B, but 4.0 KiB of the 4.0 KiB memory budget is in use "
          "(--max-memory)");
    // Meta tensors hold no bytes.
    Tensor m({int64_t{1} << 40}, DType::kFloat32, Tensor::Storage::kMeta);
  }
  CHECK(meshsim::MemoryBudget::in_use() == before);
  // Past what the budget allows: refused before any allocation is attempted.
  meshsim::MemoryBudget::set_limit(uint64_t{1} << 30);
  CHECK(error_of([] {
          Tensor({int64_t{1} << 40}, DType::kFloat32);
        }).rfind("MemoryError: a tensor needs 4.0 TiB", 0) == 0);
}

TEST_CASE("tensor: adopt_values takes another tensor's values and keeps its own shape",
          "[tensor]") {
  Tensor t = Tensor::full({2, 3}, 0, DType::kFloat32);
  const Tensor source = Tensor::arange(6, DType::kFloat32).reshaped({2, 3});
  REQUIRE(t.adopt_values(source));
  CHECK(t.shape() == std::vector<int64_t>{2, 3});
  CHECK(t.same_as(source));
  // Values are shared copy-on-write, as a copy's are: writing one leaves the other.
  t.set(0, 42.0);
  CHECK(source.get(0) == 0.0);
  Tensor other_dtype = Tensor::full({2, 3}, 0, DType::kFloat64);
  CHECK_FALSE(other_dtype.adopt_values(source));
  CHECK(other_dtype.dtype() == DType::kFloat64);
  Tensor other_numel = Tensor::full({4}, 0, DType::kFloat32);
  CHECK_FALSE(other_numel.adopt_values(source));
  CHECK(other_numel.get(0) == 0.0);
}
