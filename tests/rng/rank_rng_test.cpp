// DTensor seeding and random ops on one rank at a time (docs/rng.md section 3), with the worked
// examples of 3.3 as the reference values.
#include "src/rng/rank_rng.hpp"

#include <cmath>

#include <catch2/catch.hpp>

#include "src/error.hpp"
#include "src/rng/cuda_random_kernel.hpp"
#include "src/rng/dropout_kernel.hpp"

using meshsim::DeviceMesh;
using meshsim::DTensor;
using meshsim::DTensorSpec;
using meshsim::LocalGroupCreator;
using meshsim::PhiloxState;
using meshsim::Placement;
using meshsim::RandomOp;
using meshsim::RankRng;
using meshsim::RngProfile;
using V = std::vector<double>;

namespace {

const meshsim::GpuProfile kH200 = *meshsim::find_gpu("H200");
const RandomOp kRand{RandomOp::Kind::kUniform, 0.0, 1.0, {}};

std::vector<Placement> placements(std::initializer_list<const char*> names) {
  std::vector<Placement> out;
  for (const char* n : names) out.push_back(meshsim::parse_placement(n));
  return out;
}

// The first `n` local values, to 6 decimals as docs/rng.md prints them.
V first_values(const DTensor& t, int64_t n) {
  V out;
  for (int64_t i = 0; i < n && i < t.local().numel(); ++i)
    out.push_back(std::round(t.local().get(i) * 1e6) / 1e6);
  return out;
}

// A broadcast that must not happen.
PhiloxState no_broadcast(const PhiloxState&) {
  FAIL("no WORLD broadcast was expected");
  return {};
}

// Rank `rank` of a world of `world`: seeded with 1234 through DTensor's manual_seed on `mesh`,
// then one rand into a zero DTensor of `shape` placed by `p`.
struct OneRank {
  LocalGroupCreator groups;
  DeviceMesh mesh;
  RankRng rng;
  DTensor t;
  OneRank(int64_t rank, int64_t world, std::vector<int64_t> mesh_shape, std::vector<int64_t> shape,
          std::vector<Placement> p, RngProfile profile = RngProfile::kLatest)
      : groups(rank, world),
        mesh(DeviceMesh::init(groups, "cuda", mesh_shape)),
        rng(profile, kH200),
        t(DTensor::zeros(DTensorSpec{mesh, std::move(p), std::move(shape)})) {
    rng.dtensor_manual_seed(1234, mesh);
  }
  void rand() { rng.random_(t, kRand, no_broadcast); }
};

}  // namespace

