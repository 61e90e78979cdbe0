// The earliest collective at which the members of a group went different ways, read from the
// ranks' flight recorders: one (group, seq) entered with different signatures or from different
// scenario lines. A rank that calls a collective from the wrong line with the right signature
// matches the others there, and only a later collective hangs; this finds where it began.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/runtime/rank_activity.hpp"

namespace meshsim::sim {

struct Divergence {
  int64_t group_id = 0;
  int64_t seq = 0;
  // What the members that recorded it called, "all_reduce(float32[4], op=sum) at line 14", with
  // their ranks; fewest ranks first (the odd ones out).
  std::vector<std::pair<std::string, std::vector<int64_t>>> calls;
};

// Point-to-point calls are not compared (a send and its recv differ by nature). Earliest means
// the lowest virtual time at which a member entered it; ties go to the lower group, then seq.
std::optional<Divergence> first_divergence(const std::vector<RankActivity>& activity);

}  // namespace meshsim::sim
