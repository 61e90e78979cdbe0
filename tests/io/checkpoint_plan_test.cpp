// Save planning as Distributed Checkpoint does it (PyTorch 2.15, checked on Gloo ranks): names
// free per rank, a replicated chunk written once by the rank DCP's load balancing picks (ties in
// CPython's set order), warnings for replicas that differ, errors for names that disagree.
#include "src/io/checkpoint_plan.hpp"

#include <memory>

#include <catch2/catch.hpp>

#include "src/comm/group_creator.hpp"
#include "src/error.hpp"

using meshsim::DType;
using meshsim::LocalSavePlan;
using meshsim::StateDictEntry;
using meshsim::Tensor;

namespace {

Tensor filled(std::vector<int64_t> shape, int64_t value, DType dtype = DType::kFloat32) {
  return Tensor::full(shape, static_cast<double>(value), dtype);
}

// Each rank's state dict is the named tensors it holds.
std::vector<LocalSavePlan> plans_of(
    const std::vector<std::vector<std::pair<std::string, const Tensor*>>>& ranks) {
  std::vector<LocalSavePlan> out;
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::vector<StateDictEntry> entries;
    for (const auto& [name, t] : ranks[r]) entries.push_back({name, t, nullptr});
    out.push_back(meshsim::plan_local_save(static_cast<int64_t>(r), entries));
  }
  return out;
}

int64_t writer_of(const meshsim::GlobalSavePlan& plan, const std::string& name) {
  const meshsim::CheckpointTensor* t = meshsim::find_tensor(plan.metadata, name);
  REQUIRE(t != nullptr);
  REQUIRE(t->chunks.size() == 1);
  return t->chunks[0].file_rank;
}

}  // namespace

TEST_CASE("checkpoint plan: names are free per rank, each written by its holder",
          "[io][checkpoint_plan]") {
  const Tensor a = filled({4}, 1), b = filled({2, 3}, 2);
  const auto plan = meshsim::plan_global_save(plans_of({{{"s0.w", &a}}, {{"s1.w", &b}}}));
  REQUIRE(plan.metadata.tensors.size() == 2);
  CHECK(writer_of(plan, "s0.w") == 0);
  CHECK(writer_of(plan, "s1.w") == 1);
  CHECK(meshsim::find_tensor(plan.metadata, "s1.w")->shape == std::vector<int64_t>{2, 3});
  CHECK(plan.warnings.empty());
}

TEST_CASE("checkpoint plan: replicas go to the holder given the fewest bytes so far",
          "[io][checkpoint_plan]") {
  // DCP counts each item as its whole tensor's bytes: "big" (64 bytes) goes to rank 0, then
  // "small" to rank 1, "other" to rank 2, and "last" back to the emptiest: rank 3.
  const Tensor big = filled({16}, 1), small = filled({2}, 2), other = filled({2}, 3),
               last = filled({2}, 4);
  std::vector<std::vector<std::pair<std::string, const Tensor*>>> ranks(4);
  for (auto& r : ranks) r = {{"big", &big}, {"small", &small}, {"other", &other}, {"last", &last}};
  const auto plan = meshsim::plan_global_save(plans_of(ranks));
  CHECK(writer_of(plan, "big") == 0);
  CHECK(writer_of(plan, "small") == 1);
  CHECK(writer_of(plan, "other") == 2);
  CHECK(writer_of(plan, "last") == 3);
}

TEST_CASE("checkpoint plan: a tie goes to the first holder in CPython's set order",
          "[io][checkpoint_plan]") {
  // Measured with torch 2.15's _dedup_save_plans: a tensor only ranks 3 and 11 hold goes to 11
  // (CPython iterates {3, 11} as 11, 3), one ranks 1 and 2 hold goes to 1.
  const Tensor t = filled({2}, 5), u = filled({2}, 6);
  std::vector<std::vector<std::pair<std::string, const Tensor*>>> ranks(12);
  ranks[3] = {{"t", &t}};
  ranks[11] = {{"t", &t}};
  CHECK(writer_of(meshsim::plan_global_save(plans_of(ranks)), "t") == 11);
  std::vector<std::vector<std::pair<std::string, const Tensor*>>> pair(3);
  pair[1] = {{"u", &u}};
  pair[2] = {{"u", &u}};
  CHECK(writer_of(meshsim::plan_global_save(plans_of(pair)), "u") == 1);
}

