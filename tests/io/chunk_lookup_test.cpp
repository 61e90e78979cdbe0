// ChunkLookup against a scan of every chunk: saved and target layouts of random shapes, meshes and
// placements (strided shards included), where each chunk that shares an element with a target
// shard must be a candidate, and candidates come in ascending order.
#include "src/io/chunk_lookup.hpp"

#include <algorithm>

#include <catch2/catch.hpp>

#include "src/dtensor/local_shard.hpp"
#include "tests/support/splitmix.hpp"

namespace {

using meshsim::IndexRuns;
using meshsim::Placement;

bool share_an_element(const std::vector<IndexRuns>& a, const std::vector<IndexRuns>& b) {
  for (size_t d = 0; d < a.size(); ++d) {
    bool met = false;
    for (const IndexRuns::Run& x : a[d].runs()) {
      for (const IndexRuns::Run& y : b[d].runs())
        met = met || std::max(x.start, y.start) < std::min(x.stop, y.stop);
    }
    if (!met) return false;
  }
  return true;
}

struct Layout {
  std::vector<int64_t> mesh;
  std::vector<Placement> placements;
};

Layout random_layout(meshsim::testing::SplitMix& rng, size_t ndim) {
  Layout out;
  const int64_t mesh_dims = 1 + rng.below(2);
  for (int64_t m = 0; m < mesh_dims; ++m) {
    out.mesh.push_back(1 + rng.below(5));
    const int64_t kind = rng.below(4);
    const int64_t dim = rng.below(static_cast<int64_t>(ndim));
    if (kind == 0) {
      out.placements.push_back(meshsim::Replicate{});
    } else if (kind == 3) {
      out.placements.push_back(meshsim::StridedShard{dim, 2});
    } else {
      out.placements.push_back(meshsim::Shard{dim});
    }
  }
  return out;
}

// Every rank's indices of `shape` under `layout`.
std::vector<std::vector<IndexRuns>> shards(const std::vector<int64_t>& shape,
                                           const Layout& layout) {
  std::vector<std::vector<IndexRuns>> out;
  std::vector<int64_t> coordinate(layout.mesh.size(), 0);
  while (true) {
    out.push_back(meshsim::owned_indices(shape, layout.mesh, coordinate, layout.placements));
    size_t d = coordinate.size();
    while (d > 0 && ++coordinate[d - 1] == layout.mesh[d - 1]) coordinate[--d] = 0;
    if (d == 0) return out;
  }
}

}  // namespace

TEST_CASE("chunk lookup: every chunk meeting a shard is a candidate", "[io][chunk_lookup]") {
  meshsim::testing::SplitMix rng{20261204};
  int64_t checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const size_t ndim = 1 + static_cast<size_t>(rng.below(3));
    std::vector<int64_t> shape;
    for (size_t d = 0; d < ndim; ++d) shape.push_back(rng.below(9));
    const auto saved = shards(shape, random_layout(rng, ndim));
    std::vector<const std::vector<IndexRuns>*> chunks;
    for (const auto& c : saved) chunks.push_back(&c);
    const meshsim::ChunkLookup lookup(chunks);
    for (const auto& target : shards(shape, random_layout(rng, ndim))) {
      const std::vector<size_t> got = lookup.candidates(target);
      CHECK(std::is_sorted(got.begin(), got.end()));
      for (size_t c = 0; c < saved.size(); ++c) {
        if (!share_an_element(saved[c], target)) continue;
        INFO("trial " << trial << ", chunk " << c);
        CHECK(std::binary_search(got.begin(), got.end(), c));
        ++checked;
      }
    }
  }
  CHECK(checked > 1000);
}

TEST_CASE("chunk lookup: a scalar's chunks all meet it", "[io][chunk_lookup]") {
  const std::vector<IndexRuns> scalar;
  const meshsim::ChunkLookup lookup({&scalar, &scalar});
  CHECK(lookup.candidates(scalar) == std::vector<size_t>{0, 1});
}
