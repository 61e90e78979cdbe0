// The storage classes torch.save names for a tensor's elements (`torch.FloatStorage`, ...), with
// the dtype each holds where meshsim has it: what a torch.save archive is read and written with.
#pragma once

#include <optional>
#include <string_view>

#include "src/tensor/dtype.hpp"

namespace meshsim {

struct TorchStorageClass {
  std::string_view name;
  std::optional<DType> dtype;
};

inline constexpr TorchStorageClass kTorchStorageClasses[] = {
    {"FloatStorage", DType::kFloat32},     {"DoubleStorage", DType::kFloat64},
    {"HalfStorage", DType::kFloat16},      {"BFloat16Storage", DType::kBFloat16},
    {"LongStorage", DType::kInt64},        {"IntStorage", DType::kInt32},
    {"ByteStorage", DType::kUInt8},        {"BoolStorage", DType::kBool},
    {"ShortStorage", std::nullopt},        {"CharStorage", std::nullopt},
    {"ComplexFloatStorage", std::nullopt}, {"ComplexDoubleStorage", std::nullopt},
};

// The class torch.save names for `dtype`'s storage.
constexpr std::string_view torch_storage_class(DType dtype) {
  for (const TorchStorageClass& storage : kTorchStorageClasses) {
    if (storage.dtype == dtype) return storage.name;
  }
  return {};
}

}  // namespace meshsim
