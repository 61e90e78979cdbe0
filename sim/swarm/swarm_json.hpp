// A swarm's results as JSON: one shard's (to merge later, perhaps from other machines), and the
// report of the whole swarm. Merging every shard of a swarm gives the report, byte for byte,
// that running it unsharded writes.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/swarm/swarm_space.hpp"
#include "sim/swarm/swarm_tally.hpp"

namespace meshsim::sim {

// What one shard file holds.
struct ShardResults {
  std::string version;  // of the meshsim that ran it
  SwarmSpace space;
  Shard shard;
  SwarmTally tally;
};

nlohmann::ordered_json shard_json(const ShardResults& results);
// The whole swarm's report: `tally` must cover every combination of `space`.
nlohmann::ordered_json swarm_report_json(const std::string& version, const SwarmSpace& space,
                                         const SwarmTally& tally);

// The JSON text of either, as `meshsim swarm` writes it.
std::string swarm_json_text(const nlohmann::ordered_json& results);

// Reads a shard file's bytes (`name` for messages). Throws InputError naming the file and the
// byte or field when it is not one whole shard of a swarm.
ShardResults read_shard_json(const std::string& bytes, const std::string& name);

// The report of the swarm the shards divide between them. Throws InputError, naming the files,
// when they are not every shard of one swarm exactly once (or not of one meshsim version).
struct NamedShard {
  std::string name;
  ShardResults results;
};
ShardResults merge_shards(const std::vector<NamedShard>& shards);

}  // namespace meshsim::sim
