// The skip log on its own: which iterations of a step it can say were skipped, the one-off skip
// inside a stretch of runs, the iterations it surely ran, and what a probed second run records.
#include <catch2/catch.hpp>

#include "sim/runtime/skip_log.hpp"

using namespace meshsim;
using namespace meshsim::sim;

namespace {

const LoopScope kLoop{"j", nullptr, 1};

CallSite at(int32_t j) {
  const std::vector<std::pair<std::string, int64_t>> loops{{"j", j}};
  return CallSite::at(3, 40, 3, &kLoop, loops);
}

// A step run in the iterations `runs` says and skipped in the others (0..n-1); a call per run.
SkipLog passes(const std::string& runs, uint64_t probe_from = UINT64_MAX) {
  SkipLog log;
  if (probe_from != UINT64_MAX) log.probe(probe_from);
  uint64_t calls = 0;
  for (size_t j = 0; j < runs.size(); ++j) {
    if (runs[j] == 'r') {
      log.ran(at(static_cast<int32_t>(j)));
      ++calls;
    } else {
      log.add({CollectiveOp::kSend, 0, 5}, at(static_cast<int32_t>(j)), calls);
    }
  }
  return log;
}

}  // namespace

TEST_CASE("skip log: the iterations it can tell were skipped", "[sim][skip_log]") {
  // Never run: every iteration between the first and last skip was skipped.
  const SkipLog never = passes("sssss");
  for (int32_t j = 0; j < 5; ++j) CHECK(never.skipped(at(j), -1));
  CHECK_FALSE(never.skipped(at(5), -1));
  // Runs in between: only the first and last skips are known.
  const SkipLog mixed = passes("srrsrs");
  CHECK(mixed.skipped(at(0), -1));
  CHECK(mixed.skipped(at(5), -1));
  CHECK_FALSE(mixed.skipped(at(1), -1));
  CHECK(mixed.count(at(0)).ran == 3);
  CHECK(mixed.count(at(0)).skipped == 3);
  CHECK_FALSE(mixed.skipped(at(0), 7));  // another group
}

TEST_CASE("skip log: a skip between two runs is kept apart", "[sim][skip_log]") {
  // Skips at the ends of a stretch of runs (j=0, j=7) are the program's rule; j=4 is the one.
  const SkipLog log = passes("srrrsrrs");
  REQUIRE(log.tallies().size() == 1);
  const SkipLog::Tally& t = log.tallies().front();
  CHECK(t.count == 3);
  CHECK(t.isolated == 1);
  CHECK(t.first_isolated == at(4));
  CHECK(t.calls_before_isolated == 3);
  CHECK(log.skipped(at(4), -1));
  // Two skips in a row are no one-off; nor is a last skip no run follows.
  CHECK(passes("rrssrr").tallies().front().isolated == 0);
  CHECK(passes("rrrs").tallies().front().isolated == 0);
}

TEST_CASE("skip log: a probe records the skips from a number of calls on", "[sim][skip_log]") {
  const SkipLog log = passes("rsrrsrssrr", 2);
  // Skips at j=1 (1 call made), 4 (3), 6 (4), 7 (4): from 2 calls on, the last three.
  REQUIRE(log.probed().size() == 3);
  CHECK(log.probed()[0].site == at(4));
  CHECK(log.probed()[1].site == at(6));
  CHECK(log.probed()[2].calls_before == 4);
  CHECK(passes("rsrs").probed().empty());  // no probe: nothing recorded
}

TEST_CASE("skip log: which iterations a rank surely ran", "[sim][skip_log]") {
  // A tally keeps the first, last and one-off skips only: j=4 lies between them.
  const SkipLog log = passes("srrsrssrr");
  CHECK_FALSE(log.skipped(at(4), -1));
  CHECK_FALSE(log.surely_ran(at(4), 0));
  CHECK(log.surely_ran(at(8), 0));              // after the last skip of this pass
  CHECK(passes("rrsrs").surely_ran(at(1), 0));  // before the first
  CHECK(passes("rrrr").surely_ran(at(2), 0));   // never skipped
  // A probe from 3 calls on recorded every skip after them: j=4 was no skip, j=5 was.
  const SkipLog probed = passes("srrsrssrr", 3);
  CHECK(probed.surely_ran(at(4), 3));
  CHECK_FALSE(probed.surely_ran(at(5), 3));
  CHECK_FALSE(probed.surely_ran(at(4), 2));  // the probe started later than asked
}
