#include "sim/swarm/swarm_render.hpp"

#include <fmt/format.h>

namespace meshsim::sim {

namespace {

std::string plural(uint64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

}  // namespace

std::string swarm_header(const SwarmSpace& space, const Shard& shard, unsigned jobs) {
  const uint64_t size = space.size().value_or(0);
  std::string out = fmt::format(
      "swarm: {} x {} ({}) x {} ({}) = {}",
      plural(space.files.size(), "scenario file", "scenario files"),
      plural(*space.fault_seeds.count(), "fault seed", "fault seeds"), space.fault_seeds.text(),
      plural(*space.schedule_seeds.count(), "schedule seed", "schedule seeds"),
      space.schedule_seeds.text(), plural(size, "run", "runs"));
  if (!shard.whole()) {
    out += fmt::format("; shard {} of {} runs {}", shard.index, shard.count, shard.share_of(size));
  }
  return out + fmt::format(" in {}\n", plural(jobs, "worker", "workers"));
}

std::string swarm_report_text(const SwarmSpace& space, const SwarmTally& tally, size_t listed) {
  std::string out = fmt::format("{}: {} passed, {} failed", plural(tally.runs(), "run", "runs"),
                                tally.passed(), tally.failed());
  if (tally.failed() > 0)
    out += fmt::format(", {}", plural(tally.distinct(), "distinct failure", "distinct failures"));
  out += "\n";
  size_t shown = 0;
  for (const DistinctFailure* f : tally.failures()) {
    if (shown == listed) {
      out += fmt::format("\n... and {} more (-v lists them all; --json has each)\n",
                         tally.distinct() - shown);
      break;
    }
    ++shown;
    const Combination first = space.at(f->first);
    out += fmt::format("\n{}. {} ({}): {}\n", shown, space.files[f->file].path, f->scenario,
                       f->signature);
    out += fmt::format("   {}; the first: ", plural(f->runs, "run", "runs"));
    out += first.faults_seed ? fmt::format("fault seed {}, ", *first.faults_seed) : "no fault, ";
    out += fmt::format("schedule seed {}\n", first.schedule_seed);
    out += fmt::format("   {}\n   replay: {}\n", f->headline, space.replay_line(first));
  }
  return out;
}

}  // namespace meshsim::sim
