// Tensor constructors in scenario files: "ones(4)", "zeros(2, 3)", "arange(8)",
// "full(4, rank + 1)", "meta(1024, 1024)", each with an optional ", dtype=float64". Sizes and fill
// values are expressions, so they may differ by rank.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/scenario/expression.hpp"
#include "src/tensor/tensor.hpp"

namespace meshsim::sim {

class TensorSpec {
 public:
  // Throws ExpressionError (offset into `text`) on an unknown constructor or bad arguments.
  static TensorSpec parse(std::string_view text);
  void check(const ExpressionSchema& schema) const;
  // When every size is a constant, refuses at load time (ExpressionError) a shape whose byte size
  // overflows int64, or whose data on `ranks` ranks would not fit the MemoryBudget.
  void check_size(int64_t ranks) const;
  // Throws meshsim::Error (ValueError) on a negative size.
  Tensor make(const ExpressionEnv& env) const;
  const std::string& text() const { return text_; }
  size_t ndim() const { return sizes_.size(); }

 private:
  std::string text_;
  std::string kind_;
  std::vector<Expression> sizes_;
  std::optional<Expression> fill_;
  DType dtype_ = DType::kFloat32;
};

}  // namespace meshsim::sim
