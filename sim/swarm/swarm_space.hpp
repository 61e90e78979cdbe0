// The combinations a swarm runs (scenario file x fault seed x schedule seed), numbered in one
// fixed order, and the deterministic share of them one shard runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace meshsim::sim {

// Seeds as ascending, disjoint, inclusive ranges; `with_none` puts a run without the seed first
// (for fault seeds: a run with no injected fault).
struct SeedList {
  bool with_none = false;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;

  // How many runs the list stands for, or nullopt past 2^63.
  std::optional<uint64_t> count() const;
  // The `index`th (0 ≤ index < count()); nullopt for the run without a seed.
  std::optional<uint64_t> at(uint64_t index) const;
  // "none,0-99,200" as the command line takes it.
  std::string text() const;
  friend bool operator==(const SeedList&, const SeedList&) = default;
};

// One scenario file of the swarm, with a digest of its bytes: shards run on other machines must
// have run the same file.
struct SwarmFile {
  std::string path;
  uint64_t digest = 0;
  friend bool operator==(const SwarmFile&, const SwarmFile&) = default;
};

struct Combination {
  uint64_t index = 0;
  size_t file = 0;
  uint64_t schedule_seed = 0;
  std::optional<uint64_t> faults_seed;
};

// Combinations are numbered file by file, within a file fault seed by fault seed (no fault
// first), within those schedule seed by schedule seed: the lowest number is the first of these
// to try, and "the smallest seed" a failure is reported with.
struct SwarmSpace {
  std::vector<SwarmFile> files;
  SeedList schedule_seeds;
  SeedList fault_seeds;
  // The run flags every combination shares, as `meshsim run` takes them ("--timeout 60s").
  std::string run_flags;

  // Every combination, or nullopt past 2^63.
  std::optional<uint64_t> size() const;
  Combination at(uint64_t index) const;  // index < size()
  // The combinations of file `file`: [first, end).
  std::pair<uint64_t, uint64_t> file_range(size_t file) const;
  // The command that runs one combination again.
  std::string replay_line(const Combination& c) const;
  friend bool operator==(const SwarmSpace&, const SwarmSpace&) = default;
};

// Shard `index` of `count` runs the combinations whose number leaves `index` divided by `count`:
// shards of any count cover every combination once, and each gets every file's share.
struct Shard {
  uint64_t index = 0;
  uint64_t count = 1;
  bool whole() const { return count == 1; }
  // How many of `size` combinations fall to this shard.
  uint64_t share_of(uint64_t size) const { return size / count + (index < size % count ? 1 : 0); }
  // How many of the combinations [begin, end) fall to this shard.
  uint64_t share_of(uint64_t begin, uint64_t end) const { return share_of(end) - share_of(begin); }
  // The number of this shard's `nth` combination.
  uint64_t combination(uint64_t nth) const { return nth * count + index; }
};

// "0-99", "1,5,9-12", and with `allow_none` also "none" (first): into `out`, ranges ascending
// and those that touch joined.
// Returns "" or the error for the message (a bad number, a range backwards, a seed twice).
std::string parse_seed_list(std::string_view text, bool allow_none, SeedList& out);

// The digest of a scenario file's bytes (FNV-1a), or nullopt when it cannot be read.
std::optional<uint64_t> file_digest(const std::string& path);

}  // namespace meshsim::sim
