// The small integer expression language of scenario files: per-rank values such as
// `123 + coord(world, pp)` or `rank != 3`. Parsed once at load time, evaluated on every rank.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace meshsim::sim {

// A syntax or name error at `offset` (0-based) inside the expression text.
class ExpressionError : public std::runtime_error {
 public:
  ExpressionError(size_t offset, const std::string& message)
      : std::runtime_error(message), offset_(offset) {}
  size_t offset() const { return offset_; }

 private:
  size_t offset_;
};

// What evaluation may ask of the rank it runs on. Mesh queries throw meshsim::Error when the
// rank is not in the mesh or the mesh does not exist on this rank.
class ExpressionEnv {
 public:
  virtual ~ExpressionEnv() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t world_size() const = 0;
  virtual int64_t coord(const std::string& mesh, const std::string& dim) const = 0;
  virtual int64_t local_rank(const std::string& mesh, const std::string& dim) const = 0;
  virtual int64_t mesh_size(const std::string& mesh, const std::string& dim) const = 0;
  // The value of a repeat loop's variable in scope; throws meshsim::Error when there is none.
  virtual int64_t variable(const std::string& name) const;
};

// What the loader knows before running: which meshes exist and their dim names.
class ExpressionSchema {
 public:
  virtual ~ExpressionSchema() = default;
  // Dim names of a declared mesh (an empty list for an unnamed mesh), nullopt if undeclared.
  virtual std::optional<std::vector<std::string>> mesh_dims(const std::string& mesh) const = 0;
  // The repeat loops' variables in scope where the expression is, innermost last.
  virtual std::vector<std::string> variables() const { return {}; }
};

// A compiled expression: postfix code for a small stack machine.
struct ExprProgram;

// Expressions compile to postfix code run on an explicit stack, so evaluating one never recurses:
// a chain of 100,000 `+ 1` is as safe on a 64 KiB fiber stack as `1 + 1`. Parsing recurses only
// for nesting (parentheses, unary operators, ternaries), which is limited to kMaxNesting levels.
class Expression {
 public:
  static constexpr size_t kMaxNesting = 64;

  // Parses `text`; throws ExpressionError on bad syntax, unknown names, wrong arity, nesting
  // deeper than kMaxNesting, and on constant parts that overflow int64 or divide by zero.
  static Expression parse(std::string_view text);
  // A constant, for values given as TOML integers.
  static Expression constant(int64_t value);

  // Throws ExpressionError naming an undeclared mesh, a dim the mesh does not have, or a name
  // that is no repeat variable in scope.
  void check(const ExpressionSchema& schema) const;
  // Integers throughout; comparisons and logic yield 0 or 1; `/` and `%` follow Python (floor).
  // Throws meshsim::Error with the expression text and column: ZeroDivisionError on division by
  // zero, OverflowError when a result does not fit in int64.
  int64_t evaluate(const ExpressionEnv& env) const;

  const std::string& text() const { return text_; }
  // True when the expression does not depend on the rank (no names, no calls, no variables).
  bool is_constant() const;
  // The value of a constant expression; nullopt when it depends on the rank.
  std::optional<int64_t> constant_value() const;

 private:
  std::string text_;
  std::shared_ptr<const ExprProgram> program_;
};

}  // namespace meshsim::sim
