#include "src/error.hpp"

#include <cstdio>
#include <cstdlib>

namespace meshsim {

std::string_view py_error_type_name(PyErrorType type) {
  switch (type) {
    case PyErrorType::kRuntimeError:
      return "RuntimeError";
    case PyErrorType::kValueError:
      return "ValueError";
    case PyErrorType::kKeyError:
      return "KeyError";
    case PyErrorType::kTypeError:
      return "TypeError";
    case PyErrorType::kIndexError:
      return "IndexError";
    case PyErrorType::kAttributeError:
      return "AttributeError";
    case PyErrorType::kNotImplementedError:
      return "NotImplementedError";
    case PyErrorType::kMemoryError:
      return "MemoryError";
    case PyErrorType::kOverflowError:
      return "OverflowError";
    case PyErrorType::kZeroDivisionError:
      return "ZeroDivisionError";
    case PyErrorType::kAssertionError:
      return "AssertionError";
  }
  return "Error";
}

std::optional<PyErrorType> parse_py_error_type(std::string_view name) {
  for (PyErrorType t :
       {PyErrorType::kRuntimeError, PyErrorType::kValueError, PyErrorType::kKeyError,
        PyErrorType::kTypeError, PyErrorType::kIndexError, PyErrorType::kAttributeError,
        PyErrorType::kNotImplementedError, PyErrorType::kMemoryError, PyErrorType::kOverflowError,
        PyErrorType::kZeroDivisionError, PyErrorType::kAssertionError}) {
    if (py_error_type_name(t) == name) return t;
  }
  return std::nullopt;
}

void assertion_failed(const char* expr, const char* file, int line, const std::string& detail) {
  std::fprintf(stderr, "meshsim: internal assertion failed: %s at %s:%d: %s\n", expr, file, line,
               detail.c_str());
  std::abort();
}

}  // namespace meshsim
