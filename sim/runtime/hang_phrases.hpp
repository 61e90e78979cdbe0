// The phrases hang reports are written in, shared by the root-cause analysis and the renderers:
// where a rank is, what it waits in, rank lists as ranges, ordinals.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/runtime/rank_activity.hpp"
#include "sim/runtime/rendezvous.hpp"

namespace meshsim::sim {

// "f.toml:12:1 (all_reduce, w=2)", or "(no step)".
std::string location_text(const RankActivity& a);
// A finished rank's `where` is the last step it ran (steps its `when` skipped do not count).
std::string finished_text(const RankActivity& a);
// The wait's channel with its members: "world.tp#1 [4-7]".
std::string group_text(const OpenWait& w);
// "all_reduce(float32[4], op=sum) on world.tp#1 [4, 5, 6, 7] seq 3"; group creation:
// "new_group creating world.tp's 2 groups of 2 ([0, 1], ...) (store barrier seq 1)".
std::string call_text(const OpenWait& w, const Signature& signature);
// "rank 3", "ranks 0-2", "ranks 8-1023 (1016 ranks)".
std::string ranks_text(const std::vector<int64_t>& ranks);
bool is_p2p(const OpenWait& w);
// A send or recv as `rank` calls it, its peer relative to the rank: "recv(float32[4],
// src=rank-256)", so that a pipeline stage's calls read the same.
std::string relative_call(const Signature& sig, int64_t rank);
// "1st", "2nd", "3rd", "4th", ...
std::string ordinal(int64_t n);

}  // namespace meshsim::sim