TEST_CASE("rank rng: docs/rng.md 3.3's worked examples, rank by rank", "[rng][dtensor]") {
  SECTION("mesh (4,), [S0], 8x4") {
    const V expected[] = {{0.127208, 0.816736, 0.543999, 0.660079},
                          {0.249173, 0.171930, 0.447136, 0.368808},
                          {0.080679, 0.030580, 0.939573, 0.859657},
                          {0.988474, 0.813494, 0.730532, 0.846902}};
    for (int64_t r = 0; r < 4; ++r) {
      OneRank one(r, 4, {4}, {8, 4}, placements({"Shard(0)"}));
      one.rand();
      CHECK(first_values(one.t, 4) == expected[r]);
      CHECK(one.rng.default_generator() == PhiloxState{1234, 32});  // post offset on every rank
    }
  }
  SECTION("mesh (2,2), [S0,S1], 8x4: local 4x2 blocks of the same streams") {
    const V expected[] = {{0.127208, 0.816736, 0.543999, 0.660079},
                          {0.249173, 0.171930, 0.447136, 0.368808},
                          {0.080679, 0.030580, 0.939573, 0.859657},
                          {0.988474, 0.813494, 0.730532, 0.846902}};
    for (int64_t r = 0; r < 4; ++r) {
      OneRank one(r, 4, {2, 2}, {8, 4}, placements({"Shard(0)", "Shard(1)"}));
      one.rand();
      CHECK(one.t.local().shape() == std::vector<int64_t>{4, 2});
      CHECK(first_values(one.t, 4) == expected[r]);
    }
  }
  SECTION("mesh (2,2), [R,S0]: ranks 0,2 and 1,3 identical") {
    std::vector<V> got;
    for (int64_t r = 0; r < 4; ++r) {
      OneRank one(r, 4, {2, 2}, {8, 4}, placements({"Replicate()", "Shard(0)"}));
      one.rand();
      got.push_back(first_values(one.t, 16));
    }
    CHECK(got[0] == got[2]);
    CHECK(got[1] == got[3]);
    CHECK(got[0] != got[1]);
  }
  SECTION("mesh (4,), [S0], 5x3 uneven: local numel 6,6,3,0; post 16") {
    const int64_t numels[] = {6, 6, 3, 0};
    for (int64_t r = 0; r < 4; ++r) {
      OneRank one(r, 4, {4}, {5, 3}, placements({"Shard(0)"}));
      one.rand();
      CHECK(one.t.local().numel() == numels[r]);
      CHECK(one.rng.default_generator().offset == 16);
      if (r == 2) CHECK(first_values(one.t, 3) == V{0.711527, 0.161500, 0.974214});
    }
  }
  SECTION("mesh (2,2,2), [S1,R,S0], 8x16: ranks 0,2 / 4,6 / 1,3 / 5,7 share values") {
    std::vector<V> got;
    for (int64_t r = 0; r < 8; ++r) {
      OneRank one(r, 8, {2, 2, 2}, {8, 16}, placements({"Shard(1)", "Replicate()", "Shard(0)"}));
      one.rand();
      got.push_back(first_values(one.t, 32));
      CHECK(one.rng.default_generator().offset == 128);
    }
    CHECK(got[0] == got[2]);
    CHECK(got[4] == got[6]);
    CHECK(got[1] == got[3]);
    CHECK(got[5] == got[7]);
    CHECK(got[0] != got[1]);
    CHECK(got[0] != got[4]);
    CHECK(got[1] != got[5]);
  }
}

TEST_CASE("rank rng: manual_seed outside the mesh raises PyTorch's error but creates the tracker",
          "[rng][dtensor]") {
  LocalGroupCreator groups(3, 4);
  const DeviceMesh world = DeviceMesh::init(groups, "cuda", std::vector<int64_t>{2, 2},
                                            std::vector<std::string>{"dp", "tp"});
  const DeviceMesh dp = world.slice({"dp"});  // rank 3 is in dp group [1, 3]
  RankRng rng(RngProfile::kLatest, kH200);
  meshsim::RankTensor table{{1}, {0}};
  LocalGroupCreator g0(3, 4);
  const DeviceMesh only0 = DeviceMesh::from_rank_table(g0, "cuda", table);
  REQUIRE_THROWS_WITH(rng.dtensor_manual_seed(7, only0),
                      "manual_seed requires the current rank to be a part of the device mesh "
                      "otherwise DTensor RNG state on the rank will not be initialized and the "
                      "behavior of DTensor random ops is undefined.");
  CHECK(rng.has_tracker());
  CHECK(rng.default_generator() == PhiloxState{RankRng::kDefaultSeed, 0});  // not seeded
  rng.dtensor_manual_seed(7, dp);
  CHECK(rng.default_generator() == PhiloxState{7, 0});
}

