// The tokens of the scenario expression language: numbers (int64, checked), names (plain or
// quoted), and operators.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace meshsim::sim {

struct Token {
  enum class Kind { kNumber, kIdent, kOp, kEnd };
  Kind kind;
  std::string text;
  size_t offset;
  int64_t number = 0;
};

// The tokens of `text`, ending with one of kind kEnd. Throws ExpressionError at the offending
// offset for a literal above INT64_MAX, a number running into a name, an unterminated quoted name
// or a character the language does not use.
std::vector<Token> tokenize(std::string_view text);

}  // namespace meshsim::sim
