#include "src/comm/reduce_op.hpp"

#include <fmt/format.h>

#include "src/enum_names.hpp"
#include "src/error.hpp"

namespace meshsim {

constexpr EnumName<ReduceOp> kReduceOpNames[] = {
    {ReduceOp::kSum, "sum"}, {ReduceOp::kAvg, "avg"},         {ReduceOp::kMin, "min"},
    {ReduceOp::kMax, "max"}, {ReduceOp::kProduct, "product"},
};

std::string_view reduce_op_name(ReduceOp op) {
  return name_in(kReduceOpNames, op);
}

ReduceOp parse_reduce_op(std::string_view name) {
  if (const std::optional<ReduceOp> op = value_in(kReduceOpNames, name)) return *op;
  throw value_error(
      fmt::format("unknown reduce op \"{}\" (expected sum, avg, min, max or product)", name));
}

}  // namespace meshsim
