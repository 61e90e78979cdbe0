// Where something is in a scenario file, and the error for input that cannot be used.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace meshsim::sim {

struct SourceLocation {
  std::string file;
  int64_t line = 0;
  int64_t column = 0;
  // "file:line:col" ("file:line" without a column, just the file without a line).
  std::string to_string() const {
    if (line <= 0) return file;
    return file + ":" + std::to_string(line) + (column > 0 ? ":" + std::to_string(column) : "");
  }
  friend bool operator==(const SourceLocation&, const SourceLocation&) = default;
};

// A scenario file (or command-line input) that cannot be run. `what()` starts with the location.
class InputError : public std::runtime_error {
 public:
  InputError(const SourceLocation& where, const std::string& message)
      : std::runtime_error(where.to_string() + ": " + message), where_(where) {}
  const SourceLocation& where() const { return where_; }

 private:
  SourceLocation where_;
};

}  // namespace meshsim::sim
