#include "src/mesh/mesh_layout.hpp"

#include <catch2/catch.hpp>

using meshsim::Axis;
using meshsim::MeshLayout;

TEST_CASE("layout: global ranks of an axis (docs/mesh.md 1)", "[mesh][layout]") {
  std::vector<int64_t> table(16);
  for (int64_t i = 0; i < 16; ++i) table[static_cast<size_t>(i)] = i;
  const auto groups = meshsim::global_ranks(Axis::parse("(2,2):(4,1)"), table);
  CHECK(groups == std::vector<std::vector<int64_t>>{
                      {0, 1, 4, 5}, {2, 3, 6, 7}, {8, 9, 12, 13}, {10, 11, 14, 15}});
}

TEST_CASE("layout: full mesh tensor through a permuted rank table (docs/mesh.md 1)",
          "[mesh][layout]") {
  const std::vector<int64_t> table{0, 2, 1, 3};
  const std::vector<int64_t> sizes{2, 2}, strides{1, 2};
  const auto full = MeshLayout::from_sizes_strides(sizes, strides).full_mesh_tensor(table);
  CHECK(full.shape == std::vector<int64_t>{1, 2, 2});
  CHECK(full.values == std::vector<int64_t>{0, 1, 2, 3});
}

TEST_CASE("layout: row-major default strides, collapse and splice", "[mesh][layout]") {
  const std::vector<int64_t> sizes{2, 2, 2};
  const MeshLayout l = MeshLayout::from_sizes_strides(sizes);
  CHECK(l.to_string() == "[(2:4), (2:2), (2:1)]");
  CHECK(l.collapse().to_string() == "(8:1)");
  CHECK(MeshLayout({l[0], l[2]}).collapse().to_string() == "(2,2):(4,1)");
  CHECK(l.splice(1, 3, {Axis::single(4, 1)}).to_string() == "[(2:4), (4:1)]");
  CHECK(l.replica_offsets(16) == std::vector<int64_t>{0, 8});
}
