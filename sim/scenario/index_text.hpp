// Python's basic indexing written in a scenario file: "[1, ::2, None, ...]", where every integer
// is an expression of the rank ("[rank % 2, :]"). A ternary inside a slice bound needs
// parentheses, since a top-level ':' separates the bounds as in Python.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/scenario/expression.hpp"
#include "src/tensor/strided_view.hpp"

namespace meshsim::sim {

class IndexText {
 public:
  // An expression and where it starts in the text, for errors found when checking it.
  struct Located {
    Expression expression;
    size_t offset = 0;
  };

  // At most this many entries (PyTorch's 25 dims leave no use for more).
  static constexpr size_t kMaxEntries = 64;

  // Throws ExpressionError (offset into `text`) on a missing bracket, an empty entry, a slice
  // with more than two colons, too many entries, or a bad expression.
  static IndexText parse(std::string_view text);
  void check(const ExpressionSchema& schema) const;
  std::vector<IndexEntry> evaluate(const ExpressionEnv& env) const;
  // Whether the index has a top-level comma, as Python's tuple of indices (t[0,] included).
  bool is_tuple() const { return tuple_; }
  const std::string& text() const { return text_; }

 private:
  struct Part {
    IndexEntry::Kind kind = IndexEntry::Kind::kSlice;
    std::optional<Located> integer;  // kInteger
    std::optional<Located> start;    // kSlice
    std::optional<Located> stop;
    std::optional<Located> step;
  };
  std::string text_;
  std::vector<Part> parts_;
  bool tuple_ = false;
};

}  // namespace meshsim::sim
