// Random numbers: raw Philox4x32-10 words from meshsim against libcurand's host generator in the
// same run (where the CUDA toolkit is found).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "src/rng/cuda_random_kernel.hpp"
#include "src/rng/dtensor_rng_offsets.hpp"
#include "src/rng/philox.hpp"

#ifdef MESHSIM_HAVE_CURAND
#include <curand.h>
#endif

namespace {

constexpr size_t kWords = size_t{1} << 20;

// kWords words of one device subsequence, block after block; 0: scalar rounds, 1: the fastest
// path of this CPU (AVX2 where it has it).
void BM_rng_philox_words(benchmark::State& state) {
  const meshsim::PhiloxPath path =
      state.range(0) == 0 ? meshsim::PhiloxPath::kScalar : meshsim::best_philox_path();
  state.SetLabel(std::string(meshsim::philox_path_name(path)));
  std::vector<uint32_t> out(kWords);
  uint64_t block = 0;
  for (auto _ : state) {
    meshsim::curand_blocks(42, 0, block, out, path);
    block += kWords / 4;
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kWords));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kWords * 4));
}
BENCHMARK(BM_rng_philox_words)->Arg(0)->Arg(1);

#ifdef MESHSIM_HAVE_CURAND
// The same number of words from curandGenerate on the host generator (Philox).
void BM_rng_curand_host_words(benchmark::State& state) {
  std::vector<unsigned int> out(kWords);
  curandGenerator_t gen;
  if (curandCreateGeneratorHost(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10) != CURAND_STATUS_SUCCESS) {
    state.SkipWithError("curandCreateGeneratorHost failed");
    return;
  }
  curandSetPseudoRandomGeneratorSeed(gen, 42);
  for (auto _ : state) {
    curandGenerate(gen, out.data(), out.size());
    benchmark::DoNotOptimize(out.data());
  }
  curandDestroyGenerator(gen);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kWords));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kWords * 4));
}
BENCHMARK(BM_rng_curand_host_words);
#endif

// Pre- and post-op offsets of one DTensor random op (what every rank computes per op) on a 1-D
// (8,) [S0], 2-D (4, 8) [S0, S1] and 3-D (2, 4, 8) [S1, R, S0] mesh, for a 4096 x 4096 tensor,
// cycling through the ranks. Target: <= 50 ns per op.
void BM_rng_dtensor_offsets(benchmark::State& state) {
  using meshsim::Placement;
  const auto ndim = static_cast<size_t>(state.range(0));
  const std::vector<int64_t> shape{4096, 4096};
  std::vector<int64_t> mesh;
  std::vector<Placement> placements;
  if (ndim == 1) {
    mesh = {8};
    placements = {meshsim::Shard{0}};
  } else if (ndim == 2) {
    mesh = {4, 8};
    placements = {meshsim::Shard{0}, meshsim::Shard{1}};
  } else {
    mesh = {2, 4, 8};
    placements = {meshsim::Shard{1}, meshsim::Replicate{}, meshsim::Shard{0}};
  }
  std::vector<int64_t> coordinate(ndim, 0);
  int64_t checksum = 0;
  for (auto _ : state) {
    const meshsim::DTensorRngOffsets o =
        meshsim::dtensor_rng_offsets(shape, mesh, coordinate, placements);
    checksum += o.pre_op_increment + o.post_op_increment;
    // The next rank, row-major.
    for (size_t d = ndim; d-- > 0;) {
      if (++coordinate[d] < mesh[d]) break;
      coordinate[d] = 0;
    }
  }
  benchmark::DoNotOptimize(checksum);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_rng_dtensor_offsets)->Arg(1)->Arg(2)->Arg(3);

// Predicting torch.rand(2^24) in float32 on an H200, as `meshsim rng predict` does, including
// the 64 MiB output tensor (its first-touch page faults are a large part of the time on this
// VM). Target: >= 1 G elements per second on one core.
void BM_rng_predict_rand_float32(benchmark::State& state) {
  const int64_t n = int64_t{1} << 24;
  const meshsim::GpuProfile h200 = *meshsim::find_gpu("H200");
  meshsim::PhiloxState generator{1234, 0};
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        meshsim::predict_uniform(generator, n, meshsim::DType::kFloat32, h200));
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_rng_predict_rand_float32)->Unit(benchmark::kMillisecond);

// The same prediction into a buffer that is kept (no allocation, no page faults): the kernel
// model's own speed; 0: element by element, 1: AVX2, 2: AVX-512 (where the CPU has them).
void BM_rng_predict_rand_float32_into(benchmark::State& state) {
  const auto path = static_cast<meshsim::PhiloxPath>(state.range(0));
  if (path != meshsim::PhiloxPath::kScalar &&
      static_cast<int>(meshsim::best_philox_path()) < static_cast<int>(path)) {
    state.SkipWithError("this CPU lacks the instructions");
    return;
  }
  state.SetLabel(std::string(meshsim::philox_path_name(path)));
  const meshsim::GpuProfile h200 = *meshsim::find_gpu("H200");
  std::vector<float> out(size_t{1} << 24);
  meshsim::PhiloxState generator{1234, 0};
  for (auto _ : state) {
    meshsim::predict_rand_float32(generator, h200, out, path);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * out.size()));
}
BENCHMARK(BM_rng_predict_rand_float32_into)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
