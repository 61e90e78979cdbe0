#include "src/comm/reduce_op.hpp"

#include <fmt/format.h>

#include "src/error.hpp"

namespace meshsim {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kProduct:
      return "product";
  }
  return "?";
}

ReduceOp parse_reduce_op(std::string_view name) {
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
    if (reduce_op_name(op) == name) return op;
  }
  throw value_error(
      fmt::format("unknown reduce op \"{}\" (expected sum, avg, min, max or product)", name));
}

}  // namespace meshsim
