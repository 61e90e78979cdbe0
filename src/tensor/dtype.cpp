#include "src/tensor/dtype.hpp"

#include <bit>
#include <cmath>
#include <string>

namespace meshsim {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kUInt8:
    case DType::kBool:
      return 1;
  }
  return 0;
}

bool is_floating(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 ||
         dtype == DType::kBFloat16;
}

std::string_view scalar_type_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "Float";
    case DType::kFloat64:
      return "Double";
    case DType::kFloat16:
      return "Half";
    case DType::kBFloat16:
      return "BFloat16";
    case DType::kInt64:
      return "Long";
    case DType::kInt32:
      return "Int";
    case DType::kUInt8:
      return "Byte";
    case DType::kBool:
      return "Bool";
  }
  return "?";
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kInt64:
      return "int64";
    case DType::kInt32:
      return "int32";
    case DType::kUInt8:
      return "uint8";
    case DType::kBool:
      return "bool";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name.starts_with("torch.")) name.remove_prefix(6);
  struct Alias {
    std::string_view name;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {
      {"float32", DType::kFloat32},   {"float", DType::kFloat32},   {"float64", DType::kFloat64},
      {"double", DType::kFloat64},    {"float16", DType::kFloat16}, {"half", DType::kFloat16},
      {"bfloat16", DType::kBFloat16}, {"int64", DType::kInt64},     {"long", DType::kInt64},
      {"int32", DType::kInt32},       {"int", DType::kInt32},       {"uint8", DType::kUInt8},
      {"bool", DType::kBool},
  };
  for (const Alias& a : kAliases) {
    if (a.name == name) return a.dtype;
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
