// meshsim's floating dtypes as the CUDA random kernel names them (kept apart from
// random_kernel.hpp, which nvcc compiles and which therefore includes nothing of the model).
#pragma once

#include <optional>

#include "sim/gpu/kernel/random_kernel.hpp"
#include "src/tensor/dtype.hpp"

namespace meshsim::sim::gpu {

// nullopt for a dtype the kernel does not fill (integers, bool).
inline std::optional<RandomDType> random_dtype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return RandomDType::kFloat32;
    case DType::kFloat64:
      return RandomDType::kFloat64;
    case DType::kFloat16:
      return RandomDType::kFloat16;
    case DType::kBFloat16:
      return RandomDType::kBFloat16;
    default:
      return std::nullopt;
  }
}

}  // namespace meshsim::sim::gpu
