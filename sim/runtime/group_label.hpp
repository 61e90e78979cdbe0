// How reports name a process group: by what the user wrote (the mesh, the dim, the group's index
// among that dim's groups, its ranks), never by c10d's counter alone, which users kept getting
// wrong when writing expectations. The counter stays in JSON as the group's id.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/runtime/meeting.hpp"
#include "src/comm/group_table.hpp"

namespace meshsim::sim {

// "WORLD", "world.tp#6", "a", "store (WORLD)" (new_group's barrier), or the c10d name when `groups`
// is null or says nothing about the group.
std::string group_label(const GroupTable* groups, int64_t id, const std::string& name);
// What a meeting is held on: its group's label; send/recv: "world.pp#0 p2p 4→6".
std::string meeting_label(const Meeting& m);
// Its group's label alone ("world.pp#0" for a send/recv on it).
std::string meeting_group_label(const Meeting& m);
// The mesh dim a label names ("tp" for "world.tp#6"); empty for WORLD and other groups.
std::string label_dim(const std::string& label);
// "world.tp#6 [4-7]", "pair [0, 2]"; large groups by their shape: "world.dp#0 [0, 8, ..., 1016]
// (128 ranks)"; WORLD alone (everyone is in it).
std::string label_with_members(const std::string& label, const std::vector<int64_t>& members);
// "0-3, 5, 7-9": sorted ranks as ranges.
std::string rank_ranges(const std::vector<int64_t>& ranks);
// Sorted ranks, short: "4-7", "0, 8, ..., 1016", "1, 3, 9"; long irregular lists are cut.
std::string compact_ranks(const std::vector<int64_t>& ranks);

}  // namespace meshsim::sim
