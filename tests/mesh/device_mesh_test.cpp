#include "src/mesh/device_mesh.hpp"

#include <catch2/catch.hpp>

#include "src/error.hpp"

using meshsim::DeviceMesh;
using meshsim::LocalGroupCreator;
using Groups = std::vector<std::vector<int64_t>>;
using Ints = std::vector<int64_t>;
using Names = std::vector<std::string>;

namespace {

const Ints kShape222{2, 2, 2};
const Names kPpDpTp{"pp", "dp", "tp"};

// The (2,2,2) pp/dp/tp mesh of docs/mesh.md section 2 as seen by `rank` of a world of 8.
DeviceMesh world_mesh(LocalGroupCreator& groups) {
  return DeviceMesh::init(groups, "cuda", kShape222, kPpDpTp);
}

template <typename F>
void on_each_rank(int64_t world, F&& f) {
  for (int64_t rank = 0; rank < world; ++rank) {
    INFO("rank " << rank);
    LocalGroupCreator groups(rank, world);
    f(rank, groups);
  }
}

}  // namespace

TEST_CASE("device_mesh: (2,2,2) groups and coordinates (docs/mesh.md 2 worked example)",
          "[mesh][device_mesh]") {
  LocalGroupCreator g0(0, 8);
  const DeviceMesh m = world_mesh(g0);
  CHECK(m.layout().to_string() == "[(2:4), (2:2), (2:1)]");
  CHECK(m.groups(2) == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(m.groups(1) == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(m.groups(0) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  on_each_rank(8, [](int64_t r, LocalGroupCreator& g) {
    const DeviceMesh mesh = world_mesh(g);
    CHECK(mesh.coordinate() == Ints{r / 4, (r / 2) % 2, r % 2});
    CHECK(mesh.local_rank(g, std::string("tp")) == r % 2);
    CHECK(mesh.local_rank(g, std::string("pp")) == r / 4);
  });
}

TEST_CASE("device_mesh: group names come from a per-process counter in creation order",
          "[mesh][device_mesh]") {
  on_each_rank(8, [](int64_t r, LocalGroupCreator& g) {
    const DeviceMesh mesh = world_mesh(g);
    // WORLD is "0"; pp groups are 1-4, dp groups 5-8, tp groups 9-12.
    CHECK(mesh.group_name(std::string("pp")) == std::to_string(1 + r % 4));
    CHECK(mesh.group_name(std::string("tp")) == std::to_string(9 + r / 2));
    CHECK(g.groups_created() == 13);
  });
  LocalGroupCreator g(3, 8);
  const Ints whole{8};
  CHECK(DeviceMesh::init(g, "cuda", whole).group_name() == "0");  // the world is reused
  CHECK_THROWS_WITH(world_mesh(g).group_name(),
                    Catch::Contains("`mesh_dim` needs to be specified"));
}

TEST_CASE("device_mesh: slicing shares the rank table and creates no groups",
          "[mesh][device_mesh][slice]") {
  on_each_rank(8, [](int64_t r, LocalGroupCreator& g) {
    const DeviceMesh mesh = world_mesh(g);
    const size_t created = g.groups_created();
    DeviceMesh dp_tp = mesh.slice({"dp", "tp"});
    CHECK(g.groups_created() == created);
    CHECK(dp_tp.mesh().values == (r < 4 ? Ints{0, 1, 2, 3} : Ints{4, 5, 6, 7}));
    CHECK(dp_tp.group_name(std::string("tp")) == mesh.group_name(std::string("tp")));
    CHECK_FALSE(dp_tp.is_root());
    CHECK(dp_tp.root() == mesh);
    const DeviceMesh spmd = dp_tp.flatten(g, std::string("spmd"));
    CHECK(spmd.groups(0) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
    CHECK(spmd.coordinate() == Ints{r % 4});

    DeviceMesh pp_tp = mesh.slice({"pp", "tp"});
    CHECK(pp_tp.full_mesh().values == Ints{0, 1, 4, 5, 2, 3, 6, 7});
    CHECK(pp_tp.flatten(g).groups(0) == Groups{{0, 1, 4, 5}, {2, 3, 6, 7}});
    CHECK(mesh.slice({"pp", "dp", "tp"}) == mesh);
  });
}

TEST_CASE("device_mesh: slicing errors match PyTorch", "[mesh][device_mesh][slice][errors]") {
  LocalGroupCreator g(0, 8);
  const DeviceMesh mesh = world_mesh(g);
  CHECK_THROWS_WITH(mesh.slice({"tp", "pp"}),
                    "Invalid mesh_dim_names ('tp', 'pp') specified. Mesh dim indices should be in "
                    "ascending order.");
  CHECK_THROWS_WITH(mesh.slice({"xx"}), Catch::StartsWith("Invalid mesh_dim_names ('xx',)"));
  meshsim::PyErrorType raised = meshsim::PyErrorType::kRuntimeError;
  try {
    mesh.slice({"xx"});
    FAIL("slicing an unknown dim succeeded");
  } catch (const meshsim::Error& e) {
    raised = e.type();
  }
  CHECK(raised == meshsim::PyErrorType::kKeyError);
  const Ints four{4};
  CHECK_THROWS_WITH(DeviceMesh::init(g, "cuda", four).slice({"a"}),
                    "Cannot slice a DeviceMesh without mesh_dim_names!");
  mesh.slice({"dp", "tp"}).flatten(g);  // registers "dp_tp" on the root
  CHECK(mesh.slice({"pp", "dp_tp"}).shape() == Ints{2, 4});
  CHECK_THROWS_WITH(mesh.slice({"dp_tp", "tp"}),
                    "Slicing overlapping dim_names ('dp_tp', 'tp') is not allowed.");
  // Flattened names are sliceable from the root only.
  CHECK_THROWS_WITH(mesh.slice({"pp", "dp"}).slice({"dp_tp"}),
                    Catch::StartsWith("Invalid mesh_dim_names"));
}

TEST_CASE("device_mesh: flatten cache and errors", "[mesh][device_mesh][flatten]") {
  LocalGroupCreator g(0, 8);
  const DeviceMesh mesh = world_mesh(g);
  const DeviceMesh first = mesh.slice({"dp", "tp"}).flatten(g, std::string("spmd"));
  const size_t created = g.groups_created();
  CHECK(mesh.slice({"dp", "tp"}).flatten(g, std::string("spmd")) == first);
  CHECK(g.groups_created() == created);
  CHECK_THROWS_WITH(mesh.slice({"pp", "tp"}).flatten(g, std::string("spmd")),
                    "Flatten mesh with mesh_dim_name spmd has been created before, Please specify "
                    "another valid mesh_dim_name.");
  CHECK_THROWS_WITH(mesh.slice({"dp", "tp"}).flatten(g, std::string("tp")),
                    Catch::StartsWith("tp already exists for submesh of the"));
  DeviceMesh tp = mesh.slice({"tp"});
  CHECK(tp.flatten(g, std::string("tp")) == tp);
  CHECK(mesh.flattened_names() == Names{"spmd"});
}

TEST_CASE("device_mesh: a flattened mesh is found by the layout of the dims it merges",
          "[mesh][device_mesh][flatten]") {
  LocalGroupCreator g(0, 8);
  DeviceMesh mesh = world_mesh(g);
  const size_t dp_tp[] = {1, 2};
  const size_t pp_dp_tp[] = {0, 1, 2};
  CHECK_FALSE(mesh.flattened_over(dp_tp).has_value());
  // Two names for one layout: the one created first, as PyTorch's dict order gives it.
  mesh.slice({"dp", "tp"}).flatten(g, std::string("z_first"));
  mesh.slice({"dp", "tp"}).flatten(g, std::string("a_second"));
  CHECK(mesh.flattened_names() == Names{"z_first", "a_second"});
  const std::optional<DeviceMesh> found = mesh.flattened_over(dp_tp);
  REQUIRE(found.has_value());
  CHECK(found->dim_names() == Names{"z_first"});
  CHECK(found->layout() == meshsim::MeshLayout::from_sizes_strides(Ints{4}, Ints{1}));
  // From a slice of the same root too; not for other dims, nor for all three.
  const size_t first_two[] = {0, 1};
  CHECK(mesh.slice({"dp", "tp"}).flattened_over(first_two).has_value());
  const size_t pp_tp[] = {0, 2};
  CHECK_FALSE(mesh.flattened_over(pp_tp).has_value());
  CHECK_FALSE(mesh.flattened_over(pp_dp_tp).has_value());
  // A size-1 dim leaves the layout as it is: [1, 2, 2] over all dims is the [2, 2] flattened.
  LocalGroupCreator g4(0, 4);
  DeviceMesh three = DeviceMesh::init(g4, "cuda", Ints{1, 2, 2}, kPpDpTp);
  three.slice({"dp", "tp"}).flatten(g4, std::string("dptp"));
  REQUIRE(three.flattened_over(pp_dp_tp).has_value());
  CHECK(three.flattened_over(pp_dp_tp)->dim_names() == Names{"dptp"});
  // Without dim names nothing can be flattened, and nothing is looked up.
  const DeviceMesh unnamed = DeviceMesh::init(g4, "cuda", Ints{2, 2});
  CHECK_FALSE(unnamed.flattened_over(first_two).has_value());
}

TEST_CASE("device_mesh: unflatten splits a dim and creates groups every time",
          "[mesh][device_mesh][unflatten]") {
  on_each_rank(8, [](int64_t r, LocalGroupCreator& g) {
    const Ints eight{8};
    const DeviceMesh flat = DeviceMesh::init(g, "cuda", eight, Names{"world"});
    const Ints sizes{2, 2, 2};
    const size_t before = g.groups_created();
    const DeviceMesh m = flat.unflatten(g, std::string("world"), sizes, kPpDpTp);
    CHECK(g.groups_created() == before + 12);
    CHECK(m.layout().to_string() == "[(2:4), (2:2), (2:1)]");
    CHECK(m.coordinate() == Ints{r / 4, (r / 2) % 2, r % 2});
    CHECK(m.groups(1) == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
    flat.unflatten(g, int64_t{0}, sizes, kPpDpTp);
    CHECK(g.groups_created() == before + 24);
    // New names are not sliceable from the root, but are from the unflattened mesh.
    CHECK_THROWS_AS(flat.slice({"dp"}), meshsim::Error);
    CHECK(m.slice({"dp"}).groups(0) == m.groups(1));
  });
  LocalGroupCreator g(0, 8);
  const Ints eight{8}, bad{3, 2};
  const DeviceMesh flat = DeviceMesh::init(g, "cuda", eight, Names{"world"});
  CHECK_THROWS_WITH(flat.unflatten(g, std::string("world"), bad, Names{"a", "b"}),
                    "The product of mesh_sizes=(3, 2) is 6, but the original dimension at dim=0 "
                    "has size 8. These must be equal for unflatten to work correctly.");
  CHECK_THROWS_WITH(flat.unflatten(g, int64_t{1}, eight, Names{"a"}),
                    "dim 1 specified in `_unflatten` is out of range 1");
  CHECK_THROWS_WITH(flat.unflatten(g, std::string("nope"), eight, Names{"a"}),
                    "dim nope specified in `_unflatten` is not in ('world',)");
  CHECK_THROWS_WITH(flat.unflatten(g, int64_t{0}, eight, Names{"a", "b"}),
                    "mesh_dim_names must have same length as mesh_sizes in _unflatten!");
}

TEST_CASE("device_mesh: explicit rank table [[0,2],[1,3]] (docs/mesh.md 2)",
          "[mesh][device_mesh]") {
  const meshsim::RankTensor table{{2, 2}, {0, 2, 1, 3}};
  on_each_rank(4, [&](int64_t r, LocalGroupCreator& g) {
    const DeviceMesh m = DeviceMesh::from_rank_table(g, "cuda", table, Names{"a", "b"});
    CHECK(m.groups(1) == Groups{{0, 2}, {1, 3}});
    CHECK(m.groups(0) == Groups{{0, 1}, {2, 3}});
    if (r == 2) CHECK(m.coordinate() == Ints{0, 1});
  });
  // Bad tables fail where PyTorch fails: in new_group (every rank alike), with c10d's messages...
  LocalGroupCreator g(0, 4);
  CHECK_THROWS_WITH(DeviceMesh::from_rank_table(g, "cuda", {{3}, {2, 0, 0}}),
                    "ranks list must not contain duplicate entries, got [0, 0, 2]");
  CHECK_THROWS_WITH(DeviceMesh::from_rank_table(g, "cuda", {{2, 2}, {0, 9, 1, 2}}),
                    "Rank 9 is out of range. Valid ranks are 0 to 3 (world_size=4)");
  // ...or, for a rank in two groups of one dim, when that rank computes its coordinate.
  LocalGroupCreator g1(1, 4);
  CHECK_THROWS_WITH(DeviceMesh::from_rank_table(g1, "cuda", {{2, 2}, {0, 1, 1, 2}}),
                    "rank_coords.size(0) must be 0 or 1, got 2");
}

TEST_CASE("device_mesh: local ranks are positions in sorted groups (explicit tables)",
          "[mesh][device_mesh]") {
  // DeviceMesh([[3, 1], [0, 2]], ("a", "b")): c10d sorts each group's ranks, so the local rank is
  // not the coordinate. Values from PyTorch 2.15 with the fake process group.
  const meshsim::RankTensor table{{2, 2}, {3, 1, 0, 2}};
  const std::vector<Ints> coordinates{{1, 0}, {0, 1}, {1, 1}, {0, 0}};
  const std::vector<Ints> local_ranks{{0, 0}, {0, 0}, {1, 1}, {1, 1}};
  on_each_rank(4, [&](int64_t r, LocalGroupCreator& g) {
    const DeviceMesh m = DeviceMesh::from_rank_table(g, "cuda", table, Names{"a", "b"});
    CHECK(m.coordinate() == coordinates[static_cast<size_t>(r)]);
    CHECK(Ints{m.local_rank(g, std::string("a")), m.local_rank(g, std::string("b"))} ==
          local_ranks[static_cast<size_t>(r)]);
  });
}

TEST_CASE("device_mesh: non-member ranks of a (5,) mesh in a world of 8", "[mesh][device_mesh]") {
  const Ints five{5};
  on_each_rank(8, [&](int64_t r, LocalGroupCreator& g) {
    const DeviceMesh m = DeviceMesh::init(g, "cuda", five, Names{"x"});
    CHECK(g.groups_created() == 2);  // every rank took part in creating the one group
    if (r < 5) {
      CHECK(m.coordinate() == Ints{r});
      CHECK(m.group_name() == "1");
    } else {
      CHECK_FALSE(m.coordinate().has_value());
      CHECK(m.mesh().values == Ints{0, 1, 2, 3, 4});
      CHECK_THROWS_AS(m.group_name(), meshsim::Error);
    }
  });
}

TEST_CASE("device_mesh: slicing on ranks outside the root mesh (PyTorch 2.15)",
          "[mesh][device_mesh][slice]") {
  const Ints two_by_two{2, 2}, one_by_four{1, 4};
  for (int64_t r = 4; r < 8; ++r) {
    INFO("rank " << r);
    LocalGroupCreator g(r, 8);
    const DeviceMesh m = DeviceMesh::init(g, "cuda", two_by_two, Names{"a", "b"});
    // The name, order and overlap checks run first, with the errors members get...
    CHECK_THROWS_WITH(m.slice({"b", "x"}),
                      "Invalid mesh_dim_names ('b', 'x') specified. Valid "
                      "mesh_dim_names are ['a', 'b'].");
    CHECK_THROWS_WITH(m.slice({"b", "a"}),
                      "Invalid mesh_dim_names ('b', 'a') specified. Mesh dim "
                      "indices should be in ascending order.");
    CHECK_THROWS_WITH(m.slice({"a", "a"}),
                      "Slicing overlapping dim_names ('a', 'a') is not allowed.");
    // ...then a slice with several replicas needs the rank in one of them.
    CHECK_THROWS_WITH(m.slice({"b"}), Catch::StartsWith("In order to get the mesh Tensor of a "
                                                        "DeviceMesh it needs to either have all"));
    CHECK(m.slice({"a", "b"}) == m);
    // One replica: the slice exists, with no coordinate and no groups.
    const DeviceMesh wide = DeviceMesh::init(g, "cuda", one_by_four, Names{"a", "b"});
    const DeviceMesh b = wide.slice({"b"});
    CHECK_FALSE(b.coordinate().has_value());
    CHECK(b.mesh().values == Ints{0, 1, 2, 3});
    CHECK_THROWS_WITH(b.group_name(), "list index out of range");
    CHECK_THROWS_WITH(wide.slice({"a"}), Catch::StartsWith("In order to get the mesh Tensor"));
  }
}

TEST_CASE("device_mesh: slice order allows ties and ignores size-1 dims (PyTorch 2.15)",
          "[mesh][device_mesh][slice]") {
  LocalGroupCreator g(1, 8);
  const Ints one_by_four{1, 4}, two_two_two{2, 2, 2};
  const DeviceMesh wide = DeviceMesh::init(g, "cuda", one_by_four, Names{"a", "b"});
  CHECK(wide.slice({"b", "a"}).coordinate() == Ints{1, 0});  // the size-1 dim leaves no stride
  const DeviceMesh m = DeviceMesh::init(g, "cuda", two_two_two, Names{"pp", "ep", "tp"});
  // Equal strides pass the order check, then fail as overlapping.
  CHECK_THROWS_WITH(m.slice({"tp", "ep", "tp"}),
                    "Slicing overlapping dim_names ('tp', 'ep', 'tp') is not allowed.");
}

TEST_CASE("device_mesh: init errors quote PyTorch", "[mesh][device_mesh][errors]") {
  LocalGroupCreator g(0, 8);
  const Ints two{2, 2}, big{3, 3};
  CHECK_THROWS_WITH(DeviceMesh::init(g, "cuda", two, Names{"a", "a"}),
                    Catch::StartsWith("Each mesh_dim_name must be unique"));
  CHECK_THROWS_WITH(DeviceMesh::init(g, "cuda", two, Names{"a"}),
                    Catch::StartsWith("mesh_shape and mesh_dim_names should have same length!"));
  CHECK_THROWS_WITH(DeviceMesh::init(g, "cuda:0", two),
                    Catch::StartsWith("Device type with index is not supported but got cuda:0."));
  CHECK_THROWS_WITH(DeviceMesh::init(g, "cuda", big),
                    "Mesh should not be bigger than default world size 8, but found 9 ranks!");
}

TEST_CASE("device_mesh: equality and hash are rank independent", "[mesh][device_mesh]") {
  LocalGroupCreator g0(0, 8), g2(2, 8);
  const DeviceMesh a = world_mesh(g0).slice({"tp"});
  const DeviceMesh b = world_mesh(g2).slice({"tp"});
  CHECK(a == b);
  CHECK(a.hash() == b.hash());
  CHECK(a.group_name() != b.group_name());
  CHECK_FALSE(world_mesh(g0).slice({"dp"}) == a);
}

TEST_CASE("device_mesh: root() is the mesh a slice, flatten or unflatten came from",
          "[mesh][device_mesh]") {
  LocalGroupCreator g(5, 8);
  DeviceMesh w = world_mesh(g);
  CHECK(w.slice({"tp"}).root() == w);
  CHECK(w.slice({"dp", "tp"}).flatten(g).root() == w);
  CHECK(w.root() == w);
  CHECK_FALSE(w.slice({"tp"}).root() == w.slice({"tp"}));
}

TEST_CASE("device_mesh: from_groups reuses groups and checks as DeviceMesh.from_group does",
          "[mesh][device_mesh][from_group]") {
  LocalGroupCreator g(5, 8);
  const DeviceMesh w = world_mesh(g);
  const size_t before = g.groups_created();
  const meshsim::RankTensor tp{{2}, {4, 5}};
  const DeviceMesh m =
      DeviceMesh::from_groups(g, "cuda", tp, std::nullopt, {w.group_name(std::string("tp"))});
  CHECK(g.groups_created() == before);  // no new group: not a collective
  CHECK(m.group_name() == w.group_name(std::string("tp")));
  CHECK(m.coordinate() == Ints{1});
  CHECK(m.is_root());
  CHECK_FALSE(m == w.slice({"tp"}));  // its rank table is the group's ranks, not the world's

  const meshsim::RankTensor dp_tp{{2, 2}, {4, 5, 6, 7}};
  const DeviceMesh two =
      DeviceMesh::from_groups(g, "cuda", dp_tp, Names{"dp", "tp"},
                              {w.group_name(std::string("dp")), w.group_name(std::string("tp"))});
  CHECK(two.coordinate() == Ints{0, 1});
  CHECK(two.group_name(std::string("dp")) == w.group_name(std::string("dp")));

  CHECK_THROWS_WITH(DeviceMesh::from_groups(g, "cuda", meshsim::RankTensor{{3}, {4, 5, 6}},
                                            std::nullopt, {w.group_name(std::string("tp"))}),
                    "Invalid mesh [4, 5, 6] for ProcessGroup with ranks [4, 5]");
  CHECK_THROWS_WITH(DeviceMesh::from_groups(g, "cuda", tp, Names{"dp", "tp"}, {"1", "2"}),
                    "Expects mesh with ndim equal to number of ProcessGroups but got mesh [4, 5] "
                    "and 2 ProcessGroups");
  CHECK_THROWS_WITH(DeviceMesh::from_groups(g, "cuda", meshsim::RankTensor{{2, 2}, {4, 5, 5, 7}},
                                            Names{"dp", "tp"}, {"1", "2"}),
                    Catch::Contains("repeats rank 5"));
  CHECK_THROWS_WITH(DeviceMesh::from_groups(g, "cuda", meshsim::RankTensor{{2, 2}, {4, 5, 6, 9}},
                                            Names{"dp", "tp"}, {"1", "2"}),
                    Catch::Contains("holds rank 9"));
}

TEST_CASE("py_nested_list prints a rank table as tolist() does", "[mesh]") {
  using meshsim::py_nested_list;
  using meshsim::RankTensor;
  CHECK(py_nested_list(RankTensor{{3}, {0, 1, 2}}) == "[0, 1, 2]");
  CHECK(py_nested_list(RankTensor{{2, 2}, {0, 1, 2, 3}}) == "[[0, 1], [2, 3]]");
  CHECK(py_nested_list(RankTensor{{2, 1, 2}, {0, 1, 2, 3}}) == "[[[0, 1]], [[2, 3]]]");
  CHECK(py_nested_list(RankTensor{{0}, {}}) == "[]");
}

TEST_CASE("device_mesh: rebind_groups re-attaches live groups by layout", "[mesh][device_mesh]") {
  LocalGroupCreator g(5, 8);
  const DeviceMesh live = world_mesh(g).slice({"dp", "tp"});
  DeviceMesh loaded = live.without_group_names();
  CHECK_FALSE(loaded.has_group_names());
  CHECK_THROWS_WITH(loaded.group_name(std::string("dp")),
                    "DeviceMesh process groups not initialized!");
  loaded.rebind_groups(g);
  CHECK(loaded.group_name(std::string("dp")) == live.group_name(std::string("dp")));
  CHECK(loaded.group_name(std::string("tp")) == live.group_name(std::string("tp")));
  // Groups that were never created in this process cannot be found.
  LocalGroupCreator fresh(5, 8);
  DeviceMesh orphan = live.without_group_names();
  CHECK_THROWS_WITH(orphan.rebind_groups(fresh), Catch::StartsWith("cannot rebind mesh dim 0"));
}
