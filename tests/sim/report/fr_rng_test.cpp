// The RNG checks on recorded seeding and DTensor random ops, on records built here and on dumps
// meshsim_record wrote. Where the draws land is docs/rng.md 3.3's worked examples (measured with
// PyTorch on a GPU); the overlap counts are those the shipped scenarios expect for the same
// programs run by the simulator (scenarios/rng_overlap_quirks.toml, rng_fsdp_tp_meta_init.toml).
#include "sim/report/fr_rng.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "src/io/atomic_file.hpp"

using namespace meshsim;
using namespace meshsim::sim;

namespace {

struct Mesh {
  std::vector<int64_t> shape, ranks;
};

// The rank's coordinate in `mesh`, or nullopt outside it.
std::optional<std::vector<int64_t>> coordinate(const Mesh& mesh, int64_t rank) {
  for (size_t i = 0; i < mesh.ranks.size(); ++i) {
    if (mesh.ranks[i] != rank) continue;
    std::vector<int64_t> c(mesh.shape.size());
    size_t rest = i;
    for (size_t d = mesh.shape.size(); d-- > 0;) {
      c[d] = static_cast<int64_t>(rest % static_cast<size_t>(mesh.shape[d]));
      rest /= static_cast<size_t>(mesh.shape[d]);
    }
    return c;
  }
  return std::nullopt;
}

FrRngCall torch_seed(uint64_t seed) {
  FrRngCall c;
  c.kind = FrRngCall::Kind::kTorchManualSeed;
  c.seed = seed;
  return c;
}

FrRngCall mesh_seed(uint64_t seed, const Mesh& mesh, int64_t rank) {
  FrRngCall c;
  c.kind = FrRngCall::Kind::kManualSeed;
  c.seed = seed;
  c.mesh_shape = mesh.shape;
  c.mesh_ranks = mesh.ranks;
  c.coordinate = coordinate(mesh, rank);
  return c;
}

// uniform_(0, 1) on a float32 DTensor; `local_numel` is the rank's shard.
FrRngCall uniform(const Mesh& mesh, int64_t rank, std::vector<std::string> placements,
                  std::vector<int64_t> shape, int64_t local_numel, int line) {
  FrRngCall c;
  c.kind = FrRngCall::Kind::kRandomOp;
  c.mesh_shape = mesh.shape;
  c.mesh_ranks = mesh.ranks;
  c.coordinate = coordinate(mesh, rank);
  c.op = "uniform_";
  c.overload = "default";
  c.arguments = {{"from", 0.0}, {"to", 1.0}};
  c.placements = std::move(placements);
  c.shape = std::move(shape);
  c.dtype = "float32";
  c.local_numel = local_numel;
  c.frames = {{"init", "train.py", line}};
  return c;
}

std::vector<FrRankDump> job(const std::vector<std::vector<FrRngCall>>& calls) {
  std::vector<FrRankDump> out;
  for (size_t r = 0; r < calls.size(); ++r) {
    FrDump d;
    d.recorded = FrRecorded{};
    d.recorded->status = "ok";
    d.recorded->rng = calls[r];
    out.push_back({static_cast<int64_t>(r), "rank" + std::to_string(r), std::move(d)});
  }
  return out;
}

FrRngFindings check(const std::vector<std::vector<FrRngCall>>& calls) {
  return check_recorded_rng(job(calls), *find_gpu("H200"));
}

bool any_contains(const std::vector<std::string>& lines, const std::string& part) {
  for (const std::string& l : lines)
    if (l.find(part) != std::string::npos) return true;
  return false;
}

const Mesh kLine{{4}, {0, 1, 2, 3}};
const Mesh kSquare{{2, 2}, {0, 1, 2, 3}};

}  // namespace

TEST_CASE("fr rng: shards of one op draw apart, replicas alike", "[fr_rng]") {
  // docs/rng.md 3.3: (4,), [S(0)], 8x4 starts at 0, 8, 16, 24 (blocks 0, 2, 4, 6 of 8 words).
  std::vector<std::vector<FrRngCall>> calls(4);
  for (int64_t r = 0; r < 4; ++r)
    calls[r] = {mesh_seed(1234, kLine, r), uniform(kLine, r, {"Shard(0)"}, {8, 4}, 8, 10),
                uniform(kSquare, r, {"Replicate()", "Shard(0)"}, {8, 4}, 16, 11)};
  const FrRngFindings f = check(calls);
  CHECK(f.recorded);
  CHECK(f.ranks == 4);
  CHECK(f.random_ops == 8);
  CHECK(f.draws == 8);
  CHECK(f.clean());
  CHECK(f.notes.empty());
  const std::string text = fr_rng_text(f);
  CHECK(text.find("no two draws overlap") != std::string::npos);
  CHECK(fr_rng_json(f)["clean"] == true);
}

