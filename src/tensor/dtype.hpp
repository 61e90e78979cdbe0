// Element types meshsim tensors carry, their sizes and names, and the 16-bit float encodings.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace meshsim {

enum class DType { kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool };

size_t dtype_size(DType dtype);
bool is_floating(DType dtype);
// PyTorch's name without the "torch." prefix: "float32", "bfloat16", "bool", ...
std::string_view dtype_name(DType dtype);
// c10's ScalarType name, as PyTorch's kernel errors print it: "Float", "Long", "BFloat16", ...
std::string_view scalar_type_name(DType dtype);
// The type torch.full's overflow error names ("int", "uint8_t", ...).
std::string_view c_type_name(DType dtype);
// caffe2's TypeMeta name of a floating dtype, as uniform_'s bound errors print it ("float",
// "double", "c10::Half", "c10::BFloat16").
std::string_view type_meta_name(DType dtype);
// Accepts PyTorch's names and aliases ("float32", "float", "torch.half", "int", "long", ...).
std::optional<DType> parse_dtype(std::string_view name);

// IEEE binary16 and bfloat16 from float, rounding to nearest even (NaN stays NaN).
uint16_t float_to_half_bits(float value);
float half_bits_to_float(uint16_t bits);
uint16_t float_to_bfloat16_bits(float value);
float bfloat16_bits_to_float(uint16_t bits);

// `v`, computed in float or double, as a kernel stores it into a tensor of `dtype`: rounded to
// float16, bfloat16 or float32 (through float, as the kernels convert), unchanged otherwise.
double stored_as(DType dtype, double v);

}  // namespace meshsim
