#include "src/error.hpp"
#include "src/enum_names.hpp"

#include <cstdio>
#include <cstdlib>

namespace meshsim {

constexpr EnumName<PyErrorType> kPyErrorTypeNames[] = {
    {PyErrorType::kRuntimeError, "RuntimeError"},
    {PyErrorType::kValueError, "ValueError"},
    {PyErrorType::kKeyError, "KeyError"},
    {PyErrorType::kTypeError, "TypeError"},
    {PyErrorType::kIndexError, "IndexError"},
    {PyErrorType::kAttributeError, "AttributeError"},
    {PyErrorType::kNotImplementedError, "NotImplementedError"},
    {PyErrorType::kMemoryError, "MemoryError"},
    {PyErrorType::kOverflowError, "OverflowError"},
    {PyErrorType::kZeroDivisionError, "ZeroDivisionError"},
    {PyErrorType::kAssertionError, "AssertionError"},
    {PyErrorType::kCheckpointException, "CheckpointException"},
};

std::string_view py_error_type_name(PyErrorType type) {
  return name_in(kPyErrorTypeNames, type, "Error");
}

std::optional<PyErrorType> parse_py_error_type(std::string_view name) {
  return value_in(kPyErrorTypeNames, name);
}

void assertion_failed(const char* expr, const char* file, int line, const std::string& detail) {
  std::fprintf(stderr, "meshsim: internal assertion failed: %s at %s:%d: %s\n", expr, file, line,
               detail.c_str());
  std::abort();
}

}  // namespace meshsim
