// Properties over random meshes, tensors and placements (uneven sizes included): the indices each
// rank holds equal an independent list-based model of PyTorch's distribute_tensor, and the shards
// of one replica set tile the global tensor exactly once.
#include <catch2/catch.hpp>

#include "src/dtensor/local_shard.hpp"
#include "tests/support/splitmix.hpp"

using namespace meshsim;
using Ints = std::vector<int64_t>;

using meshsim::testing::SplitMix;

namespace {

int64_t product(const Ints& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// torch.chunk on a Python list, written out plainly: pieces of ceil(n / k), fewer when they run
// out.
std::vector<Ints> torch_chunk(const Ints& items, int64_t k) {
  const auto n = static_cast<int64_t>(items.size());
  const int64_t q = (n + k - 1) / k;
  std::vector<Ints> out;
  for (int64_t start = 0; q > 0 && start < n; start += q) {
    out.emplace_back(items.begin() + start, items.begin() + std::min(n, start + q));
  }
  return out;
}

// Piece c of torch.chunk(items, k), or nothing when there are fewer pieces.
Ints piece(const Ints& items, int64_t k, int64_t c) {
  const std::vector<Ints> pieces = torch_chunk(items, k);
  return c < static_cast<int64_t>(pieces.size()) ? pieces[static_cast<size_t>(c)] : Ints{};
}

// The reference: placements applied left to right to explicit index lists.
std::vector<Ints> reference_indices(const Ints& global, const Ints& mesh, const Ints& coord,
                                    const std::vector<Placement>& placements) {
  std::vector<Ints> held;
  for (int64_t n : global) {
    Ints all;
    for (int64_t i = 0; i < n; ++i) all.push_back(i);
    held.push_back(all);
  }
  for (size_t m = 0; m < placements.size(); ++m) {
    const int64_t k = mesh[m];
    const int64_t c = coord[m];
    if (const auto* s = std::get_if<Shard>(&placements[m])) {
      Ints& h = held[static_cast<size_t>(s->dim)];
      h = piece(h, k, c);
    } else if (const auto* ss = std::get_if<StridedShard>(&placements[m])) {
      Ints& h = held[static_cast<size_t>(ss->dim)];
      Ints kept;
      for (const Ints& group : torch_chunk(h, ss->split_factor)) {
        const Ints p = piece(group, k, c);
        kept.insert(kept.end(), p.begin(), p.end());
      }
      h = kept;
    }
  }
  return held;
}

}  // namespace

TEST_CASE("local_shard property: shards tile the global tensor for random placements",
          "[dtensor][local_shard][property]") {
  SplitMix rng{20261130};
  for (int trial = 0; trial < 1500; ++trial) {
    // A mesh of up to 4 dims and at most 64 ranks.
    Ints mesh;
    const int64_t mesh_ndim = 1 + rng.below(4);
    for (int64_t d = 0; d < mesh_ndim; ++d) {
      const int64_t room = 64 / product(mesh);
      mesh.push_back(1 + rng.below(std::min<int64_t>(room, 5)));
    }
    Ints global;
    const int64_t tensor_ndim = 1 + rng.below(3);
    for (int64_t d = 0; d < tensor_ndim; ++d) global.push_back(rng.below(14));
    std::vector<Placement> placements;
    int64_t replicas = 1;
    for (int64_t d = 0; d < mesh_ndim; ++d) {
      switch (rng.below(4)) {
        case 0:
          placements.push_back(Shard{rng.below(tensor_ndim)});
          break;
        case 1:
          placements.push_back(StridedShard{rng.below(tensor_ndim), 1 + rng.below(5)});
          break;
        case 2:
          placements.push_back(Replicate{});
          replicas *= mesh[static_cast<size_t>(d)];
          break;
        default:
          placements.push_back(Partial{});
          replicas *= mesh[static_cast<size_t>(d)];
          break;
      }
    }
    // Count how many ranks hold each global element.
    Ints strides(global.size(), 1);
    for (size_t d = global.size() - 1; d-- > 0;) strides[d] = strides[d + 1] * global[d + 1];
    Ints held(static_cast<size_t>(product(global)), 0);
    for (int64_t r = 0; r < product(mesh); ++r) {
      Ints coord(mesh.size());
      for (int64_t d = mesh_ndim, rest = r; d-- > 0;) {
        coord[static_cast<size_t>(d)] = rest % mesh[static_cast<size_t>(d)];
        rest /= mesh[static_cast<size_t>(d)];
      }
      std::vector<Ints> owned;
      for (const IndexRuns& runs : owned_indices(global, mesh, coord, placements))
        owned.push_back(runs.expand());
      INFO("trial " << trial << ", rank " << r);
      REQUIRE(owned == reference_indices(global, mesh, coord, placements));
      const LocalShard shard =
          compute_local_shape_and_global_offset(global, mesh, coord, placements);
      for (size_t d = 0; d < global.size(); ++d) {
        REQUIRE(shard.shape[d] == static_cast<int64_t>(owned[d].size()));
        REQUIRE(shard.offset[d] == (owned[d].empty() ? global[d] : owned[d][0]));
      }
      // Walk the Cartesian product of owned indices.
      Ints pos(global.size(), 0);
      bool empty = false;
      for (const auto& o : owned) empty = empty || o.empty();
      while (!empty) {
        int64_t flat = 0;
        for (size_t d = 0; d < global.size(); ++d)
          flat += owned[d][static_cast<size_t>(pos[d])] * strides[d];
        ++held[static_cast<size_t>(flat)];
        size_t d = global.size();
        while (d-- > 0 && ++pos[d] == static_cast<int64_t>(owned[d].size())) pos[d] = 0;
        if (d == SIZE_MAX) break;
      }
    }
    for (int64_t count : held) {
      INFO("trial " << trial);
      REQUIRE(count == replicas);
    }
  }
}
