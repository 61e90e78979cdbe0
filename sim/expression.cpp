#include "sim/expression.hpp"

#include <cctype>
#include <functional>

#include <fmt/format.h>

#include "src/error.hpp"

namespace meshsim::sim {

// One node of the syntax tree. Calls keep their identifier arguments as names (mesh and dim).
struct ExprNode {
  enum class Kind { kNumber, kName, kUnary, kBinary, kTernary, kCall };
  Kind kind;
  size_t offset;
  int64_t number = 0;
  std::string name;  // identifier, operator or function
  std::vector<std::shared_ptr<const ExprNode>> args;
};

namespace {

using NodePtr = std::shared_ptr<const ExprNode>;

struct Token {
  enum class Kind { kNumber, kIdent, kOp, kEnd };
  Kind kind;
  std::string text;
  size_t offset;
  int64_t number = 0;
};

std::vector<Token> tokenize(std::string_view s) {
  static constexpr std::string_view kTwoChar[] = {"==", "!=", "<=", ">=", "&&", "||", "//"};
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (std::isspace(c)) {
      ++i;
    } else if (std::isdigit(c)) {
      const size_t start = i;
      int64_t v = 0;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
        if (v > (INT64_MAX - 9) / 10) throw ExpressionError(start, "integer literal is too large");
        v = v * 10 + (s[i++] - '0');
      }
      if (i < s.size() && (std::isalpha(static_cast<unsigned char>(s[i])) || s[i] == '_')) {
        throw ExpressionError(i, fmt::format("unexpected '{}' after a number", s[i]));
      }
      out.push_back({Token::Kind::kNumber, std::string(s.substr(start, i - start)), start, v});
    } else if (std::isalpha(c) || c == '_') {
      const size_t start = i;
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
      out.push_back({Token::Kind::kIdent, std::string(s.substr(start, i - start)), start});
    } else if (c == '\'' || c == '"') {
      // A quoted name, for mesh or dim names that are not identifiers.
      const size_t start = i++;
      while (i < s.size() && s[i] != static_cast<char>(c)) ++i;
      if (i >= s.size()) throw ExpressionError(start, "unterminated quoted name");
      out.push_back({Token::Kind::kIdent, std::string(s.substr(start + 1, i - start - 1)), start});
      ++i;
    } else {
      std::string op(1, static_cast<char>(c));
      for (std::string_view two : kTwoChar) {
        if (s.substr(i, 2) == two) op = two;
      }
      if (op.size() == 1 &&
          std::string_view("+-*/%()<>!?:,").find(op[0]) == std::string_view::npos) {
        throw ExpressionError(i, fmt::format("unexpected character '{}'", s[i]));
      }
      out.push_back({Token::Kind::kOp, op, i});
      i += op.size();
    }
  }
  out.push_back({Token::Kind::kEnd, "", s.size()});
  return out;
}

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

// Recursive descent, lowest precedence first:
// ternary > or > and > not > comparison > additive > multiplicative > unary > primary.
class Parser {
 public:
  explicit Parser(std::string_view text) : tokens_(tokenize(text)) {}

  NodePtr parse_all() {
    NodePtr e = ternary();
    if (peek().kind != Token::Kind::kEnd) {
      throw ExpressionError(peek().offset, fmt::format("unexpected '{}'", peek().text));
    }
    return e;
  }

 private:
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
  static NodePtr node(ExprNode::Kind kind, size_t offset, std::string name,
                      std::vector<NodePtr> args) {
    auto n = std::make_shared<ExprNode>();
    n->kind = kind;
    n->offset = offset;
    n->name = std::move(name);
    n->args = std::move(args);
    return n;
  }

