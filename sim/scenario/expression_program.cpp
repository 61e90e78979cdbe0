#include "sim/scenario/expression_program.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sim/scenario/excerpt.hpp"

#include "src/checked_math.hpp"
#include "src/enum_names.hpp"
#include "src/error.hpp"

namespace meshsim::sim {

namespace {

ExprOutcome from(std::optional<int64_t> v) {
  return v ? ExprOutcome{*v, ExprFault::kNone} : ExprOutcome{0, ExprFault::kOverflow};
}

ExprOutcome ok(int64_t v) {
  return {v, ExprFault::kNone};
}

}  // namespace

constexpr EnumName<ExprOp> kExprOpSymbols[] = {
    {ExprOp::kNeg, "-"},   {ExprOp::kSub, "-"},   {ExprOp::kNot, "not"}, {ExprOp::kAbs, "abs"},
    {ExprOp::kAdd, "+"},   {ExprOp::kMul, "*"},   {ExprOp::kDiv, "//"},  {ExprOp::kMod, "%"},
    {ExprOp::kMin, "min"}, {ExprOp::kMax, "max"},
};

std::string_view expr_op_symbol(ExprOp op) {
  return name_in(kExprOpSymbols, op);
}

ExprOutcome apply_unary(ExprOp op, int64_t v) {
  switch (op) {
    case ExprOp::kNeg:
      return from(checked_sub(0, v));
    case ExprOp::kAbs:
      return v < 0 ? from(checked_sub(0, v)) : ok(v);
    case ExprOp::kNot:
      return ok(v == 0 ? 1 : 0);
    case ExprOp::kToBool:
      return ok(v != 0 ? 1 : 0);
    default:
      return ok(v);
  }
}

ExprOutcome apply_binary(ExprOp op, int64_t a, int64_t b) {
  switch (op) {
    case ExprOp::kAdd:
      return from(checked_add(a, b));
    case ExprOp::kSub:
      return from(checked_sub(a, b));
    case ExprOp::kMul:
      return from(checked_mul(a, b));
    case ExprOp::kDiv: {
      if (b == 0) return {0, ExprFault::kZeroDivision};
      if (b == -1) return from(checked_sub(0, a));  // INT64_MIN // -1 does not fit
      const int64_t q = a / b;
      return ok((a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q);
    }
    case ExprOp::kMod: {
      if (b == 0) return {0, ExprFault::kZeroDivision};
      if (b == -1) return ok(0);  // Python's answer; C++'s INT64_MIN % -1 traps
      const int64_t r = a % b;
      return ok((r != 0 && ((r < 0) != (b < 0))) ? r + b : r);
    }
    case ExprOp::kEq:
      return ok(a == b);
    case ExprOp::kNe:
      return ok(a != b);
    case ExprOp::kLt:
      return ok(a < b);
    case ExprOp::kLe:
      return ok(a <= b);
    case ExprOp::kGt:
      return ok(a > b);
    case ExprOp::kGe:
      return ok(a >= b);
    case ExprOp::kMin:
      return ok(std::min(a, b));
    case ExprOp::kMax:
      return ok(std::max(a, b));
    default:
      return ok(0);
  }
}

namespace {

[[noreturn]] void fail(ExprFault fault, const ExprInstruction& at, const std::string& text) {
  raise_fault(fault, at.op, at.offset, text);
}

}  // namespace

void raise_fault(ExprFault fault, ExprOp op, size_t offset, const std::string& text) {
  const std::string where = fmt::format("at column {} of \"{}\"", offset + 1, excerpt(text));
  if (fault == ExprFault::kZeroDivision) {
    throw Error(PyErrorType::kZeroDivisionError, "division by zero " + where);
  }
  throw overflow_error(fmt::format("integer overflow in '{}' {}: the result does not fit in int64",
                                   expr_op_symbol(op), where));
}

int64_t run_program(const ExprProgram& program, const std::string& text, const ExpressionEnv& env) {
  std::vector<int64_t> stack;
  stack.reserve(program.max_stack);
  auto pop = [&stack] {
    const int64_t v = stack.back();
    stack.pop_back();
    return v;
  };
  const std::vector<ExprInstruction>& code = program.code;
  for (size_t pc = 0; pc < code.size(); ++pc) {
    const ExprInstruction& in = code[pc];
    switch (in.op) {
      case ExprOp::kPush:
        stack.push_back(in.value);
        break;
      case ExprOp::kRank:
        stack.push_back(env.rank());
        break;
      case ExprOp::kWorldSize:
        stack.push_back(env.world_size());
        break;
      case ExprOp::kVariable:
        stack.push_back(env.variable(program.variables[static_cast<size_t>(in.value)].name));
        break;
      case ExprOp::kNeg:
      case ExprOp::kNot:
      case ExprOp::kAbs:
      case ExprOp::kToBool: {
        const ExprOutcome r = apply_unary(in.op, pop());
        if (r.fault != ExprFault::kNone) fail(r.fault, in, text);
        stack.push_back(r.value);
        break;
      }
      case ExprOp::kMin:
      case ExprOp::kMax: {
        // Operands were pushed left to right; fold them in that order.
        const size_t n = static_cast<size_t>(in.value);
        const auto first = stack.end() - static_cast<ptrdiff_t>(n);
        int64_t out = *first;
        for (auto it = first + 1; it != stack.end(); ++it)
          out = in.op == ExprOp::kMin ? std::min(out, *it) : std::max(out, *it);
        stack.erase(first, stack.end());
        stack.push_back(out);
        break;
      }
      case ExprOp::kJump:
        pc = static_cast<size_t>(in.value) - 1;
        break;
      case ExprOp::kJumpIfZero:
        if (pop() == 0) pc = static_cast<size_t>(in.value) - 1;
        break;
      case ExprOp::kJumpIfNonZero:
        if (pop() != 0) pc = static_cast<size_t>(in.value) - 1;
        break;
      case ExprOp::kFault:
        raise_fault(static_cast<ExprFault>(in.value / 256), static_cast<ExprOp>(in.value % 256),
                    in.offset, text);
      case ExprOp::kCoord:
      case ExprOp::kLocalRank:
      case ExprOp::kMeshSize: {
        const ExprCall& call = program.calls[static_cast<size_t>(in.value)];
        stack.push_back(in.op == ExprOp::kCoord       ? env.coord(call.mesh, call.dim)
                        : in.op == ExprOp::kLocalRank ? env.local_rank(call.mesh, call.dim)
                                                      : env.mesh_size(call.mesh, call.dim));
        break;
      }
      default: {
        const int64_t b = pop();
        const int64_t a = pop();
        const ExprOutcome r = apply_binary(in.op, a, b);
        if (r.fault != ExprFault::kNone) fail(r.fault, in, text);
        stack.push_back(r.value);
        break;
      }
    }
  }
  return stack.back();
}

}  // namespace meshsim::sim
