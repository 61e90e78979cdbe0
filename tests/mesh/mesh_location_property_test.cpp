// A rank's coordinate in a mesh (computed from the digits of its position in the rank table)
// checked against the full mesh tensor, for random shapes, rank tables, slices and flattens.
#include <algorithm>

#include <catch2/catch.hpp>

#include "src/error.hpp"
#include "src/mesh/device_mesh.hpp"
#include "tests/support/splitmix.hpp"

using meshsim::DeviceMesh;
using meshsim::GroupTable;
using meshsim::LocalGroupCreator;
using meshsim::RankTensor;
using Ints = std::vector<int64_t>;
using Names = std::vector<std::string>;

namespace {

// The caller's entry in `mesh.mesh()` at its coordinate must be itself; a rank without a
// coordinate must not be in the mesh's replica.
void check_located(const DeviceMesh& mesh, int64_t rank) {
  const RankTensor replica = mesh.mesh();
  if (!mesh.coordinate()) {
    CHECK(std::find(replica.values.begin(), replica.values.end(), rank) == replica.values.end());
    return;
  }
  int64_t flat = 0;
  for (size_t d = 0; d < mesh.ndim(); ++d) flat = flat * mesh.size(d) + (*mesh.coordinate())[d];
  CHECK(replica.values.at(static_cast<size_t>(flat)) == rank);
}

}  // namespace

TEST_CASE("device_mesh: coordinates agree with the full mesh tensor on random meshes",
          "[mesh][device_mesh][property]") {
  meshsim::testing::SplitMix rng{2026};
  int checked = 0;
  for (int round = 0; round < 200; ++round) {
    const auto ndim = static_cast<size_t>(1 + rng.below(4));
    Ints shape;
    int64_t numel = 1;
    for (size_t d = 0; d < ndim; ++d) {
      shape.push_back(1 + rng.below(4));
      numel *= shape.back();
    }
    const int64_t world = numel + rng.below(5);
    Names names;
    for (size_t d = 0; d < ndim; ++d) names.push_back("d" + std::to_string(d));
    // Half the meshes use an explicit, shuffled rank table drawn from the world.
    Ints table(static_cast<size_t>(world));
    for (int64_t i = 0; i < world; ++i) table[static_cast<size_t>(i)] = i;
    const bool explicit_table = rng.below(2) == 0;
    if (explicit_table) {
      for (int64_t i = world - 1; i > 0; --i) {
        std::swap(table[static_cast<size_t>(i)], table[static_cast<size_t>(rng.below(i + 1))]);
      }
    }
    table.resize(static_cast<size_t>(numel));
    // A slice: a random non-empty subset of dims, in order.
    Names kept;
    for (const std::string& n : names) {
      if (rng.below(2) == 0) kept.push_back(n);
    }
    if (kept.empty()) kept.push_back(names.back());
    INFO("shape " << shape.size() << "d, numel " << numel << ", world " << world);
    auto groups_table = std::make_shared<GroupTable>(world);
    for (int64_t rank = 0; rank < world; ++rank) {
      INFO("rank " << rank);
      LocalGroupCreator groups(rank, groups_table);
      const DeviceMesh root =
          explicit_table ? DeviceMesh::from_rank_table(groups, "cuda", {shape, table}, names)
                         : DeviceMesh::init(groups, "cuda", shape, names);
      check_located(root, rank);
      try {
        DeviceMesh sliced = root.slice(kept);
        check_located(sliced, rank);
        check_located(sliced.flatten(groups), rank);
        ++checked;
      } catch (const meshsim::Error& e) {
        // Only a rank outside a mesh with several replicas may fail, with PyTorch's error.
        CHECK_FALSE(root.coordinate().has_value());
        CHECK(std::string(e.what()).find("needs to either have all its original") !=
              std::string::npos);
      }
    }
  }
  CHECK(checked > 1000);
}
