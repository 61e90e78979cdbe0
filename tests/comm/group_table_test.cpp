#include "src/comm/group_table.hpp"

#include <algorithm>

#include <catch2/catch.hpp>

#include "src/comm/group_creator.hpp"
#include "src/error.hpp"
#include "src/mesh/mesh_layout.hpp"
#include "src/tensor/memory_budget.hpp"
#include "tests/support/splitmix.hpp"

using meshsim::Axis;
using meshsim::GroupBatch;
using meshsim::GroupTable;
using meshsim::LocalGroupCreator;
using Ints = std::vector<int64_t>;

namespace {

std::vector<Ints> batch_groups(const GroupBatch& batch) {
  std::vector<Ints> out;
  for (size_t i = 0; i < batch.count(); ++i) out.push_back(*batch.members(i));
  return out;
}

}  // namespace

TEST_CASE("group_batch: the groups of an axis are global_ranks, each sorted",
          "[comm][group_table]") {
  meshsim::testing::SplitMix rng{7};
  for (int round = 0; round < 300; ++round) {
    // A random permutation of a world as the rank map, and a random single-mode axis over it.
    const int64_t world = 1 + rng.below(48);
    Ints table(static_cast<size_t>(world));
    for (int64_t i = 0; i < world; ++i) table[static_cast<size_t>(i)] = i;
    for (int64_t i = world - 1; i > 0; --i) {
      std::swap(table[static_cast<size_t>(i)], table[static_cast<size_t>(rng.below(i + 1))]);
    }
    int64_t size = 1 + rng.below(world);
    int64_t stride = 1 + rng.below(world);
    while (size > 1 && (size - 1) * stride >= world) --size;
    const Axis axis = Axis::single(size, stride);
    GroupTable groups(world);
    const auto batch = groups.axis_groups(axis, groups.rank_map(table));
    INFO("world " << world << " axis " << axis.to_string());
    std::vector<Ints> expected = meshsim::global_ranks(axis, table);
    for (Ints& g : expected) std::sort(g.begin(), g.end());
    CHECK(batch_groups(*batch) == expected);
    CHECK(batch->invalid().empty());
    for (int64_t r = 0; r < world; ++r) {
      const int64_t g = batch->group_of(r);
      const auto holds = [&](const Ints& m) { return std::binary_search(m.begin(), m.end(), r); };
      if (g < 0) {
        CHECK(std::none_of(expected.begin(), expected.end(), holds));
      } else {
        CHECK(holds(expected[static_cast<size_t>(g)]));
      }
    }
    // Asked again (by another rank), the batch is the same object.
    CHECK(groups.axis_groups(axis, groups.rank_map(table)) == batch);
  }
}

TEST_CASE("group_batch: stops at the first group new_group refuses, with c10d's error",
          "[comm][group_table]") {
  GroupTable groups(4);
  // Rows of [[0, 1], [2, 9]]: the second row names a rank outside the world of 4.
  const Ints table{0, 1, 2, 9};
  const auto batch = groups.axis_groups(Axis::single(2, 1), groups.rank_map(table));
  CHECK(batch_groups(*batch) == std::vector<Ints>{{0, 1}});
  CHECK(batch->invalid() == "Rank 9 is out of range. Valid ranks are 0 to 3 (world_size=4)");
  LocalGroupCreator creator(0, std::make_shared<GroupTable>(4));
  CHECK_THROWS_WITH(creator.new_groups(Axis::single(2, 1), creator.table().rank_map(table)),
                    "Rank 9 is out of range. Valid ranks are 0 to 3 (world_size=4)");
  CHECK(creator.groups_created() == 2);  // WORLD and the valid first row
}

