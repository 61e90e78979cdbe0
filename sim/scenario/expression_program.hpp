// The compiled form of a scenario expression: postfix code for a small stack machine, and the
// integer semantics shared by constant folding (at load time) and evaluation (on every rank).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/scenario/expression.hpp"

namespace meshsim::sim {

enum class ExprOp : uint8_t {
  kPush,       // value: the number
  kRank,       // the calling rank
  kWorldSize,  // the size of WORLD
  kNeg,
  kNot,
  kAbs,
  kToBool,  // v != 0
  kAdd,
  kSub,
  kMul,
  kDiv,  // floor division, as Python's //
  kMod,  // Python's %: the sign of the divisor
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kMin,            // value: how many operands to pop
  kMax,            // value: how many operands to pop
  kJump,           // value: target instruction
  kJumpIfZero,     // pops; value: target
  kJumpIfNonZero,  // pops; value: target
  kCoord,          // value: index into ExprProgram::calls
  kLocalRank,      // value: index into ExprProgram::calls
  kMeshSize,       // value: index into ExprProgram::calls
  kVariable,       // a repeat loop's variable; value: index into ExprProgram::variables
  kFault,          // a folded constant with no int64 value: value = fault kind * 256 + the op
};

struct ExprInstruction {
  ExprOp op;
  int64_t value = 0;
  size_t offset = 0;  // where in the text the operator or operand starts, for errors
};

// The mesh and dim a call names; dim is "" when omitted, or an index spelled in decimal.
struct ExprCall {
  std::string mesh;
  std::string dim;
  size_t mesh_offset = 0;
  size_t dim_offset = 0;
  bool dim_is_name = false;
};

// A name that is not built in: a repeat loop's variable, checked against the loops in scope.
struct ExprVariable {
  std::string name;
  size_t offset = 0;
};

struct ExprProgram {
  std::vector<ExprInstruction> code;
  std::vector<ExprCall> calls;
  std::vector<ExprVariable> variables;
  size_t max_stack = 0;  // deepest the value stack gets
};

// Why an integer operation has no int64 result.
enum class ExprFault { kNone, kOverflow, kZeroDivision };

struct ExprOutcome {
  int64_t value = 0;
  ExprFault fault = ExprFault::kNone;
};

// Arithmetic, comparison and logic with Python's integer semantics, reporting what int64 cannot
// hold instead of wrapping (INT64_MIN // -1, -INT64_MIN, abs(INT64_MIN), products too large).
ExprOutcome apply_unary(ExprOp op, int64_t v);
ExprOutcome apply_binary(ExprOp op, int64_t a, int64_t b);
// "+", "//", "abs", ... for messages.
std::string_view expr_op_symbol(ExprOp op);

// The error a fault raises: OverflowError or ZeroDivisionError naming the op and the column.
[[noreturn]] void raise_fault(ExprFault fault, ExprOp op, size_t offset, const std::string& text);

// Runs `program` on one rank. `text` is the source, quoted in errors with the column.
int64_t run_program(const ExprProgram& program, const std::string& text, const ExpressionEnv& env);

}  // namespace meshsim::sim
