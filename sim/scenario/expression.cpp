#include "sim/scenario/expression.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sim/scenario/expression_program.hpp"
#include "sim/scenario/expression_tokens.hpp"
#include "src/error.hpp"

namespace meshsim::sim {

namespace {

struct Function {
  std::string_view name;
  size_t min_args;
  size_t max_args;
  bool mesh_first;  // first argument names a mesh, the second (if any) a dim
};
constexpr Function kFunctions[] = {
    {"coord", 2, 2, true}, {"local_rank", 1, 2, true}, {"size", 1, 2, true},
    {"min", 1, 16, false}, {"max", 1, 16, false},      {"abs", 1, 1, false},
};

const Function* find_function(std::string_view name) {
  for (const Function& f : kFunctions) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// Recursive descent emitting postfix code, lowest precedence first:
// ternary > or > and > not > comparison > additive > multiplicative > unary > primary.
// Operations on constants are folded here, so `4294967296 * 4294967296` or `1 // 0` is an error at
// load time with its column.
class Compiler {
 public:
  explicit Compiler(std::string_view text) : tokens_(tokenize(text)) {}

  ExprProgram compile() {
    ternary();
    if (peek().kind != Token::Kind::kEnd) {
      throw ExpressionError(peek().offset, fmt::format("unexpected '{}'", peek().text));
    }
    refuse_certain_faults();
    program_.max_stack = stack_bound();
    return std::move(program_);
  }

 private:
  // Counts recursion through nesting constructs; the limit keeps the parser's stack bounded.
  class Nest {
   public:
    Nest(Compiler& c, size_t offset) : c_(c) {
      if (++c_.depth_ > Expression::kMaxNesting) {
        throw ExpressionError(
            offset, fmt::format("expression nests deeper than {} levels (parentheses, unary "
                                "operators, ternaries and calls)",
                                Expression::kMaxNesting));
      }
    }
    ~Nest() { --c_.depth_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    Compiler& c_;
  };

  const Token& peek() const { return tokens_[pos_]; }
  bool accept(std::string_view op) {
    const Token& t = peek();
    const bool word = t.kind == Token::Kind::kIdent && (op == "and" || op == "or" || op == "not");
    if ((t.kind == Token::Kind::kOp || word) && t.text == op) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(std::string_view op) {
    if (!accept(op)) {
      throw ExpressionError(peek().offset, fmt::format("expected '{}' but found '{}'", op,
                                                       peek().kind == Token::Kind::kEnd
                                                           ? std::string("end of expression")
                                                           : peek().text));
    }
  }

  std::vector<ExprInstruction>& code() { return program_.code; }
  size_t here() const { return program_.code.size(); }
  void emit(ExprOp op, size_t offset, int64_t value = 0) { code().push_back({op, value, offset}); }
  // Emits a jump whose target is patched later; returns its index.
  size_t emit_jump(ExprOp op, size_t offset) {
    emit(op, offset);
    return here() - 1;
  }
  void patch(size_t jump) { code()[jump].value = static_cast<int64_t>(here()); }
  // Whether the code from `start` to the end is one constant.
  bool is_constant_from(size_t start) const {
    return program_.code.size() == start + 1 && program_.code[start].op == ExprOp::kPush;
  }
  // Replaces the code from `start` with one constant, or reports why it has no value.
  // A constant that has no int64 value becomes a fault: an error where it is evaluated, so that a
  // branch never taken (`0 and 1 // 0`) stays harmless, as in Python.
  void fold_to(size_t start, ExprOutcome r, ExprOp op, size_t offset) {
    code().resize(start);
    if (r.fault == ExprFault::kNone) return emit(ExprOp::kPush, offset, r.value);
    emit(ExprOp::kFault, offset, static_cast<int64_t>(r.fault) * 256 + static_cast<int64_t>(op));
  }
  void unary_op(ExprOp op, size_t start, size_t offset) {
    if (is_constant_from(start))
      return fold_to(start, apply_unary(op, code()[start].value), op, offset);
    emit(op, offset);
  }
  void binary_op(ExprOp op, size_t left, size_t right, size_t offset) {
    if (right == left + 1 && is_constant_from(right) && code()[left].op == ExprOp::kPush) {
      return fold_to(left, apply_binary(op, code()[left].value, code()[right].value), op, offset);
    }
    emit(op, offset);
  }

  void ternary() {
    Nest nest(*this, peek().offset);
    const size_t start = here();
    logical_or();
    const size_t at = peek().offset;
    if (!accept("?")) return;
    const size_t to_else = emit_jump(ExprOp::kJumpIfZero, at);
    ternary();
    expect(":");
    const size_t to_end = emit_jump(ExprOp::kJump, at);
    patch(to_else);
    ternary();
    patch(to_end);
    // A constant condition picks its branch at load time; the other is never evaluated.
    if (program_.code[start].op == ExprOp::kPush && start + 1 == to_else) {
      const bool yes = program_.code[start].value != 0;
      keep_only(start, yes ? to_else + 1 : to_end + 1, yes ? to_end : here());
    }
  }
  // Replaces the code from `start` with the code in [from, to), moving its jumps with it (they
  // only ever target places inside it or its end).
  void keep_only(size_t start, size_t from, size_t to) {
    std::vector<ExprInstruction> kept(code().begin() + static_cast<ptrdiff_t>(from),
                                      code().begin() + static_cast<ptrdiff_t>(to));
    for (ExprInstruction& in : kept) {
      if (in.op == ExprOp::kJump || in.op == ExprOp::kJumpIfZero ||
          in.op == ExprOp::kJumpIfNonZero) {
        in.value -= static_cast<int64_t>(from - start);
      }
    }
    code().resize(start);
    code().insert(code().end(), kept.begin(), kept.end());
  }
  // `a and b` / `a or b`: b runs only when a does not decide; the result is 0 or 1.
  void short_circuit(ExprOp jump_when_decided, int64_t decided_value, size_t left, size_t at,
                     void (Compiler::*operand)()) {
    const size_t decided = emit_jump(jump_when_decided, at);
    const size_t right = here();
    (this->*operand)();
    if (left + 1 == decided && code()[left].op == ExprOp::kPush) {
      // A constant left side: it decides (the right side is never evaluated), or the result is
      // the right side's truth value.
      const int64_t a = code()[left].value;
      if ((a != 0) == (decided_value != 0)) {
        code().resize(left);
        return emit(ExprOp::kPush, at, decided_value);
      }
      keep_only(left, right, here());
      return unary_op(ExprOp::kToBool, left, at);
    }
    emit(ExprOp::kToBool, at);
    const size_t to_end = emit_jump(ExprOp::kJump, at);
    patch(decided);
    emit(ExprOp::kPush, at, decided_value);
    patch(to_end);
  }
  void logical_or() {
    size_t left = here();
    logical_and();
    for (size_t at = peek().offset; accept("or") || accept("||"); at = peek().offset) {
      short_circuit(ExprOp::kJumpIfNonZero, 1, left, at, &Compiler::logical_and);
    }
  }
  void logical_and() {
    size_t left = here();
    logical_not();
    for (size_t at = peek().offset; accept("and") || accept("&&"); at = peek().offset) {
      short_circuit(ExprOp::kJumpIfZero, 0, left, at, &Compiler::logical_not);
    }
  }
  void logical_not() {
    const size_t at = peek().offset;
    if (accept("not") || accept("!")) {
      Nest nest(*this, at);
      const size_t start = here();
      logical_not();
      return unary_op(ExprOp::kNot, start, at);
    }
    comparison();
  }
  void comparison() {
    const size_t left = here();
    bool compared = false;
    additive();
    for (;;) {
      const size_t at = peek().offset;
      std::optional<ExprOp> op;
      for (const auto& [text, code] : {std::pair{"==", ExprOp::kEq}, std::pair{"!=", ExprOp::kNe},
                                       std::pair{"<=", ExprOp::kLe}, std::pair{">=", ExprOp::kGe},
                                       std::pair{"<", ExprOp::kLt}, std::pair{">", ExprOp::kGt}}) {
        if (accept(text)) {
          op = code;
          break;
        }
      }
      if (!op) return;
      if (compared) {
        throw ExpressionError(at,
                              "chained comparisons (a < b < c) are not supported; write "
                              "a < b and b < c");
      }
      compared = true;
      const size_t right = here();
      additive();
      binary_op(*op, left, right, at);
    }
  }
  void additive() {
    const size_t left = here();
    multiplicative();
    for (;;) {
      const size_t at = peek().offset;
      ExprOp op;
      if (accept("+")) {
        op = ExprOp::kAdd;
      } else if (accept("-")) {
        op = ExprOp::kSub;
      } else {
        return;
      }
      const size_t right = here();
      multiplicative();
      binary_op(op, left, right, at);
    }
  }
  void multiplicative() {
    const size_t left = here();
    unary();
    for (;;) {
      const size_t at = peek().offset;
      ExprOp op;
      if (accept("*")) {
        op = ExprOp::kMul;
      } else if (accept("//") || accept("/")) {
        op = ExprOp::kDiv;
      } else if (accept("%")) {
        op = ExprOp::kMod;
      } else {
        return;
      }
      const size_t right = here();
      unary();
      binary_op(op, left, right, at);
    }
  }
  void unary() {
    const size_t at = peek().offset;
    const bool minus = accept("-");
    if (!minus && !accept("+")) return primary();
    Nest nest(*this, at);
    const size_t start = here();
    unary();
    if (minus) unary_op(ExprOp::kNeg, start, at);
  }
  void primary() {
    const Token t = peek();
    if (t.kind == Token::Kind::kNumber) {
      ++pos_;
      return emit(ExprOp::kPush, t.offset, t.number);
    }
    if (accept("(")) {
      ternary();
      return expect(")");
    }
    if (t.kind != Token::Kind::kIdent) {
      throw ExpressionError(t.offset, t.kind == Token::Kind::kEnd
                                          ? std::string("expression ends too early")
                                          : fmt::format("unexpected '{}'", t.text));
    }
    ++pos_;
    if (!accept("(")) {
      if (t.text == "true" || t.text == "false") {
        return emit(ExprOp::kPush, t.offset, t.text == "true" ? 1 : 0);
      }
      if (t.text == "rank") return emit(ExprOp::kRank, t.offset);
      if (t.text == "world_size") return emit(ExprOp::kWorldSize, t.offset);
      // Any other name is a repeat variable; check() says whether one is in scope.
      program_.variables.push_back({t.text, t.offset});
      return emit(ExprOp::kVariable, t.offset, static_cast<int64_t>(program_.variables.size() - 1));
    }
    const Function* f = find_function(t.text);
    if (f == nullptr) {
      throw ExpressionError(t.offset, fmt::format("unknown function '{}' (expected coord, "
                                                  "local_rank, size, min, max or abs)",
                                                  t.text));
    }
    if (f->mesh_first) return mesh_call(*f, t);
    size_t count = 0;
    const size_t start = here();
    bool all_constant = true;
    if (!accept(")")) {
      do {
        const size_t arg = here();
        ternary();
        all_constant = all_constant && is_constant_from(arg);
        ++count;
      } while (accept(","));
      expect(")");
    }
    check_arity(*f, t, count);
    const ExprOp op = f->name == "abs"   ? ExprOp::kAbs
                      : f->name == "min" ? ExprOp::kMin
                                         : ExprOp::kMax;
    if (op == ExprOp::kAbs) return unary_op(op, start, t.offset);
    if (all_constant) {
      int64_t out = code()[start].value;
      for (size_t i = 1; i < count; ++i) out = apply_binary(op, out, code()[start + i].value).value;
      code().resize(start);
      return emit(ExprOp::kPush, t.offset, out);
    }
    emit(op, t.offset, static_cast<int64_t>(count));
  }
  // coord(mesh, dim), local_rank(mesh[, dim]), size(mesh[, dim]): names, not values.
  void mesh_call(const Function& f, const Token& t) {
    ExprCall call;
    std::vector<Token> args;
    if (!accept(")")) {
      do {
        const Token arg = peek();
        const bool name = arg.kind == Token::Kind::kIdent;
        const bool index = arg.kind == Token::Kind::kNumber && !args.empty();
        if (!name && !index) {
          throw ExpressionError(arg.offset,
                                args.empty() ? fmt::format("{}() takes a mesh name first", f.name)
                                             : fmt::format("{}() takes a dim name or index "
                                                           "after the mesh",
                                                           f.name));
        }
        ++pos_;
        args.push_back(arg);
      } while (accept(","));
      expect(")");
    }
    check_arity(f, t, args.size());
    call.mesh = args[0].text;
    call.mesh_offset = args[0].offset;
    if (args.size() > 1) {
      call.dim_is_name = args[1].kind == Token::Kind::kIdent;
      call.dim = call.dim_is_name ? args[1].text : std::to_string(args[1].number);
      call.dim_offset = args[1].offset;
    }
    program_.calls.push_back(std::move(call));
    const ExprOp op = f.name == "coord"  ? ExprOp::kCoord
                      : f.name == "size" ? ExprOp::kMeshSize
                                         : ExprOp::kLocalRank;
    emit(op, t.offset, static_cast<int64_t>(program_.calls.size() - 1));
  }
  static void check_arity(const Function& f, const Token& t, size_t count) {
    if (count >= f.min_args && count <= f.max_args) return;
    throw ExpressionError(
        t.offset,
        fmt::format("{}() takes {} argument{}, got {}", f.name,
                    f.min_args == f.max_args ? std::to_string(f.min_args)
                                             : fmt::format("{} to {}", f.min_args, f.max_args),
                    f.max_args == 1 ? "" : "s", count));
  }
  static bool can_fail(ExprOp op) {
    switch (op) {
      case ExprOp::kAdd:
      case ExprOp::kSub:
      case ExprOp::kMul:
      case ExprOp::kDiv:
      case ExprOp::kMod:
      case ExprOp::kNeg:
      case ExprOp::kAbs:
      case ExprOp::kCoord:
      case ExprOp::kLocalRank:
      case ExprOp::kMeshSize:
        return true;
      default:
        return false;
    }
  }
  // Code without branches runs every instruction: a fault there fails on every rank, so it is a
  // load-time error at its column. Behind a rank-dependent branch it stays a run-time error.
  void refuse_certain_faults() const {
    const auto& code = program_.code;
    const bool branches = std::any_of(code.begin(), code.end(), [](const ExprInstruction& in) {
      return in.op == ExprOp::kJump || in.op == ExprOp::kJumpIfZero ||
             in.op == ExprOp::kJumpIfNonZero;
    });
    if (branches) return;
    for (const ExprInstruction& in : code) {
      // An earlier step that may fail on some rank fails first there, with its own error.
      if (can_fail(in.op)) return;
      if (in.op != ExprOp::kFault) continue;
      const auto fault = static_cast<ExprFault>(in.value / 256);
      if (fault == ExprFault::kZeroDivision) throw ExpressionError(in.offset, "division by zero");
      throw ExpressionError(in.offset,
                            fmt::format("integer overflow in '{}': the result does not fit in "
                                        "int64",
                                        expr_op_symbol(static_cast<ExprOp>(in.value % 256))));
    }
  }
  // An upper bound of the value stack's depth (both sides of a branch are counted).
  size_t stack_bound() const {
    int64_t depth = 0;
    int64_t most = 0;
    for (const ExprInstruction& in : program_.code) {
      switch (in.op) {
        case ExprOp::kPush:
        case ExprOp::kRank:
        case ExprOp::kWorldSize:
        case ExprOp::kVariable:
        case ExprOp::kCoord:
        case ExprOp::kLocalRank:
        case ExprOp::kMeshSize:
        case ExprOp::kFault:
          ++depth;
          break;
        case ExprOp::kMin:
        case ExprOp::kMax:
          depth -= in.value - 1;
          break;
        case ExprOp::kNeg:
        case ExprOp::kNot:
        case ExprOp::kAbs:
        case ExprOp::kToBool:
        case ExprOp::kJump:
          break;
        default:
          --depth;
          break;
      }
      most = std::max(most, depth + 1);
    }
    return static_cast<size_t>(most);
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  size_t depth_ = 0;
  ExprProgram program_;
};

}  // namespace

Expression Expression::parse(std::string_view text) {
  Expression e;
  e.text_ = std::string(text);
  e.program_ = std::make_shared<const ExprProgram>(Compiler(text).compile());
  return e;
}

Expression Expression::constant(int64_t value) {
  Expression e;
  e.text_ = std::to_string(value);
  ExprProgram program;
  program.code.push_back({ExprOp::kPush, value, 0});
  program.max_stack = 1;
  e.program_ = std::make_shared<const ExprProgram>(std::move(program));
  return e;
}

void Expression::check(const ExpressionSchema& schema) const {
  if (!program_->variables.empty()) {
    const std::vector<std::string> in_scope = schema.variables();
    for (const ExprVariable& v : program_->variables) {
      if (std::find(in_scope.begin(), in_scope.end(), v.name) != in_scope.end()) continue;
      throw ExpressionError(
          v.offset, fmt::format("unknown name '{}' (expected rank, world_size, {}a number or a "
                                "function call)",
                                v.name,
                                in_scope.empty() ? std::string()
                                                 : fmt::format("a repeat variable ({}), ",
                                                               fmt::join(in_scope, ", "))));
    }
  }
  for (const ExprCall& call : program_->calls) {
    const std::optional<std::vector<std::string>> dims = schema.mesh_dims(call.mesh);
    if (!dims) throw ExpressionError(call.mesh_offset, fmt::format("unknown mesh '{}'", call.mesh));
    if (!call.dim_is_name) continue;
    if (std::find(dims->begin(), dims->end(), call.dim) == dims->end()) {
      throw ExpressionError(call.dim_offset,
                            fmt::format("mesh '{}' has no dim '{}' (its dims: {})", call.mesh,
                                        call.dim, fmt::join(*dims, ", ")));
    }
  }
}

int64_t ExpressionEnv::variable(const std::string& name) const {
  throw runtime_error(fmt::format("'{}' is no repeat variable in scope here", name));
}

int64_t Expression::evaluate(const ExpressionEnv& env) const {
  return run_program(*program_, text_, env);
}

bool Expression::is_constant() const {
  return program_->code.size() == 1 && program_->code[0].op == ExprOp::kPush;
}

std::optional<int64_t> Expression::constant_value() const {
  if (!is_constant()) return std::nullopt;
  return program_->code[0].value;
}

}  // namespace meshsim::sim