TEST_CASE("fr rng: the two quirks of DTensor's offsets overlap", "[fr_rng]") {
  SECTION("shards under 4 elements: ranks 1-3 read one block (3 overlaps)") {
    std::vector<std::vector<FrRngCall>> calls(4);
    for (int64_t r = 0; r < 4; ++r)
      calls[r] = {mesh_seed(1234, kLine, r), uniform(kLine, r, {"Shard(0)"}, {4}, 1, 20)};
    const FrRngFindings f = check(calls);
    CHECK(f.overlap_count == 3);
    CHECK(any_contains(f.overlaps, "shard 1, rank 1)"));
    CHECK(any_contains(f.overlaps, "both read Philox counter blocks [1, 2)"));
    CHECK(any_contains(f.notes, "fewer than 4 elements"));
  }
  SECTION("a dim sharded twice runs into the next op (2 overlaps)") {
    std::vector<std::vector<FrRngCall>> calls(4);
    for (int64_t r = 0; r < 4; ++r)
      calls[r] = {mesh_seed(1234, kLine, r),
                  uniform(kSquare, r, {"Shard(0)", "Shard(0)"}, {8, 4}, 8, 30),
                  uniform(kSquare, r, {"Shard(0)", "Shard(0)"}, {8, 4}, 8, 31)};
    const FrRngFindings f = check(calls);
    CHECK(f.overlap_count == 2);
    CHECK(any_contains(f.overlaps, "shard 2, rank 2) and uniform_(0, 1) into"));
    CHECK(any_contains(f.notes, "sharded over several mesh dims"));
  }
  SECTION("a disabled distribute region: every shard draws the same numbers") {
    std::vector<std::vector<FrRngCall>> calls(4);
    for (int64_t r = 0; r < 4; ++r) {
      FrRngCall op = uniform(kLine, r, {"Shard(0)"}, {8, 4}, 8, 40);
      op.region = false;
      calls[r] = {mesh_seed(1234, kLine, r), op};
    }
    CHECK(check(calls).overlap_count == 6);  // every pair of the 4 shards
  }
}

