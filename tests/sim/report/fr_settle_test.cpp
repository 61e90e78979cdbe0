// Settling a recorder's whole histories (meshsim_record wrote tests/io/data/fr/recorded from
// tests/record/mesh_program.py with rank 3 skipping the dp all_reduce): the ranks stop where the
// job would, and fr analyze names rank 3. Dumps a real job wrote are left as they are.
#include "sim/report/fr_settle.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "src/io/atomic_file.hpp"

using namespace meshsim;
using namespace meshsim::sim;

namespace {

std::vector<FrRankDump> recorded_dumps() {
  std::vector<FrRankDump> out;
  for (int64_t r = 0; r < 4; ++r) {
    const std::string path = std::string(MESHSIM_SOURCE_ROOT) +
                             "/tests/io/data/fr/recorded/nccl_trace_rank_" + std::to_string(r) +
                             ".json";
    out.push_back({r, path, read_fr_dump(read_file_bounded(path, 1 << 20), path)});
  }
  return out;
}

}  // namespace

TEST_CASE("fr settle: a recorded skip stops the ranks where the job would", "[fr_settle]") {
  std::vector<FrRankDump> dumps = recorded_dumps();
  REQUIRE(dumps[0].dump.recorded);
  CHECK(dumps[3].dump.recorded->command.find("--skip-rank 3") != std::string::npos);
  for (const FrRankDump& d : dumps)
    for (const FrEntry& e : d.dump.entries) REQUIRE(e.state == "completed");
  const size_t before = dumps[0].dump.entries.size();
  const std::vector<std::string> notes = settle_recorded_histories(dumps);
  REQUIRE(!notes.empty());
  CHECK(notes[0].find("recorded by meshsim_record") != std::string::npos);
  CHECK(notes[0].find("stop in a call their peers never finish") != std::string::npos);
  // Rank 1 waits in the dp all_reduce rank 3 skipped; rank 3 reached that seq with its gather.
  const FrEntry& one = dumps[1].dump.entries.back();
  CHECK(one.state == "started");
  CHECK(one.profiling_name == "nccl:all_reduce");
  CHECK(dumps[1].dump.entries.size() < before);
  CHECK(dumps[3].dump.entries.back().profiling_name == "nccl:_all_gather_base");
  const FrAnalysis a = analyze_fr_dumps(dumps);
  CHECK(a.verdict == FrAnalysis::Verdict::kDesync);
  CHECK(a.culprits == std::vector<int64_t>{3});
}

TEST_CASE("fr settle: a peer without a dump is assumed to make its calls", "[fr_settle]") {
  std::vector<FrRankDump> dumps = recorded_dumps();
  dumps.erase(dumps.begin() + 3);  // rank 3, the one that skipped
  const std::vector<std::string> notes = settle_recorded_histories(dumps);
  CHECK(notes[0].find("every call finishes") != std::string::npos);
  CHECK(notes.back() ==
        "rank 3 was not recorded: it is taken to make every call their peers wait for");
  for (const FrRankDump& d : dumps) CHECK(d.dump.entries.back().state == "completed");
}

TEST_CASE("fr settle: dumps a real job wrote are left alone; a mix is said", "[fr_settle]") {
  std::vector<FrRankDump> dumps = recorded_dumps();
  for (FrRankDump& d : dumps) d.dump.recorded.reset();
  const std::vector<FrRankDump> copy = dumps;
  CHECK(settle_recorded_histories(dumps).empty());
  for (size_t i = 0; i < dumps.size(); ++i)
    CHECK(dumps[i].dump.entries.size() == copy[i].dump.entries.size());
  std::vector<FrRankDump> mixed = recorded_dumps();
  mixed[0].dump.recorded.reset();
  const std::vector<std::string> notes = settle_recorded_histories(mixed);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("3 of the 4 dumps are a recorder's") != std::string::npos);
}

TEST_CASE("fr settle: a rank that names its groups another way is said", "[fr_settle]") {
  std::vector<FrRankDump> dumps = recorded_dumps();
  // Rank 3 as if it had created the tp group before the dp group: the name "2" is [2, 3] there.
  auto& config = dumps[3].dump.pg_config;
  config["2"].ranks = {2, 3};
  const std::vector<std::string> notes = settle_recorded_histories(dumps);
  CHECK(std::find(notes.begin(), notes.end(),
                  "rank 3 created process groups in another order than the others: its group 2 "
                  "has ranks [2-3], where rank 1 gives it [1, 3]") != notes.end());
}

TEST_CASE("fr settle: sends and recvs whose counts differ name the rank in them all",
          "[fr_settle]") {
  // A pipeline of 3: rank 1 sends twice to rank 2, which receives once; rank 0 sends once to
  // rank 1, which receives twice. Rank 1 is in both pairs.
  std::vector<FrRankDump> dumps(3);
  const auto p2p = [](int64_t record, const std::string& name, int64_t seq) {
    FrEntry e;
    e.record_id = record;
    e.pg_name = "0";
    e.pg_desc = "default_pg";
    e.profiling_name = name;
    e.is_p2p = true;
    e.p2p_seq_id = seq;
    e.state = "completed";
    e.retired = true;
    e.frames.push_back({"step", "train.py", 10 + record});
    return e;
  };
  for (int64_t r = 0; r < 3; ++r) {
    dumps[static_cast<size_t>(r)].rank = r;
    dumps[static_cast<size_t>(r)].dump.recorded = FrRecorded{};
    dumps[static_cast<size_t>(r)].dump.pg_config["0"] = {"0", "default_pg", {0, 1, 2}};
  }
  dumps[0].dump.entries = {p2p(0, "nccl:send 0->1", 1)};
  dumps[1].dump.entries = {p2p(0, "nccl:recv 1<-0", 1), p2p(1, "nccl:send 1->2", 2),
                           p2p(2, "nccl:recv 1<-0", 3), p2p(3, "nccl:send 1->2", 4)};
  dumps[2].dump.entries = {p2p(0, "nccl:recv 2<-1", 1)};
  const FrPairCounts counts = unpaired_point_to_point(dumps);
  CHECK(counts.ranks == std::vector<int64_t>{1});
  CHECK(counts.ranks_in == 2);
  REQUIRE(counts.lines.size() == 2);
  CHECK(counts.lines[0] ==
        "rank 0 sends to rank 1 once on WORLD, and rank 1 receives from it 2 times (the first "
        "unpaired recv at train.py:12 in step)");
  FrAnalysis a;
  a.verdict = FrAnalysis::Verdict::kStall;
  a.summary = {"no rank at fault"};
  blame_unpaired(a, counts);
  CHECK(a.verdict == FrAnalysis::Verdict::kDeadlock);
  CHECK(a.culprits == std::vector<int64_t>{1});
  CHECK(a.summary.front() ==
        "sends and recvs do not pair up over the whole run: rank 1 is in every pair whose counts "
        "differ");
  CHECK(a.summary.size() == 3);
  // A real job's dumps are snapshots: their counts say nothing.
  for (FrRankDump& d : dumps) d.dump.recorded.reset();
  CHECK(unpaired_point_to_point(dumps).lines.empty());
}
