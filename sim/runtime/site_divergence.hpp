// The first collective of a group whose members came from different call sites (another step, or
// the same step in another loop iteration). The rendezvous finds it as members meet, with
// constant work per arrival and one record per group, so a departure thousands of collectives
// before the hang is still named.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/runtime/call_site.hpp"
#include "src/comm/collective.hpp"

namespace meshsim::sim {

struct SiteDivergence {
  int64_t group_id = 0;
  int64_t seq = 0;
  Signature signature;      // the first arrival's
  double entered_at = 0.0;  // the earliest arrival's virtual clock
  uint64_t order = 0;       // among divergences, the order the rendezvous saw them
  bool complete = false;    // every member arrived
  // Members by the site they came from, fewest first (ties: lowest rank first); past kMaxSites
  // distinct sites, the rest are only listed as `elsewhere`.
  static constexpr size_t kMaxSites = 16;
  std::vector<std::pair<CallSite, std::vector<int64_t>>> sites;
  std::vector<int64_t> elsewhere;
  std::vector<int64_t> missing;  // members that never arrived (an open meeting)

  // Schedule order: earliest entered, then first seen.
  friend bool operator<(const SiteDivergence& a, const SiteDivergence& b) {
    return a.entered_at != b.entered_at ? a.entered_at < b.entered_at : a.order < b.order;
  }
};

}  // namespace meshsim::sim