TEST_CASE("fr rng: seeds across ranks", "[fr_rng]") {
  // Ranks 0-1 and 2-3 are two 2-rank tp meshes that initialise a parameter from one line: two
  // pipeline stages (layers.0 and layers.1) or two data-parallel copies (layers.0 on both).
  const Mesh first{{2}, {0, 1}};
  const Mesh second{{2}, {2, 3}};
  const auto two_meshes = [&](uint64_t seed0, uint64_t seed1, bool replicas) {
    std::vector<std::vector<FrRngCall>> calls(4);
    for (int64_t r = 0; r < 4; ++r) {
      const Mesh& m = r < 2 ? first : second;
      FrRngCall op = uniform(m, r, {"Shard(0)"}, {8, 4}, 16, 50);
      op.parameter = r < 2 || replicas ? "layers.0.w" : "layers.1.w";
      calls[r] = {mesh_seed(r < 2 ? seed0 : seed1, m, r), op};
    }
    return check(calls);
  };
  SECTION("stages seeded alike draw each other's numbers") {
    const FrRngFindings f = two_meshes(123, 123, false);
    CHECK(f.overlap_count == 2);  // shard 0 of both stages, and shard 1 of both
    CHECK(any_contains(f.overlaps,
                       "into \"layers.0.w as [Shard(0)], random op 0 of its mesh\" "
                       "(train.py:50, shard 0, rank 0) and uniform_(0, 1) into "
                       "\"layers.1.w"));
  }
  SECTION("a seed per stage keeps them apart") {
    CHECK(two_meshes(123, 124, false).clean());
  }
  SECTION("data-parallel copies of one parameter draw alike on purpose") {
    CHECK(two_meshes(123, 123, true).clean());
  }
  SECTION("replicas seeded differently differ") {
    // [R, S(0)] on (2, 2): ranks 0 and 2 hold shard 0, ranks 1 and 3 shard 1; rank 2 seeds 99.
    std::vector<std::vector<FrRngCall>> calls(4);
    for (int64_t r = 0; r < 4; ++r)
      calls[r] = {mesh_seed(r == 2 ? 99 : 1234, kSquare, r),
                  uniform(kSquare, r, {"Replicate()", "Shard(0)"}, {8, 4}, 16, 60)};
    const FrRngFindings f = check(calls);
    CHECK(f.overlap_count == 0);
    CHECK(f.replicas_differ_count == 1);
    CHECK(any_contains(f.replicas_differ,
                       "shard 0: rank 0 draws seed 1234 from offset 0, rank 2 "
                       "seed 99 from offset 0"));
    CHECK(fr_rng_text(f).find("1 shard whose replicas draw different numbers") !=
          std::string::npos);
  }
  SECTION("each shard whose replicas differ is counted once") {
    std::vector<std::vector<FrRngCall>> calls(4);
    for (int64_t r = 0; r < 4; ++r)
      calls[r] = {mesh_seed(static_cast<uint64_t>(10 + r), kSquare, r),
                  uniform(kSquare, r, {"Replicate()", "Replicate()"}, {8}, 8, 65)};
    const FrRngFindings f = check(calls);
    CHECK(f.replicas_differ_count == 1);
    REQUIRE(f.replicas_differ.size() == 1);
    CHECK(f.replicas_differ[0].find("rank 0 draws seed 10 from offset 0, rank 1 seed 11") !=
          std::string::npos);
  }
  SECTION("an extra draw on one rank moves its later replicas") {
    std::vector<std::vector<FrRngCall>> calls(4);
    for (int64_t r = 0; r < 4; ++r) {
      calls[r] = {mesh_seed(1234, kSquare, r)};
      if (r == 3) calls[r].push_back(uniform(Mesh{{1}, {3}}, r, {"Replicate()"}, {4}, 4, 70));
      calls[r].push_back(uniform(kSquare, r, {"Replicate()", "Shard(0)"}, {8, 4}, 16, 71));
    }
    const FrRngFindings f = check(calls);
    CHECK(f.replicas_differ_count == 1);
    CHECK(any_contains(f.replicas_differ,
                       "shard 1: rank 1 draws seed 1234 from offset 16, rank 3 "
                       "seed 1234 from offset 20"));
  }
  SECTION("ranks of one mesh running different ops") {
    std::vector<std::vector<FrRngCall>> calls(2);
    const Mesh pair{{2}, {0, 1}};
    for (int64_t r = 0; r < 2; ++r)
      calls[r] = {mesh_seed(1, pair, r),
                  uniform(pair, r, {"Replicate()"}, {r == 0 ? int64_t{4} : 8}, r == 0 ? 4 : 8, 80)};
    const FrRngFindings f = check(calls);
    CHECK(f.replicas_differ_count == 1);
    CHECK(any_contains(f.replicas_differ,
                       "rank 0 runs uniform_(0, 1) of 4 [Replicate()] at "
                       "train.py:80, rank 1 runs uniform_(0, 1) of 8"));
  }
}

TEST_CASE("fr rng: a factory outside the distribute region puts the state back", "[fr_rng]") {
  // torch.distributed.tensor.rand with the region off draws each rank's shard from the state as
  // it is and restores it (PyTorch 2.9 and later): the next op draws the same counters.
  std::vector<std::vector<FrRngCall>> calls(2);
  const Mesh pair{{2}, {0, 1}};
  for (int64_t r = 0; r < 2; ++r) {
    FrRngCall factory = uniform(pair, r, {"Replicate()"}, {8}, 8, 120);
    factory.op = "rand";
    factory.factory = true;
    factory.region = false;
    FrRngCall next = uniform(pair, r, {"Replicate()"}, {8}, 8, 121);
    next.region = false;
    calls[r] = {mesh_seed(3, pair, r), factory, next};
  }
  const FrRngFindings f = check(calls);
  CHECK(f.draws == 4);
  CHECK(f.overlap_count == 1);  // rand into the first, uniform_ into the second, both at 0
  CHECK(any_contains(f.overlaps, "seed 3: rand into"));
}

TEST_CASE("fr rng: a tracker made by a random op takes rank 0's state", "[fr_rng]") {
  std::vector<std::vector<FrRngCall>> calls(4);
  for (int64_t r = 0; r < 4; ++r) {
    FrRngCall op = uniform(kSquare, r, {"Replicate()", "Shard(0)"}, {8, 4}, 16, 90);
    op.tracker_created = true;
    calls[r] = {torch_seed(static_cast<uint64_t>(100 + r)), op};
  }
  const FrRngFindings f = check(calls);
  CHECK(f.clean());  // every rank drew from rank 0's state
  CHECK(any_contains(f.notes, "ranks 1-3 took rank 0's generator state"));

  SECTION("without rank 0's dump the later ranks are not checked") {
    std::vector<FrRankDump> dumps = job(calls);
    dumps.erase(dumps.begin());
    const FrRngFindings g = check_recorded_rng(dumps, *find_gpu("H200"));
    CHECK(g.draws == 0);
    CHECK(any_contains(g.notes, "takes rank 0's state, and rank 0 was not recorded"));
  }
}

