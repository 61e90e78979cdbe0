#include "sim/run/scenario_dir_name.hpp"

namespace meshsim::sim {

std::string scenario_dir_name(const std::string& name) {
  std::string out;
  for (char c : name) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '_' || c == '.';
    out += plain ? c : '_';
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out.substr(0, 200);
}

}  // namespace meshsim::sim