TEST_CASE("group_table: ranks that agree share names; a rank that disagrees keeps its own view",
          "[comm][group_table]") {
  auto table = std::make_shared<GroupTable>(4);
  LocalGroupCreator r0(0, table), r1(1, table), r3(3, table);
  const Ints pair01{0, 1}, pair23{2, 3}, pair13{1, 3};
  CHECK(r0.new_group(pair01) == "1");
  CHECK(r1.new_group(pair01) == "1");
  CHECK(r3.new_group(pair13) == "1");  // the same name, other members
  CHECK(*r0.group_ranks("1") == pair01);
  CHECK(*r1.group_ranks("1") == pair01);
  CHECK(*r3.group_ranks("1") == pair13);
  CHECK(r0.find_group(pair13) == std::nullopt);
  CHECK(r3.find_group(pair13) == "1");
  // Names beyond what a rank created are unknown to it, even when others created them.
  CHECK(r0.new_group(pair23) == std::nullopt);
  CHECK(r0.group_ranks("2") != nullptr);
  CHECK(r1.group_ranks("2") == nullptr);
  CHECK(r1.group_ranks("x") == nullptr);
  // find_group answers the newest group with those members.
  CHECK(r0.new_group(pair01) == "3");
  CHECK(r0.find_group(Ints{1, 0}) == "3");
  CHECK(*r0.group_ranks("0") == Ints{0, 1, 2, 3});
}

TEST_CASE("group_table: labels name the origin, numbered when it repeats", "[comm][group_table]") {
  GroupTable groups(4);
  const meshsim::MeshLayout mesh = meshsim::MeshLayout::from_sizes_strides(Ints{2, 2});
  const auto tp = groups.axis_groups(mesh[1], groups.identity_map(4));
  groups.define(1, groups.explicit_group(Ints{0, 1}), 0, "a");
  groups.define(2, groups.explicit_group(Ints{2, 3}), 0, "a");
  groups.define(3, tp, 0, "world.tp");
  groups.define(5, tp, 0, "world.tp");  // the same mesh built again
  groups.define(7, groups.explicit_group(Ints{1, 2}), 0);
  CHECK(groups.label(0) == "WORLD");
  CHECK(groups.label(1) == "a");
  CHECK(groups.label(2) == "a(2)");
  CHECK(groups.label(3) == "world.tp#0");
  CHECK(groups.label(4) == "world.tp#1");
  CHECK(groups.label(6) == "world.tp(2)#1");
  CHECK(groups.label(7) == "7");  // nothing says what created it
  CHECK(groups.label(8) == "8");  // not defined
}

TEST_CASE("group_table: a rank table is shared by every rank and counted once",
          "[comm][group_table]") {
  GroupTable groups(8);
  const Ints table{3, 1, 0, 2};
  const auto a = groups.rank_map(table);
  CHECK(groups.rank_map(table) == a);
  CHECK(groups.identity_map(4) == groups.identity_map(4));
  CHECK(a->position(0) == 2);
  CHECK(a->position(5) == -1);
  CHECK(a->position(-1) == -1);
  CHECK_FALSE(a->has_repeats());
  CHECK(groups.rank_map(Ints{1, 1})->has_repeats());
}

TEST_CASE("group_table: names count against the memory budget until the table goes",
          "[comm][group_table][limits]") {
  struct Restore {
    ~Restore() { meshsim::MemoryBudget::set_limit(meshsim::MemoryBudget::kUnlimited); }
  } restore;
  const uint64_t before = meshsim::MemoryBudget::in_use();
  meshsim::MemoryBudget::set_limit(before + 4096);
  {
    auto table = std::make_shared<GroupTable>(4);
    LocalGroupCreator r0(0, table);
    const Ints pair01{0, 1};
    // A loop creating groups fills the budget; the one that does not fit is a MemoryError.
    int64_t created = 0;
    std::string error;
    for (; created < 1000; ++created) {
      try {
        r0.new_group(pair01);
      } catch (const meshsim::Error& e) {
        error = e.what();
        break;
      }
    }
    CHECK(created > 10);
    CHECK(created < 1000);
    CHECK(meshsim::MemoryBudget::in_use() > before);
    CHECK_THAT(error, Catch::StartsWith("process groups needs "));
    CHECK_THAT(error, Catch::EndsWith("of the 4.0 KiB memory budget is in use (--max-memory)"));
  }
  CHECK(meshsim::MemoryBudget::in_use() == before);
}
