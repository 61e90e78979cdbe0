// What one Flight Recorder entry says, in the words the analysis and the replay share: its op and
// peers, whether it finished, the user's line that made it, and its call as text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/io/fr_dump.hpp"

namespace meshsim::sim {

// A decimal rank or count as a dump writes it ("3"); none for anything else or a negative.
std::optional<int64_t> parse_rank(std::string_view text);

// NCCL marks a call completed; Gloo leaves every call "scheduled" and retires it when it ends.
bool finished(const FrEntry& e);

// "all_reduce 0->1" of "nccl:all_reduce 0->1": the name without the library.
std::string_view op_and_peers(const FrEntry& e);

// "all_reduce" of "nccl:all_reduce", "send" of "nccl:send 0->1".
std::string_view op_name(const FrEntry& e);

// A coalescing group's closing entry: the calls before it with its seq run as one.
bool closes_coalesced(const FrEntry& e);

// The group ranks a send ("send 0->1") or recv ("recv 1<-0") names; a recv from any source
// ("recv 1<-?") has no src.
struct P2pEnds {
  std::optional<int64_t> src;
  int64_t dst = 0;
};
std::optional<P2pEnds> p2p_ends(const FrEntry& e);

// "Float[4, 2], Float[8]": at most four tensors, then how many there are.
std::string tensors_text(const std::vector<std::vector<int64_t>>& sizes,
                         const std::vector<std::string>& dtypes);

// "all_reduce(Float[4])", "all_gather(Float[4] → Float[4, 4])", "send(Float[4])".
std::string call_text(const FrEntry& e);

// An all-to-all by any of its names: its members' sizes may differ.
bool all_to_all(std::string_view op);

// What the members of one collective must agree on, by the op's rules (all-to-all sizes may
// differ per rank; a scatter's input and a gather's output live on the root only): its sizes,
// its dtypes, and both with the op as one key.
std::string agreed_sizes(const FrEntry& e);
std::string agreed_dtypes(const FrEntry& e);
std::string agreed_call(const FrEntry& e);

// The innermost frame outside torch itself; null without one.
const FrFrame* user_frame(const std::vector<FrFrame>& frames);
const FrFrame* user_frame(const FrEntry& e);

// The same frame as "train.py:30 in step"; none without one.
std::optional<std::string> user_line(const FrEntry& e);

// The user's line that made the call; without frames (JSON dumps), the record's number.
std::string site_text(const FrEntry& e);

}  // namespace meshsim::sim
