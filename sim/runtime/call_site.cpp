#include "sim/runtime/call_site.hpp"

#include <vector>

#include <fmt/format.h>

namespace meshsim::sim {

std::string CallSite::iterations_text() const {
  const size_t d = depth();
  if (d == 0) return {};
  const size_t shown = d < kShownDepth ? d : kShownDepth;
  std::vector<const std::string*> names(shown);
  const LoopScope* s = scope;
  for (size_t i = shown; i-- > 0 && s != nullptr; s = s->outer) names[i] = &s->var;
  std::string out = d > shown ? "..., " : "";
  for (size_t i = 0; i < shown; ++i)
    out += fmt::format("{}{}={}", i == 0 ? "" : ", ", *names[i], iterations[i]);
  return out;
}

std::string CallSite::text() const {
  if (line <= 0) return "no step";
  const std::string loops = iterations_text();
  return loops.empty() ? fmt::format("line {}", line) : fmt::format("line {} ({})", line, loops);
}

}  // namespace meshsim::sim
