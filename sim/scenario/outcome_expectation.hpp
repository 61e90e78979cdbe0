// Parsing of [[expect]] tables that describe how a run ends: deadlock, desync, timeout and
// rank_failed, each with the ranks, group and sequence number the report must name.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "sim/scenario/load_context.hpp"
#include "sim/scenario/scenario.hpp"

namespace meshsim::sim {

// The outcome keys ("deadlock", "desync", "timeout", "rank_failed").
const std::vector<std::string_view>& outcome_keys();
// Parses `key = { ... }` of an [[expect]] table; throws InputError naming the node.
std::unique_ptr<OutcomeExpectation> parse_outcome(std::string_view key, const toml::node& node,
                                                  const LoadContext& ctx);

}  // namespace meshsim::sim
