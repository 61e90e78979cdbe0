// The first collective of a group whose members came from different call sites (another step, or
// the same step in another loop iteration). The rendezvous finds it as members meet, with
// constant work per arrival and one record per group, so a departure thousands of collectives
// before the hang is still named.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
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
  bool complete = false;    // every member arrived
  // Members by the site they came from, fewest first (ties: lowest rank first); past kMaxSites
  // distinct sites, the rest are only listed as `elsewhere`.
  static constexpr size_t kMaxSites = 16;
  std::vector<std::pair<CallSite, std::vector<int64_t>>> sites;
  std::vector<int64_t> elsewhere;
  std::vector<int64_t> missing;  // members that never arrived (an open meeting)

  // Earliest entered (virtual time does not depend on the schedule), then complete before open,
  // then by group and seq: the same first divergence under every schedule.
  friend bool operator<(const SiteDivergence& a, const SiteDivergence& b) {
    return std::tuple(a.entered_at, !a.complete, a.group_id, a.seq) <
           std::tuple(b.entered_at, !b.complete, b.group_id, b.seq);
  }
};

}  // namespace meshsim::sim
