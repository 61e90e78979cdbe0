// A tensor written out in a scenario file, as torch.tensor takes a nested list:
// [[1, 2], [3, 4]], [0.5, 1.5], or entries that are expressions of the rank ("rank + 1").
#pragma once

#include <optional>
#include <variant>
#include <vector>

#include <toml++/toml.h>

#include "sim/scenario/expression.hpp"
#include "sim/scenario/load_context.hpp"
#include "src/tensor/tensor.hpp"

namespace meshsim::sim {

class TensorLiteral {
 public:
  // A nested TOML array of numbers or expressions, rectangular, at most Tensor::kMaxDims deep.
  // The dtype is torch.tensor's inference unless given: int64 when every entry is an integer or
  // an expression, float32 when one is a float. InputError at the entry that is wrong (ragged,
  // too deep, a float in an integer dtype, an empty list inside a list).
  static TensorLiteral parse(const toml::node& node, LoadContext& ctx,
                             std::optional<DType> dtype = std::nullopt);
  Tensor make(const ExpressionEnv& env) const;
  size_t ndim() const { return shape_.size(); }

 private:
  std::vector<int64_t> shape_;
  std::vector<std::variant<double, Expression>> entries_;  // row-major
  DType dtype_ = DType::kInt64;
};

}  // namespace meshsim::sim
