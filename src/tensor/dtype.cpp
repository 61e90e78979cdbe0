#include "src/tensor/dtype.hpp"

#include <bit>
#include <cmath>
#include <iterator>
#include <string>

#include "src/error.hpp"

namespace meshsim {

namespace {

// Everything meshsim knows of a dtype, one row each, in DType's order.
struct DTypeFacts {
  DType dtype;
  std::string_view name;         // PyTorch's, without "torch."
  std::string_view alias;        // torch's other name for it ("float", "long"), or empty
  std::string_view scalar_type;  // c10's ScalarType, as kernel errors print it
  std::string_view c_type;       // as torch.full's overflow error names it
  std::string_view type_meta;    // as caffe2's TypeMeta prints a floating type
  size_t size;
  bool floating;
};

constexpr DTypeFacts kDTypes[] = {
    {DType::kFloat32, "float32", "float", "Float", "float32", "float", 4, true},
    {DType::kFloat64, "float64", "double", "Double", "float64", "double", 8, true},
    {DType::kFloat16, "float16", "half", "Half", "c10::Half", "c10::Half", 2, true},
    {DType::kBFloat16, "bfloat16", "", "BFloat16", "bfloat16", "c10::BFloat16", 2, true},
    {DType::kInt64, "int64", "long", "Long", "int64", "int64", 8, false},
    {DType::kInt32, "int32", "int", "Int", "int", "int32", 4, false},
    {DType::kUInt8, "uint8", "", "Byte", "uint8_t", "uint8", 1, false},
    {DType::kBool, "bool", "", "Bool", "bool", "bool", 1, false},
};

constexpr bool rows_in_dtype_order() {
  for (size_t i = 0; i < std::size(kDTypes); ++i) {
    if (static_cast<size_t>(kDTypes[i].dtype) != i) return false;
  }
  return std::size(kDTypes) == static_cast<size_t>(DType::kBool) + 1;
}
static_assert(rows_in_dtype_order(), "kDTypes has one row per DType, in order");

const DTypeFacts& facts(DType dtype) {
  const auto row = static_cast<size_t>(dtype);
  MESHSIM_ASSERT(row < std::size(kDTypes), "a DType outside the enum");
  return kDTypes[row];
}

}  // namespace

size_t dtype_size(DType dtype) {
  return facts(dtype).size;
}

bool is_floating(DType dtype) {
  return facts(dtype).floating;
}

std::string_view scalar_type_name(DType dtype) {
  return facts(dtype).scalar_type;
}

std::string_view dtype_name(DType dtype) {
  return facts(dtype).name;
}

std::string_view c_type_name(DType dtype) {
  return facts(dtype).c_type;
}

std::string_view type_meta_name(DType dtype) {
  return facts(dtype).type_meta;
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name.starts_with("torch.")) name.remove_prefix(6);
  for (const DTypeFacts& f : kDTypes) {
    if (f.name == name || (!f.alias.empty() && f.alias == name)) return f.dtype;
  }
  return std::nullopt;
}

uint16_t float_to_half_bits(float value) {
  const uint32_t f = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (f >> 16) & 0x8000u;
  const uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u)
    return static_cast<uint16_t>(sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): value / 2^-24 rounded to nearest even, done exactly in float.
    const float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // * 2^24, exact
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  // Normal: drop 13 mantissa bits with round-to-nearest-even; a carry correctly bumps the exponent.
  const uint32_t rebased = abs - (112u << 23);
  const uint32_t rounded = rebased + 0x0fffu + ((rebased >> 13) & 1u);
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

float half_bits_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  const uint32_t mant = bits & 0x3ffu;
  if (exp == 0) {
    const float magnitude = static_cast<float>(mant) / 16777216.0f;  // mant * 2^-24, exact
    return std::bit_cast<float>(std::bit_cast<uint32_t>(magnitude) | sign);
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t float_to_bfloat16_bits(float value) {
  const uint32_t f = std::bit_cast<uint32_t>(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x40u);
  const uint32_t rounded = f + 0x7fffu + ((f >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

float bfloat16_bits_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

double stored_as(DType dtype, double v) {
  switch (dtype) {
    case DType::kFloat16:
      return half_bits_to_float(float_to_half_bits(static_cast<float>(v)));
    case DType::kBFloat16:
      return bfloat16_bits_to_float(float_to_bfloat16_bits(static_cast<float>(v)));
    case DType::kFloat32:
      return static_cast<float>(v);
    default:
      return v;
  }
}

}  // namespace meshsim
