// The exception hierarchy of meshsim: errors a model operation raises, tagged with the Python
// exception type PyTorch would raise for the same misuse so scenarios can match on it.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace meshsim {

// The Python exception class PyTorch raises for the corresponding failure.
enum class PyErrorType {
  kRuntimeError,
  kValueError,
  kKeyError,
  kTypeError,
  kIndexError,
  kAttributeError,
  kNotImplementedError,
  // Raised by meshsim where Python itself would: allocations over the budget or refused by the
  // system, integers that do not fit in int64, division by zero.
  kMemoryError,
  kOverflowError,
  kZeroDivisionError,
  // PyTorch's own internal checks (`raise AssertionError(...)`) that a user's input can reach.
  kAssertionError,
  // torch.distributed.checkpoint's error for a save or load that failed on any rank: every rank
  // raises it, naming the ranks that failed.
  kCheckpointException,
};

std::string_view py_error_type_name(PyErrorType type);
// The inverse of py_error_type_name; nullopt for a name that is not one of the types above.
std::optional<PyErrorType> parse_py_error_type(std::string_view name);

// Base of every expected failure. `what()` is the message without the type prefix.
class Error : public std::runtime_error {
 public:
  Error(PyErrorType type, std::string message)
      : std::runtime_error(std::move(message)), type_(type) {}
  PyErrorType type() const { return type_; }

 private:
  PyErrorType type_;
};

// Shorthands that read like the PyTorch code they model.
inline Error runtime_error(std::string message) {
  return Error(PyErrorType::kRuntimeError, std::move(message));
}
inline Error value_error(std::string message) {
  return Error(PyErrorType::kValueError, std::move(message));
}
inline Error type_error(std::string message) {
  return Error(PyErrorType::kTypeError, std::move(message));
}
inline Error key_error(std::string message) {
  return Error(PyErrorType::kKeyError, std::move(message));
}
inline Error overflow_error(std::string message) {
  return Error(PyErrorType::kOverflowError, std::move(message));
}
inline Error memory_error(std::string message) {
  return Error(PyErrorType::kMemoryError, std::move(message));
}

// A broken internal invariant. Stays on in release builds; aborts with both values.
[[noreturn]] void assertion_failed(const char* expr, const char* file, int line,
                                   const std::string& detail);

}  // namespace meshsim

#define MESHSIM_ASSERT(cond, detail)                                             \
  do {                                                                           \
    if (!(cond)) ::meshsim::assertion_failed(#cond, __FILE__, __LINE__, detail); \
  } while (0)
