#include "sim/run/rank_error.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>
#include <typeinfo>

#include <fmt/format.h>

namespace meshsim::sim {

namespace {

std::string demangled(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(type.name());
}

}  // namespace

RankError classify_current_exception() {
  try {
    throw;
  } catch (const Error& e) {
    return {e.type(), e.what()};
  } catch (const std::bad_alloc&) {
    return {PyErrorType::kMemoryError, "the system refused an allocation (out of memory)"};
  } catch (const std::length_error& e) {
    return {PyErrorType::kMemoryError, fmt::format("a size too large to allocate ({})", e.what())};
  } catch (const std::exception& e) {
    return {PyErrorType::kRuntimeError,
            fmt::format("internal error ({}): {}", demangled(typeid(e)), e.what())};
  } catch (...) {
    return {PyErrorType::kRuntimeError, "internal error: an exception of unknown type"};
  }
}

}  // namespace meshsim::sim
