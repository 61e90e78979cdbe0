// Layout algebra: the cost of answering "which ranks form each group" and "where am I".
#include <benchmark/benchmark.h>

#include <numeric>

#include "src/comm/group_creator.hpp"
#include "src/mesh/device_mesh.hpp"
#include "src/mesh/mesh_layout.hpp"

namespace {

using meshsim::Axis;
using meshsim::MeshLayout;

void BM_layout_canonical(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(Axis::canonical({{7, 30}, {5, 6}, {3, 2}, {2, 1}, {1, 9}}));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_layout_canonical);

void BM_layout_complement(benchmark::State& state) {
  const Axis axis = Axis::parse("(2,4):(256,1)");
  for (auto _ : state) benchmark::DoNotOptimize(axis.complement(state.range(0)));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_layout_complement)->Arg(1024)->Arg(65536);

// All groups of the middle dim of a (world/64, 8, 8) mesh.
void BM_layout_global_ranks(benchmark::State& state) {
  const int64_t world = state.range(0);
  std::vector<int64_t> table(static_cast<size_t>(world));
  std::iota(table.begin(), table.end(), 0);
  const std::vector<int64_t> sizes{world / 64, 8, 8};
  const MeshLayout layout = MeshLayout::from_sizes_strides(sizes);
  for (auto _ : state) benchmark::DoNotOptimize(meshsim::global_ranks(layout[1], table));
  state.SetItemsProcessed(state.iterations() * world);
}
BENCHMARK(BM_layout_global_ranks)->Arg(1024)->Arg(65536);

// The first rank of a fresh world building a 3-D mesh: the world's group table for every dim
// (what later ranks share), plus its coordinate.
void BM_layout_init_device_mesh(benchmark::State& state) {
  const int64_t world = state.range(0);
  const std::vector<int64_t> sizes{world / 64, 8, 8};
  for (auto _ : state) {
    meshsim::LocalGroupCreator groups(world / 2, world);
    benchmark::DoNotOptimize(meshsim::DeviceMesh::init(groups, "cuda", sizes));
  }
  state.SetItemsProcessed(state.iterations() * world);
}
BENCHMARK(BM_layout_init_device_mesh)->Arg(1024)->Arg(16384);

}  // namespace

BENCHMARK_MAIN();