TEST_CASE("rank rng: lazy tracker creation broadcasts once, manual_seed never", "[rng][dtensor]") {
  LocalGroupCreator groups(1, 2);
  const DeviceMesh mesh = DeviceMesh::init(groups, "cuda", std::vector<int64_t>{2});
  const DTensorSpec spec{mesh, placements({"Shard(0)"}), {8}};
  for (RngProfile profile : {RngProfile::kLatest, RngProfile::kTorch26}) {
    INFO(meshsim::rng_profile_name(profile));
    RankRng rng(profile, kH200);
    rng.manual_seed(99);  // this rank differs from rank 0, which kept the default seed
    int broadcasts = 0;
    auto from_rank0 = [&](const PhiloxState& mine) {
      ++broadcasts;
      CHECK(mine == PhiloxState{99, 0});
      return PhiloxState{RankRng::kDefaultSeed, 8};
    };
    DTensor t = DTensor::zeros(spec);
    const RankRng::OpResult first = rng.random_(t, kRand, from_rank0);
    CHECK(first.state_overwritten_by_rank0);
    REQUIRE(first.draw);
    CHECK(first.draw->seed == RankRng::kDefaultSeed);
    CHECK(first.draw->offset == 8 + 4);  // rank 1's shard starts one 4-element shard later
    rng.random_(t, kRand, from_rank0);
    CHECK(broadcasts == 1);
    if (profile == RngProfile::kLatest) {
      // The public generator moved: 8 + 8 + 8.
      CHECK(rng.default_generator() == PhiloxState{RankRng::kDefaultSeed, 24});
      CHECK_FALSE(rng.tracker_state());
    } else {
      // 2.6: the tracker moved, the user's generator did not.
      CHECK(rng.default_generator() == PhiloxState{99, 0});
      CHECK(*rng.tracker_state() == PhiloxState{RankRng::kDefaultSeed, 24});
    }
  }
}

TEST_CASE("rank rng: meta tensors, a disabled region and exponential_ skip the offsets",
          "[rng][dtensor]") {
  SECTION("meta: nothing drawn, no offset moves") {
    OneRank one(1, 4, {4}, {8, 4}, placements({"Shard(0)"}));
    one.t = DTensor::zeros(one.t.spec(), meshsim::Tensor::Storage::kMeta);
    CHECK_FALSE(one.rng.random_(one.t, kRand, no_broadcast).draw);
    CHECK(one.rng.default_generator() == PhiloxState{1234, 0});
  }
  SECTION("distribute_region_enabled = False: the local op from the current offset") {
    V got[2];
    for (int64_t r = 0; r < 2; ++r) {
      OneRank one(r, 4, {4}, {8, 4}, placements({"Shard(0)"}));
      one.rng.set_distribute_region_enabled(false);
      const RankRng::OpResult res = one.rng.random_(one.t, kRand, no_broadcast);
      REQUIRE(res.draw);
      CHECK(res.draw->offset == 0);
      CHECK_FALSE(res.draw->in_distribute_region);
      CHECK(*res.draw->shard_index == r);
      CHECK(one.rng.default_generator().offset == 4);  // 8 elements: one draw per thread
      got[r] = first_values(one.t, 8);
    }
    CHECK(got[0] == got[1]);  // every shard draws the same numbers
  }
  SECTION("exponential_ is a local op: no tracker, every rank the same numbers") {
    V got[2];
    for (int64_t r = 0; r < 2; ++r) {
      LocalGroupCreator groups(r, 2);
      const DeviceMesh mesh = DeviceMesh::init(groups, "cuda", std::vector<int64_t>{2});
      RankRng rng(RngProfile::kLatest, kH200);
      DTensor t = DTensor::zeros(DTensorSpec{mesh, placements({"Shard(0)"}), {8}});
      rng.random_(t, RandomOp{RandomOp::Kind::kExponential, 1.0, 0.0, {}}, no_broadcast);
      CHECK_FALSE(rng.has_tracker());
      got[r] = first_values(t, 4);
    }
    CHECK(got[0] == got[1]);
  }
}

