// What any exception escaping a rank's step means to the user: a Python error type and a message.
// The rank boundary catches everything; nothing a scenario does may terminate the process.
#pragma once

#include <exception>
#include <optional>
#include <string>

#include "src/error.hpp"

namespace meshsim::sim {

struct RankError {
  // The Python type PyTorch would raise; MemoryError for allocations the system or the budget
  // refused; RuntimeError for anything else, with the C++ type in the message.
  PyErrorType type;
  std::string message;
};

// Classifies the exception being handled. Call only inside a catch block; runtime control
// exceptions (RankAborted, InjectedCrash) must be caught before this.
RankError classify_current_exception();

}  // namespace meshsim::sim
