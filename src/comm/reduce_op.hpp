// The reductions collectives apply (c10d's ReduceOp), shared by the backends and by Partial
// placements.
#pragma once

#include <string_view>

namespace meshsim {

enum class ReduceOp { kSum, kAvg, kMin, kMax, kProduct };
std::string_view reduce_op_name(ReduceOp op);
// "sum", "avg", "min", "max", "product"; throws meshsim::Error (ValueError) otherwise.
ReduceOp parse_reduce_op(std::string_view name);

}  // namespace meshsim