TEST_CASE("rank rng: factories on a rank outside the mesh, and CPU meshes", "[rng][dtensor]") {
  LocalGroupCreator groups(3, 4);
  meshsim::RankTensor table{{2}, {0, 1}};
  const DeviceMesh mesh = DeviceMesh::from_rank_table(groups, "cuda", table);
  RankRng rng(RngProfile::kLatest, kH200);
  rng.manual_seed(5);
  DTensor t = DTensor::zeros(DTensorSpec{mesh, placements({"Shard(0)"}), {8}});
  CHECK(t.local().shape() == std::vector<int64_t>{0});
  int broadcasts = 0;
  auto from_rank0 = [&](const PhiloxState& s) {
    ++broadcasts;
    return s;
  };
  // The dispatcher skips a non-member entirely; the factory creates the tracker, then fails.
  CHECK_FALSE(rng.random_(t, kRand, from_rank0).draw);
  CHECK(broadcasts == 0);
  try {
    rng.random_factory(t, kRand, from_rank0);
    FAIL("expected an AssertionError");
  } catch (const meshsim::Error& e) {
    CHECK(e.type() == meshsim::PyErrorType::kAssertionError);
  }
  CHECK(broadcasts == 1);
  LocalGroupCreator cpu_groups(0, 2);
  const DeviceMesh cpu = DeviceMesh::init(cpu_groups, "cpu", std::vector<int64_t>{2});
  REQUIRE_THROWS_WITH(rng.dtensor_manual_seed(1, cpu),
                      Catch::Contains("CUDA meshes only, not on a \"cpu\" mesh"));
}

TEST_CASE("rank rng: profile names", "[rng][dtensor]") {
  CHECK(meshsim::parse_rng_profile("latest") == RngProfile::kLatest);
  CHECK(meshsim::parse_rng_profile("2.15") == RngProfile::kLatest);
  CHECK(meshsim::parse_rng_profile("2.9") == RngProfile::kLatest);
  CHECK(meshsim::parse_rng_profile("2.6") == RngProfile::kTorch26);
  CHECK_FALSE(meshsim::parse_rng_profile("2.7"));
  CHECK_FALSE(meshsim::parse_rng_profile("1.13"));
  CHECK_FALSE(meshsim::parse_rng_profile("2.x"));
}

TEST_CASE("rank rng: random_op_words is how far the kernels move the offset", "[rng]") {
  using Kind = RandomOp::Kind;
  for (const meshsim::DType dtype :
       {meshsim::DType::kFloat32, meshsim::DType::kFloat64, meshsim::DType::kBFloat16}) {
    for (const int64_t numel :
         {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{1000}, int64_t{132} * 2048 * 4 + 1}) {
      // Past one wave of the grid (132 SMs x 2048 threads x 4 values) in float32 only: enough to
      // see the second round, and the ASan run stays short.
      if (numel > 1000 && dtype != meshsim::DType::kFloat32) continue;
      for (const Kind kind : {Kind::kUniform, Kind::kNormal, Kind::kBernoulli, Kind::kExponential,
                              Kind::kGeometric, Kind::kDropout}) {
        const RandomOp op{
            kind, kind == Kind::kUniform || kind == Kind::kNormal ? 0.0 : 0.5, 1.0, {}};
        PhiloxState state{1234, 8};
        switch (kind) {
          case Kind::kUniform:
            meshsim::predict_uniform(state, numel, dtype, kH200);
            break;
          case Kind::kNormal:
            meshsim::predict_normal(state, numel, dtype, kH200);
            break;
          case Kind::kBernoulli:
            meshsim::predict_bernoulli(state, numel, dtype, kH200, 0.5);
            break;
          case Kind::kExponential:
            meshsim::predict_exponential(state, numel, dtype, kH200, 0.5);
            break;
          case Kind::kGeometric:
            meshsim::predict_geometric(state, numel, dtype, kH200, 0.5);
            break;
          default:
            meshsim::predict_dropout(state, meshsim::Tensor::full({numel}, 1, dtype), 0.5, kH200);
            break;
        }
        INFO(op.describe() << " over " << numel << " elements");
        CHECK(meshsim::random_op_words(op, numel, dtype, kH200) == state.offset - 8);
      }
    }
  }
}