TEST_CASE("fr rng: what is not modelled is said, not guessed", "[fr_rng]") {
  std::vector<std::vector<FrRngCall>> calls(2);
  const Mesh pair{{2}, {0, 1}};
  for (int64_t r = 0; r < 2; ++r) {
    FrRngCall odd = uniform(pair, r, {"Shard(0)"}, {8}, 4, 100);
    odd.op = "randint_like";
    FrRngCall meta = uniform(pair, r, {"Shard(0)"}, {8}, 4, 101);
    meta.meta = true;
    calls[r] = {mesh_seed(5, pair, r), meta, odd, uniform(pair, r, {"Shard(0)"}, {8}, 4, 102)};
  }
  const FrRngFindings f = check(calls);
  // The meta op draws nothing; randint_like is not placed, but in the distribute region every
  // rank ends past the whole tensor, so the op after it is.
  CHECK(f.draws == 2);
  CHECK(f.unplaced == 2);
  CHECK(f.random_ops == 6);
  CHECK(f.clean());
  CHECK(any_contains(f.notes,
                     "rank 0: randint_like at train.py:100: meshsim does not model where "
                     "its kernel draws; this draw is not placed"));
  CHECK(fr_rng_text(f).find("no two placed draws overlap") != std::string::npos);
  SECTION("outside the distribute region it loses the rank's stream") {
    for (auto& rank_calls : calls) rank_calls[2].region = false;
    const FrRngFindings g = check(calls);
    CHECK(g.draws == 0);
    CHECK(g.stopped_ranks == 2);
    CHECK(any_contains(g.notes, "its later draws are not checked"));
  }
  SECTION("a generator of the program's own moves nothing of DTensor's") {
    for (auto& rank_calls : calls) {
      rank_calls[2].op = "uniform_";
      rank_calls[2].user_generator = true;
    }
    const FrRngFindings g = check(calls);
    CHECK(g.draws == 2);
    CHECK(any_contains(g.notes, "it draws from a generator the program passed"));
  }
  FrRngCall bad = uniform(pair, 0, {"Shard(3)"}, {8}, 4, 110);
  const FrRngFindings g = check({{mesh_seed(5, pair, 0), bad}});
  CHECK(any_contains(g.notes, "rank 0: uniform_ at train.py:110:"));
}

TEST_CASE("fr rng: a real job's dumps have nothing to check", "[fr_rng]") {
  std::vector<FrRankDump> dumps(2);
  dumps[1].rank = 1;
  const FrRngFindings f = check_recorded_rng(dumps, *find_gpu("H200"));
  CHECK(!f.recorded);
  CHECK(fr_rng_text(f).empty());
}

TEST_CASE("fr rng: the recorder's dumps of PyTorch's FSDP + TP seed test", "[fr_rng]") {
  // tests/record/rng_program.py --case fsdp-tp, recorded on 4 ranks: the program of
  // scenarios/rng_fsdp_tp_meta_init.toml, whose simulated run finds this one overlap.
  std::vector<FrRankDump> dumps;
  for (int64_t r = 0; r < 4; ++r) {
    const std::string path = std::string(MESHSIM_SOURCE_ROOT) +
                             "/tests/io/data/fr/recorded_rng/nccl_trace_rank_" + std::to_string(r) +
                             ".json";
    dumps.push_back({r, path, read_fr_dump(read_file_bounded(path, 1 << 20), path)});
  }
  const FrRngFindings f = check_recorded_rng(dumps, *find_gpu("H200"));
  CHECK(f.random_ops == 8);
  CHECK(f.replicas_differ_count == 0);
  REQUIRE(f.overlap_count == 1);
  for (const char* part :
       {"seed 7: uniform_(-0.353553, 0.353553) into \"bias as [_StridedShard(0, split_factor=2), "
        "Shard(0)], random op 1 of its mesh\" (tests/record/rng_program.py:54, shard 0, rank 0)",
        "into \"weight as [_StridedShard(0, split_factor=2), Shard(0)], random op 0 of its mesh\" "
        "(tests/record/rng_program.py:54, shard 2, rank 2)",
        "both read Philox counter blocks [32, 33)"})
    CHECK(f.overlaps[0].find(part) != std::string::npos);
}
