#include "sim/scenario/expression_tokens.hpp"

#include <cctype>

#include <fmt/format.h>

#include "sim/scenario/expression.hpp"

namespace meshsim::sim {

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
        const int digit = s[i++] - '0';
        if (v > (INT64_MAX - digit) / 10) {
          throw ExpressionError(start,
                                "integer literal is too large (the largest is "
                                "9223372036854775807)");
        }
        v = v * 10 + digit;
      }
      if (i < s.size() && (std::isalpha(static_cast<unsigned char>(s[i])) || s[i] == '_')) {
        throw ExpressionError(i, "a number must not run into a name");
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
        throw ExpressionError(i, std::isprint(c) ? fmt::format("unexpected character '{}'", s[i])
                                                 : fmt::format("unexpected byte 0x{:02x}", c));
      }
      out.push_back({Token::Kind::kOp, op, i});
      i += op.size();
    }
  }
  out.push_back({Token::Kind::kEnd, "", s.size()});
  return out;
}

}  // namespace meshsim::sim
