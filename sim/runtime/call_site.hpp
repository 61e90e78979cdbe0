// Where a rank called something: the scenario step plus the value of every repeat variable around
// it ("line 19 (w=2)"). Two calls come from the same site exactly when their steps and iterations
// agree, which is what tells a rank that skipped a call in one iteration from its peers.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace meshsim::sim {

// One repeat loop of a scenario, for naming iterations; owned by the scenario, so call sites
// point at it instead of copying variable names on every call.
struct LoopScope {
  std::string var;
  const LoopScope* outer = nullptr;
  size_t depth = 1;  // loops around and including this one
};

struct CallSite {
  // Iterations kept by value; deeper loops count only through `outer_hash`.
  static constexpr size_t kShownDepth = 4;

  int64_t line = 0;  // of the scenario step (0: none)
  int64_t column = 0;
  int32_t step = -1;                 // its index in the program (-1: none)
  const LoopScope* scope = nullptr;  // the innermost repeat around the step, or null
  // The innermost min(depth, kShownDepth) iterations, outermost first.
  std::array<int32_t, kShownDepth> iterations{};
  uint64_t outer_hash = 0;  // of the iterations of loops further out

  // From the loops running on the rank, outermost first (their count is scope's depth).
  template <typename Loops>
  static CallSite at(int32_t step, int64_t line, int64_t column, const LoopScope* scope,
                     const Loops& loops) {
    CallSite s{line, column, step, scope, {}, 0};
    const size_t depth = loops.size();
    const size_t shown = depth < kShownDepth ? depth : kShownDepth;
    for (size_t i = 0; i + shown < depth; ++i)
      s.outer_hash = mix(s.outer_hash, static_cast<uint64_t>(loops[i].second));
    for (size_t i = 0; i < shown; ++i)
      s.iterations[i] = static_cast<int32_t>(loops[depth - shown + i].second);
    return s;
  }

  size_t depth() const { return scope == nullptr ? 0 : scope->depth; }
  friend bool operator==(const CallSite& a, const CallSite& b) {
    return a.line == b.line && a.column == b.column && a.iterations == b.iterations &&
           a.outer_hash == b.outer_hash;
  }
  // The same step, in any iteration.
  bool same_step(const CallSite& other) const {
    return line == other.line && column == other.column;
  }
  // "w=2", "w=2, mb=0" (outermost first; "..., " when loops further out are not shown); empty
  // outside loops.
  std::string iterations_text() const;
  // "line 19 (w=2)", "line 7"; "no step" for a call outside the program.
  std::string text() const;

  static uint64_t mix(uint64_t h, uint64_t v) {
    // splitmix64's finalizer over the running value: cheap, and every input bit matters.
    uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
};

}  // namespace meshsim::sim