TEST_CASE("checkpoint plan: replicas that differ are warned about, naming both ranks",
          "[io][checkpoint_plan]") {
  const Tensor stage0 = filled({16}, 7, DType::kUInt8), stage1 = filled({16}, 9, DType::kUInt8);
  const auto plan = meshsim::plan_global_save(
      plans_of({{{"rng", &stage0}}, {{"rng", &stage0}}, {{"rng", &stage1}}, {{"rng", &stage1}}}));
  REQUIRE(plan.warnings.size() == 1);
  CHECK_THAT(plan.warnings[0],
             Catch::StartsWith("ranks 0 and 2 save 'rng' with different values at one place "
                               "(the whole tensor)") &&
                 Catch::Contains("rank 0's"));
}

TEST_CASE("checkpoint plan: one name with two shapes or dtypes is an error",
          "[io][checkpoint_plan]") {
  const Tensor a = filled({4}, 1), b = filled({5}, 1), c = filled({4}, 1, DType::kInt64);
  CHECK_THROWS_WITH(meshsim::plan_global_save(plans_of({{{"w", &a}}, {{"w", &b}}})),
                    "rank 0 saves 'w' as float32[4] and rank 1 as float32[5]: one name is one "
                    "tensor across ranks");
  CHECK_THROWS_WITH(meshsim::plan_global_save(plans_of({{{"w", &a}}, {{"w", &c}}})),
                    Catch::Contains("as int64[4]"));
}

TEST_CASE("checkpoint plan: a sharded tensor some holders leave out fails validation",
          "[io][checkpoint_plan]") {
  std::vector<std::unique_ptr<meshsim::LocalGroupCreator>> groups;
  std::vector<meshsim::DTensor> shards;
  for (int64_t r = 0; r < 2; ++r) {
    groups.push_back(std::make_unique<meshsim::LocalGroupCreator>(r, 2));
    shards.push_back(meshsim::DTensor::zeros(meshsim::DTensorSpec{
        meshsim::DeviceMesh::init(*groups.back(), "cuda", std::vector<int64_t>{2}),
        {meshsim::Shard{0}},
        {4, 2},
        DType::kFloat32}));
  }
  const std::vector<StateDictEntry> holds{{"w", nullptr, &shards[0]}}, leaves_out{};
  const std::vector<LocalSavePlan> plans{meshsim::plan_local_save(0, holds),
                                         meshsim::plan_local_save(1, leaves_out)};
  try {
    meshsim::plan_global_save(plans);
    FAIL("planned");
  } catch (const meshsim::Error& e) {
    CHECK(e.type() == meshsim::PyErrorType::kValueError);
    CHECK_THAT(e.what(), Catch::StartsWith("Failed to validate global plan") &&
                             Catch::Contains("hold 4 of its 8 elements"));
  }
  // A plain copy of the whole tensor beside the shards overlaps them.
  const Tensor whole = filled({4, 2}, 0);
  const std::vector<StateDictEntry> plain{{"w", &whole, nullptr}},
      shard1{{"w", nullptr, &shards[1]}};
  CHECK_THROWS_WITH(meshsim::plan_global_save(std::vector<LocalSavePlan>{
                        meshsim::plan_local_save(0, plain), meshsim::plan_local_save(1, shard1)}),
                    Catch::Contains("overlap"));
}

TEST_CASE("checkpoint plan: an empty shard is an item, its writer charged the whole tensor",
          "[io][checkpoint_plan]") {
  // u float32[3] sharded over a mesh whose rank table is [3, 2, 1, 0]: rank 0 (coordinate 3)
  // holds an empty shard. DCP plans it like any shard and charges rank 0 u's 12 bytes, so the
  // plain tensor p every rank holds goes to rank 1 (without the empty item, it would be rank 0).
  std::vector<std::unique_ptr<meshsim::LocalGroupCreator>> groups;
  std::vector<meshsim::DTensor> shards;
  const Tensor p = filled({2}, 1);
  std::vector<LocalSavePlan> plans;
  for (int64_t r = 0; r < 4; ++r) {
    groups.push_back(std::make_unique<meshsim::LocalGroupCreator>(r, 4));
    shards.push_back(meshsim::DTensor::zeros(meshsim::DTensorSpec{
        meshsim::DeviceMesh::from_rank_table(*groups.back(), "cuda", {{4}, {3, 2, 1, 0}}),
        {meshsim::Shard{0}},
        {3},
        DType::kFloat32}));
  }
  for (int64_t r = 0; r < 4; ++r) {
    const std::vector<StateDictEntry> entries{{"u", nullptr, &shards[static_cast<size_t>(r)]},
                                              {"p", &p, nullptr}};
    plans.push_back(meshsim::plan_local_save(r, entries));
  }
  CHECK(plans[0].items[0].indices[0].empty());
  const auto plan = meshsim::plan_global_save(plans);
  CHECK(writer_of(plan, "p") == 1);
  const meshsim::CheckpointTensor* u = meshsim::find_tensor(plan.metadata, "u");
  REQUIRE(u != nullptr);
  CHECK(u->chunks.size() == 4);
}
