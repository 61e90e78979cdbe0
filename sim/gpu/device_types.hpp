// meshsim's dtypes and reduce ops as the device side names them (NCCL's element types and ops,
// the CUDA random kernel's element types), each map one table read both ways.
#pragma once

#include <cstddef>
#include <optional>

#include "sim/gpu/device_api.hpp"
#include "sim/gpu/kernel/random_kernel.hpp"
#include "src/comm/reduce_op.hpp"
#include "src/error.hpp"
#include "src/tensor/dtype.hpp"

namespace meshsim::sim::gpu {

namespace device_types_detail {

template <typename A, typename B>
struct Pair {
  A ours;
  B theirs;
};

// A value of ours maps to the first row naming it; one of theirs back to its first row too.
template <typename A, typename B, size_t N>
constexpr std::optional<B> theirs_of(const Pair<A, B> (&table)[N], A ours) {
  for (const Pair<A, B>& p : table) {
    if (p.ours == ours) return p.theirs;
  }
  return std::nullopt;
}

template <typename A, typename B, size_t N>
constexpr A ours_of(const Pair<A, B> (&table)[N], B theirs) {
  for (const Pair<A, B>& p : table) {
    if (p.theirs == theirs) return p.ours;
  }
  return table[0].ours;
}

inline constexpr Pair<DType, NcclType> kNcclTypes[] = {
    {DType::kFloat32, NcclType::kFloat32}, {DType::kFloat64, NcclType::kFloat64},
    {DType::kFloat16, NcclType::kFloat16}, {DType::kBFloat16, NcclType::kBFloat16},
    {DType::kInt64, NcclType::kInt64},     {DType::kInt32, NcclType::kInt32},
    {DType::kUInt8, NcclType::kUInt8},     {DType::kBool, NcclType::kUInt8},
};

inline constexpr Pair<ReduceOp, NcclOp> kNcclOps[] = {
    {ReduceOp::kSum, NcclOp::kSum},      {ReduceOp::kAvg, NcclOp::kAvg},
    {ReduceOp::kMin, NcclOp::kMin},      {ReduceOp::kMax, NcclOp::kMax},
    {ReduceOp::kProduct, NcclOp::kProd},
};

inline constexpr Pair<DType, RandomDType> kRandomDTypes[] = {
    {DType::kFloat32, RandomDType::kFloat32},
    {DType::kFloat64, RandomDType::kFloat64},
    {DType::kFloat16, RandomDType::kFloat16},
    {DType::kBFloat16, RandomDType::kBFloat16},
};

}  // namespace device_types_detail

// NCCL's element type for `dtype`; bool travels as uint8, as c10d sends it.
inline NcclType nccl_type(DType dtype) {
  const std::optional<NcclType> type = theirs_of(device_types_detail::kNcclTypes, dtype);
  MESHSIM_ASSERT(type.has_value(), "a dtype without an NCCL type");
  return *type;
}

// The dtype NCCL's type holds (uint8 for kUInt8).
inline DType dtype_of(NcclType type) {
  return ours_of(device_types_detail::kNcclTypes, type);
}

// c10d's NCCL op for `op` over `dtype`; over bool a sum is a logical or (max) and a product an
// and (min), and avg is c10d's ValueError.
inline NcclOp nccl_op(ReduceOp op, DType dtype) {
  if (dtype == DType::kBool) {
    if (op == ReduceOp::kAvg) throw value_error("Cannot use ReduceOp.AVG with boolean inputs");
    return op == ReduceOp::kSum || op == ReduceOp::kMax ? NcclOp::kMax : NcclOp::kMin;
  }
  const std::optional<NcclOp> nccl = theirs_of(device_types_detail::kNcclOps, op);
  MESHSIM_ASSERT(nccl.has_value(), "a reduce op without an NCCL op");
  return *nccl;
}

// The reduce op a non-bool NCCL op computes.
inline ReduceOp reduce_of(NcclOp op) {
  return ours_of(device_types_detail::kNcclOps, op);
}

// The random kernel's element type; nullopt for a dtype it does not fill (integers, bool).
inline std::optional<RandomDType> random_dtype(DType dtype) {
  return theirs_of(device_types_detail::kRandomDTypes, dtype);
}

inline DType dtype_of(RandomDType type) {
  return ours_of(device_types_detail::kRandomDTypes, type);
}

}  // namespace meshsim::sim::gpu