  NodePtr ternary() {
    NodePtr cond = logical_or();
    const size_t at = peek().offset;
    if (!accept("?")) return cond;
    NodePtr yes = ternary();
    expect(":");
    NodePtr no = ternary();
    return node(ExprNode::Kind::kTernary, at, "?", {cond, yes, no});
  }
  NodePtr logical_or() {
    NodePtr left = logical_and();
    for (size_t at = peek().offset; accept("or") || accept("||"); at = peek().offset) {
      left = node(ExprNode::Kind::kBinary, at, "or", {left, logical_and()});
    }
    return left;
  }
  NodePtr logical_and() {
    NodePtr left = logical_not();
    for (size_t at = peek().offset; accept("and") || accept("&&"); at = peek().offset) {
      left = node(ExprNode::Kind::kBinary, at, "and", {left, logical_not()});
    }
    return left;
  }
  NodePtr logical_not() {
    const size_t at = peek().offset;
    if (accept("not") || accept("!"))
      return node(ExprNode::Kind::kUnary, at, "not", {logical_not()});
    return comparison();
  }
  NodePtr comparison() {
    NodePtr left = additive();
    for (;;) {
      const size_t at = peek().offset;
      std::string op;
      for (std::string_view candidate : {"==", "!=", "<=", ">=", "<", ">"}) {
        if (accept(candidate)) {
          op = candidate;
          break;
        }
      }
      if (op.empty()) return left;
      left = node(ExprNode::Kind::kBinary, at, op, {left, additive()});
    }
  }
  NodePtr additive() {
    NodePtr left = multiplicative();
    for (;;) {
      const size_t at = peek().offset;
      if (accept("+")) {
        left = node(ExprNode::Kind::kBinary, at, "+", {left, multiplicative()});
      } else if (accept("-")) {
        left = node(ExprNode::Kind::kBinary, at, "-", {left, multiplicative()});
      } else {
        return left;
      }
    }
  }
  NodePtr multiplicative() {
    NodePtr left = unary();
    for (;;) {
      const size_t at = peek().offset;
      std::string op;
      for (std::string_view candidate : {"*", "//", "/", "%"}) {
        if (accept(candidate)) {
          op = candidate == "//" ? "/" : std::string(candidate);
          break;
        }
      }
      if (op.empty()) return left;
      left = node(ExprNode::Kind::kBinary, at, op, {left, unary()});
    }
  }
  NodePtr unary() {
    const size_t at = peek().offset;
    if (accept("-")) return node(ExprNode::Kind::kUnary, at, "-", {unary()});
    if (accept("+")) return unary();
    return primary();
  }
  NodePtr primary() {
    const Token t = peek();
    if (t.kind == Token::Kind::kNumber) {
      ++pos_;
      auto n = std::make_shared<ExprNode>();
      n->kind = ExprNode::Kind::kNumber;
      n->offset = t.offset;
      n->number = t.number;
      return n;
    }
    if (accept("(")) {
      NodePtr inner = ternary();
      expect(")");
      return inner;
    }
    if (t.kind != Token::Kind::kIdent) {
      throw ExpressionError(t.offset, t.kind == Token::Kind::kEnd
                                          ? std::string("expression ends too early")
                                          : fmt::format("unexpected '{}'", t.text));
    }
    ++pos_;
    if (!accept("(")) {
      if (t.text == "true" || t.text == "false") {
        auto n = std::make_shared<ExprNode>();
        n->kind = ExprNode::Kind::kNumber;
        n->offset = t.offset;
        n->number = t.text == "true" ? 1 : 0;
        return n;
      }
      if (t.text != "rank" && t.text != "world_size") {
        throw ExpressionError(t.offset,
                              fmt::format("unknown name '{}' (expected rank, world_size, a number "
                                          "or a function call)",
                                          t.text));
      }
      return node(ExprNode::Kind::kName, t.offset, t.text, {});
    }
    const Function* f = find_function(t.text);
    if (f == nullptr) {
      throw ExpressionError(t.offset, fmt::format("unknown function '{}' (expected coord, "
                                                  "local_rank, size, min, max or abs)",
                                                  t.text));
    }
    std::vector<NodePtr> args;
    if (!accept(")")) {
      do {
        const bool names_a_mesh_or_dim = f->mesh_first && args.size() < 2;
        if (names_a_mesh_or_dim && peek().kind == Token::Kind::kIdent) {
          const Token arg = peek();
          ++pos_;
          args.push_back(node(ExprNode::Kind::kName, arg.offset, arg.text, {}));
        } else if (names_a_mesh_or_dim && args.empty()) {
          throw ExpressionError(peek().offset,
                                fmt::format("{}() takes a mesh name first", f->name));
        } else {
          args.push_back(ternary());
        }
      } while (accept(","));
      expect(")");
    }
    if (args.size() < f->min_args || args.size() > f->max_args) {
      throw ExpressionError(t.offset,
                            fmt::format("{}() takes {} argument{}, got {}", f->name,
                                        f->min_args == f->max_args
                                            ? std::to_string(f->min_args)
                                            : fmt::format("{} to {}", f->min_args, f->max_args),
                                        f->max_args == 1 ? "" : "s", args.size()));
    }
    return node(ExprNode::Kind::kCall, t.offset, t.text, std::move(args));
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

// A dim argument: a name, or an integer index spelled as a number.
std::string dim_argument(const ExprNode& n) {
  return n.kind == ExprNode::Kind::kNumber ? std::to_string(n.number) : n.name;
}

int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

class Evaluator {
 public:
  Evaluator(const ExpressionEnv& env, const std::string& text) : env_(env), text_(text) {}

  int64_t eval(const ExprNode& n) const {
    switch (n.kind) {
      case ExprNode::Kind::kNumber:
        return n.number;
      case ExprNode::Kind::kName:
        return n.name == "rank" ? env_.rank() : env_.world_size();
      case ExprNode::Kind::kUnary: {
        const int64_t v = eval(*n.args[0]);
        return n.name == "-" ? -v : (v == 0 ? 1 : 0);
      }
      case ExprNode::Kind::kTernary:
        return eval(*n.args[0]) != 0 ? eval(*n.args[1]) : eval(*n.args[2]);
      case ExprNode::Kind::kBinary:
        return binary(n);
      case ExprNode::Kind::kCall:
        return call(n);
    }
    return 0;
  }

 private:
  int64_t binary(const ExprNode& n) const {
    const int64_t a = eval(*n.args[0]);
    if (n.name == "and") return a != 0 && eval(*n.args[1]) != 0 ? 1 : 0;
    if (n.name == "or") return a != 0 || eval(*n.args[1]) != 0 ? 1 : 0;
    const int64_t b = eval(*n.args[1]);
    const std::string& op = n.name;
    if (op == "+") return a + b;
    if (op == "-") return a - b;
    if (op == "*") return a * b;
    if (op == "/" || op == "%") {
      if (b == 0) {
        throw runtime_error(
            fmt::format("division by zero at column {} of \"{}\"", n.offset + 1, text_));
      }
      return op == "/" ? floor_div(a, b) : a - floor_div(a, b) * b;
    }
    if (op == "==") return a == b;
    if (op == "!=") return a != b;
    if (op == "<") return a < b;
    if (op == "<=") return a <= b;
    if (op == ">") return a > b;
    return a >= b;
  }

  int64_t call(const ExprNode& n) const {
    if (n.name == "coord") return env_.coord(n.args[0]->name, dim_argument(*n.args[1]));
    if (n.name == "local_rank" || n.name == "size") {
      const std::string dim = n.args.size() > 1 ? dim_argument(*n.args[1]) : "";
      return n.name == "size" ? env_.mesh_size(n.args[0]->name, dim)
                              : env_.local_rank(n.args[0]->name, dim);
    }
    int64_t out = eval(*n.args[0]);
    if (n.name == "abs") return out < 0 ? -out : out;
    for (size_t i = 1; i < n.args.size(); ++i) {
      const int64_t v = eval(*n.args[i]);
      out = n.name == "min" ? std::min(out, v) : std::max(out, v);
    }
    return out;
  }

  const ExpressionEnv& env_;
  const std::string& text_;
};

void check_node(const ExprNode& n, const ExpressionSchema& schema) {
  for (const auto& a : n.args) {
    if (a->kind != ExprNode::Kind::kName || n.kind != ExprNode::Kind::kCall) check_node(*a, schema);
  }
  if (n.kind != ExprNode::Kind::kCall || !find_function(n.name)->mesh_first) return;
  const ExprNode& mesh = *n.args[0];
  const std::optional<std::vector<std::string>> dims = schema.mesh_dims(mesh.name);
  if (!dims) throw ExpressionError(mesh.offset, fmt::format("unknown mesh '{}'", mesh.name));
  if (n.args.size() < 2 || n.args[1]->kind != ExprNode::Kind::kName) return;
  const ExprNode& dim = *n.args[1];
  if (std::find(dims->begin(), dims->end(), dim.name) == dims->end()) {
    throw ExpressionError(dim.offset, fmt::format("mesh '{}' has no dim '{}' (its dims: {})",
                                                  mesh.name, dim.name, fmt::join(*dims, ", ")));
  }
}

bool depends_on_rank(const ExprNode& n) {
  if (n.kind == ExprNode::Kind::kName || n.kind == ExprNode::Kind::kCall) return true;
  for (const auto& a : n.args) {
    if (depends_on_rank(*a)) return true;
  }
  return false;
}

}  // namespace

Expression Expression::parse(std::string_view text) {
  Expression e;
  e.text_ = std::string(text);
  e.root_ = Parser(text).parse_all();
  return e;
}

Expression Expression::constant(int64_t value) {
  Expression e;
  e.text_ = std::to_string(value);
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprNode::Kind::kNumber;
  n->offset = 0;
  n->number = value;
  e.root_ = n;
  return e;
}

void Expression::check(const ExpressionSchema& schema) const {
  check_node(*root_, schema);
}

int64_t Expression::evaluate(const ExpressionEnv& env) const {
  return Evaluator(env, text_).eval(*root_);
}

bool Expression::is_constant() const {
  return !depends_on_rank(*root_);
}

}  // namespace meshsim::sim
