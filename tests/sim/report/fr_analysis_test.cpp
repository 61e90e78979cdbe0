// fr analyze's matching and blame: on dumps torch 2.15 wrote on 4 Gloo ranks (tests/fr_writer.py)
// and on dumps built here in NCCL's form (send/recv, started/completed states, pg_config with
// ranks), which this machine cannot make (no GPU).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "sim/report/fr_analysis.hpp"
#include "sim/report/fr_render.hpp"

using namespace meshsim;
using namespace meshsim::sim;

namespace {

std::vector<FrRankDump> gloo_dumps(const std::string& kind, const std::string& ext = "pkl",
                                   std::vector<int64_t> ranks = {0, 1, 2, 3}) {
  std::vector<FrRankDump> out;
  for (const int64_t r : ranks) {
    const std::string path = std::string(MESHSIM_SOURCE_ROOT) + "/tests/io/data/fr/" + kind +
                             "/rank" + std::to_string(r) + "." + ext;
    std::ifstream in(path, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    out.push_back({r, path, read_fr_dump(bytes.str(), path)});
  }
  return out;
}

// An NCCL-like entry: op "all_reduce", "send 0->1" or "recv 1<-0" on group `pg`.
FrEntry entry(int64_t record, const std::string& pg, const std::string& op, int64_t seq, bool done,
              std::vector<int64_t> size = {4}) {
  FrEntry e;
  e.record_id = record;
  e.pg_name = pg;
  e.pg_desc = pg == "0" ? "default_pg" : "undefined";
  e.pg_id = std::stoll(pg);
  e.profiling_name = "nccl:" + op;
  e.is_p2p = op.starts_with("send") || op.starts_with("recv");
  (e.is_p2p ? e.p2p_seq_id : e.collective_seq_id) = seq;
  e.input_sizes = e.output_sizes = {size};
  e.input_dtypes = e.output_dtypes = {"Float"};
  e.state = done ? "completed" : "started";
  e.time_created_ns = record;
  return e;
}

FrRankDump nccl_dump(int64_t rank, std::vector<FrEntry> entries, int64_t world) {
  FrRankDump d;
  d.rank = rank;
  d.file = "rank" + std::to_string(rank);
  d.dump.version = "2.10";
  FrGroupConfig world_group{"0", "default_pg", {}};
  for (int64_t r = 0; r < world; ++r) world_group.ranks.push_back(r);
  d.dump.pg_config["0"] = world_group;
  d.dump.entries = std::move(entries);
  return d;
}

}  // namespace

TEST_CASE("fr analyze: a clean Gloo job is no hang, in either encoding", "[fr_analysis]") {
  for (const std::string ext : {"pkl", "json"}) {
    const FrAnalysis a = analyze_fr_dumps(gloo_dumps("ok", ext));
    CHECK(a.verdict == FrAnalysis::Verdict::kClean);
    CHECK(a.world_size == 4);
    CHECK(a.groups.size() == 4);
    CHECK(a.mismatches.empty());
    CHECK(a.open_calls.empty());
  }
}

TEST_CASE("fr analyze: a rank that skipped an all_reduce is the culprit", "[fr_analysis]") {
  const FrAnalysis a = analyze_fr_dumps(gloo_dumps("skipped"));
  CHECK(a.verdict == FrAnalysis::Verdict::kDeadlock);
  CHECK(a.cause == HangCause::kMissingRank);
  CHECK(a.culprits == std::vector<int64_t>{3});
  REQUIRE(a.open_calls.size() == 1);
  CHECK(a.open_calls[0].seq == 2);
  CHECK(a.open_calls[0].waiting == std::vector<int64_t>{0, 1, 2});
  CHECK(a.open_calls[0].missing == std::vector<int64_t>{3});
  const std::string text = fr_analysis_text(a);
  CHECK_THAT(text, Catch::Contains("rank 3 never called all_reduce(Float[4]) on WORLD seq 2"));
  CHECK_THAT(text, Catch::Contains("fr_writer.py:42 in _calls"));  // the user's line
  CHECK_THAT(fr_analysis_dot(a), Catch::Contains("color=red"));
}

TEST_CASE("fr analyze: members with another size are a desync", "[fr_analysis]") {
  const FrAnalysis a = analyze_fr_dumps(gloo_dumps("mismatch", "json"));
  CHECK(a.verdict == FrAnalysis::Verdict::kDesync);
  CHECK(a.cause == HangCause::kSignatureMismatch);
  REQUIRE(a.mismatches.size() == 1);
  CHECK(a.mismatches[0].kind == "sizes");
  CHECK(a.mismatches[0].seq == 2);
  CHECK(a.culprits == std::vector<int64_t>{2});
}

TEST_CASE("fr analyze: a wrapped buffer is said and matched by seq", "[fr_analysis]") {
  const FrAnalysis a = analyze_fr_dumps(gloo_dumps("wrapped"));
  CHECK(a.verdict == FrAnalysis::Verdict::kClean);
  CHECK_THAT(a.evidence.front(), Catch::Contains("wrapped (their dumps start at record 3)"));
}

TEST_CASE("fr analyze: a missing dump is said, and blamed only when nothing else explains",
          "[fr_analysis]") {
  const FrAnalysis a = analyze_fr_dumps(gloo_dumps("ok", "pkl", {0, 1, 3}));
  CHECK(a.verdict == FrAnalysis::Verdict::kClean);
  CHECK_THAT(a.evidence.front(), Catch::Contains("no dump from rank 2 (1 of 4 ranks)"));
  // Ranks 0-2 wait in WORLD seq 2; rank 3 left no dump.
  const FrAnalysis b = analyze_fr_dumps(gloo_dumps("skipped", "pkl", {0, 1, 2}), 4);
  CHECK(b.verdict == FrAnalysis::Verdict::kDeadlock);
  CHECK(b.culprits == std::vector<int64_t>{3});
  CHECK_THAT(b.summary.front(), Catch::Contains("rank 3 left no dump"));
}

TEST_CASE("fr analyze: a call only one member has not finished", "[fr_analysis]") {
  // Dumped as it finished: nobody waits for rank 3, so it is said, not blamed.
  std::vector<FrRankDump> dumps = gloo_dumps("ok");
  dumps[3].dump.entries.back().retired = false;
  const FrAnalysis a = analyze_fr_dumps(dumps);
  CHECK(a.verdict == FrAnalysis::Verdict::kClean);
  CHECK_THAT(a.evidence.back(), Catch::Contains("rank 3's broadcast(Float[4]) on pg 3 seq 2 is "
                                                "not finished in its dump, though every other"));
  // Held there while rank 1 waits for it in WORLD: rank 0 is the culprit.
  std::vector<FrRankDump> held = {
      nccl_dump(0, {entry(0, "0", "all_reduce", 1, true), entry(1, "1", "all_reduce", 1, false)},
                2),
      nccl_dump(1,
                {entry(0, "0", "all_reduce", 1, true), entry(1, "1", "all_reduce", 1, true),
                 entry(2, "0", "all_reduce", 2, false)},
                2)};
  for (auto& d : held) d.dump.pg_config["1"] = {"1", "undefined", {0, 1}};
  const FrAnalysis b = analyze_fr_dumps(held);
  CHECK(b.verdict == FrAnalysis::Verdict::kDeadlock);
  CHECK(b.culprits == std::vector<int64_t>{0});
  CHECK_THAT(b.summary.front(), Catch::Contains("it is held in all_reduce(Float[4]) on pg 1 seq 1, "
                                                "which every other member finished"));
}

TEST_CASE("fr analyze: a send whose peer went on is an unmatched send", "[fr_analysis]") {
  std::vector<FrRankDump> dumps = {
      nccl_dump(0, {entry(0, "0", "all_reduce", 1, true), entry(1, "0", "send 0->1", 1, false)}, 2),
      nccl_dump(1, {entry(0, "0", "all_reduce", 1, true)}, 2)};
  const FrAnalysis a = analyze_fr_dumps(dumps);
  CHECK(a.verdict == FrAnalysis::Verdict::kDeadlock);
  CHECK(a.cause == HangCause::kUnmatchedPointToPoint);
  CHECK(a.culprits == std::vector<int64_t>{1});
  CHECK_THAT(a.summary.front(),
             Catch::Contains("rank 1 never called the recv from rank 0 on WORLD that rank 0's "
                             "send(Float[4]) to rank 1 waits for"));
}

TEST_CASE("fr analyze: two ranks sending to each other first are head to head", "[fr_analysis]") {
  std::vector<FrRankDump> dumps = {
      nccl_dump(0, {entry(0, "0", "send 0->1", 1, false), entry(1, "0", "recv 0<-1", 2, false)}, 2),
      nccl_dump(1, {entry(0, "0", "send 1->0", 1, false), entry(1, "0", "recv 1<-0", 2, false)},
                2)};
  const FrAnalysis a = analyze_fr_dumps(dumps);
  CHECK(a.cause == HangCause::kHeadToHeadSend);
  CHECK(a.culprits == std::vector<int64_t>{0, 1});
  REQUIRE(a.cycles.size() == 1);
  // Batched (one p2p seq), the sends and recvs are posted at once: nobody waits for anybody.
  for (auto& d : dumps) d.dump.entries[1].p2p_seq_id = 1;
  CHECK(analyze_fr_dumps(dumps).verdict == FrAnalysis::Verdict::kStall);
  // A send posted against its recv is no wait at all.
  dumps[1].dump.entries = {entry(0, "0", "recv 1<-0", 1, false)};
  const FrAnalysis b = analyze_fr_dumps(dumps);
  CHECK(b.verdict == FrAnalysis::Verdict::kStall);
}

TEST_CASE("fr analyze: a pipeline ring of recvs is a point-to-point cycle", "[fr_analysis]") {
  std::vector<FrRankDump> dumps;
  for (int64_t r = 0; r < 3; ++r)
    dumps.push_back(
        nccl_dump(r, {entry(0, "0", fmt::format("recv {}<-{}", r, (r + 2) % 3), 1, false)}, 3));
  const FrAnalysis a = analyze_fr_dumps(dumps);
  CHECK(a.cause == HangCause::kPointToPointCycle);
  CHECK(a.cycles.at(0).size() == 3);
}

TEST_CASE("fr analyze: groups in another order are an order inversion, the rank ahead blamed",
          "[fr_analysis]") {
  // Each iteration calls group 1 (line 10), then WORLD (line 20). Rank 0 skipped group 1 in the
  // second iteration and waits in WORLD for rank 1, which waits in group 1 for rank 0; rank 2 is
  // in WORLD too.
  auto at = [](FrEntry e, int64_t line) {
    e.frames = {{"all_reduce", "/x/torch/distributed/distributed_c10d.py", 4174},
                {"step", "train.py", line}};
    return e;
  };
  auto job = [&](bool frames) {
    std::vector<FrRankDump> dumps;
    for (int64_t r = 0; r < 3; ++r) {
      std::vector<FrEntry> e;
      auto add = [&](const std::string& pg, int64_t seq, bool done, int64_t line) {
        FrEntry x = entry(static_cast<int64_t>(e.size()), pg, "all_reduce", seq, done);
        e.push_back(frames ? at(x, line) : x);
      };
      if (r < 2) add("1", 1, true, 10);
      add("0", 1, true, 20);
      if (r == 1)
        add("1", 2, false, 10);
      else
        add("0", 2, false, 20);
      dumps.push_back(nccl_dump(r, e, 3));
      if (r < 2) dumps.back().dump.pg_config["1"] = {"1", "undefined", {0, 1}};
    }
    return dumps;
  };
  const FrAnalysis a = analyze_fr_dumps(job(true));
  CHECK(a.cause == HangCause::kOrderInversion);
  CHECK(a.culprits == std::vector<int64_t>{0});
  CHECK(a.cycles.at(0).size() == 2);
  CHECK_THAT(a.summary.back(), Catch::Contains("rank 0 went ahead: it waits at train.py:20"));
  // Without frames (JSON dumps) nothing orders the two calls: both members are named.
  CHECK(analyze_fr_dumps(job(false)).culprits == std::vector<int64_t>{0, 1});
}

TEST_CASE("fr analyze: op and dtype mismatches are classed as PyTorch's analyzer classes them",
          "[fr_analysis]") {
  std::vector<FrRankDump> dumps;
  for (int64_t r = 0; r < 3; ++r)
    dumps.push_back(
        nccl_dump(r, {entry(0, "0", r == 2 ? "broadcast" : "all_reduce", 1, false)}, 3));
  CHECK(analyze_fr_dumps(dumps).mismatches.at(0).kind == "op");
  dumps[2].dump.entries = {entry(0, "0", "all_reduce", 1, false)};
  dumps[2].dump.entries[0].input_dtypes = {"BFloat16"};
  const FrAnalysis a = analyze_fr_dumps(dumps);
  CHECK(a.mismatches.at(0).kind == "dtypes");
  CHECK(a.culprits == std::vector<int64_t>{2});
  // All-to-all sizes may differ by rank; only their totals must agree.
  for (auto& d : dumps) d.dump.entries = {entry(0, "0", "all_to_all", 1, false, {6})};
  dumps[0].dump.entries[0].output_sizes = {{3}};
  dumps[1].dump.entries[0].output_sizes = {{9}};
  CHECK(analyze_fr_dumps(dumps).mismatches.empty());
  dumps[1].dump.entries[0].output_sizes = {{8}};
  CHECK(analyze_fr_dumps(dumps).mismatches.at(0).kind == "sizes");
}

TEST_CASE("fr analyze: a group's size from its gathers finds a member no dump names",
          "[fr_analysis]") {
  // Gloo: no pg_config; rank 1 never called on group "4", whose all_gather has 2 members.
  std::vector<FrRankDump> dumps;
  for (int64_t r = 0; r < 2; ++r) {
    FrRankDump d = nccl_dump(r, {entry(0, "0", "all_reduce", 1, true)}, 2);
    d.dump.pg_config.clear();
    dumps.push_back(d);
  }
  FrEntry gather = entry(1, "4", "all_gather", 1, false);
  gather.output_sizes = {{2, 4}};
  dumps[0].dump.entries.push_back(gather);
  const FrAnalysis a = analyze_fr_dumps(dumps);
  CHECK(a.verdict == FrAnalysis::Verdict::kDeadlock);
  CHECK(a.groups.at(1).unnamed_members == 1);
  CHECK_THAT(a.summary.front(), Catch::Contains("1 member that no dump names"));
}

TEST_CASE("fr analyze: the JSON report names every rank, call and group", "[fr_analysis]") {
  const nlohmann::json j = fr_analysis_json(analyze_fr_dumps(gloo_dumps("skipped")));
  CHECK(j["verdict"] == "deadlock");
  CHECK(j["cause"] == "missing rank");
  CHECK(j["ranks"].size() == 4);
  CHECK(j["open_calls"][0]["group"] == "0");
  CHECK(j["open_calls"][0]["missing"] == nlohmann::json::array({3}));
  CHECK(j["groups"][0]["label"] == "WORLD");
}

TEST_CASE("fr analyze: a rank past the bound is refused", "[fr_analysis]") {
  std::vector<FrRankDump> dumps = {nccl_dump(kMaxFrWorld, {}, 1)};
  CHECK_THROWS_WITH(analyze_fr_dumps(dumps), Catch::Contains("is outside the 0 to 4194303 ranks"));
}
