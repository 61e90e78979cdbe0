// Whole-world checkpoints: 1 GiB of float32 shards over 64 ranks (Shard(0) on a 1-d mesh, 16 MiB
// a rank), saved by every rank (binary archive, envelope, atomic write with fsync) and loaded
// back on the same layout, against a plain copy of the same bytes as the floor in the same run.
// The files go to $MESHSIM_BENCH_DIR, by default /dev/shm (tmpfs: the page cache alone, where
// fsync costs nothing, so the figure is meshsim's own cost rather than the disk's), or the
// system's temporary directory where there is no /dev/shm.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "src/comm/group_creator.hpp"
#include "src/io/checkpoint_plan.hpp"
#include "src/io/world_checkpoint.hpp"

namespace {

constexpr int64_t kRanks = 64;
constexpr int64_t kRowsPerRank = 4096;
constexpr int64_t kColumns = 1024;  // 4 KiB rows: 16 MiB a rank, 1 GiB in all
constexpr int64_t kBytes = kRanks * kRowsPerRank * kColumns * 4;

struct World {
  std::vector<meshsim::DTensor> shards;
  std::string dir;

  World() {
    const char* base = std::getenv("MESHSIM_BENCH_DIR");
    std::string root = base ? base : "/dev/shm";
    if (!base && !std::filesystem::is_directory(root))
      root = std::filesystem::temp_directory_path();
    dir = (std::filesystem::path(root) / "meshsim-checkpoint-bench").string();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const std::vector<int64_t> mesh_shape{kRanks};
    for (int64_t r = 0; r < kRanks; ++r) {
      meshsim::LocalGroupCreator groups(r, kRanks);
      meshsim::DTensorSpec spec{meshsim::DeviceMesh::init(groups, "cuda", mesh_shape),
                                {meshsim::Shard{0}},
                                {kRanks * kRowsPerRank, kColumns},
                                meshsim::DType::kFloat32};
      meshsim::DTensor t = meshsim::DTensor::zeros(spec);
      meshsim::Tensor local = t.local();
      auto bytes = local.mutable_bytes();
      for (size_t i = 0; i < bytes.size(); i += 64) bytes[i] = static_cast<std::byte>(i >> 6 ^ r);
      t.set_local(std::move(local));
      shards.push_back(std::move(t));
    }
  }
  ~World() { std::filesystem::remove_all(dir); }

  void save() const {
    std::vector<std::vector<meshsim::StateDictEntry>> state_dicts;
    for (const meshsim::DTensor& t : shards) state_dicts.push_back({{"w", nullptr, &t}});
    meshsim::save_world_checkpoint(dir, state_dicts, meshsim::ArchiveFormat::kBinary);
  }
};

World& world() {
  static World w;
  return w;
}

// The floor: copying every rank's shard once (the least a save or a load moves).
void BM_checkpoint_copy_floor(benchmark::State& state) {
  const World& w = world();
  std::vector<std::byte> out(static_cast<size_t>(kBytes / kRanks));
  for (auto _ : state) {
    for (const meshsim::DTensor& t : w.shards) {
      std::memcpy(out.data(), t.local().bytes().data(), out.size());
      benchmark::ClobberMemory();
    }
  }
  state.SetBytesProcessed(state.iterations() * kBytes);
}
BENCHMARK(BM_checkpoint_copy_floor)->Unit(benchmark::kMillisecond)->UseRealTime();

// Save then load of the whole world: bytes processed counts the 1 GiB once, so the rate is what
// "save plus load" achieves. What loads back is checked once, outside the timing.
void BM_checkpoint_save_load_1GiB_64_ranks(benchmark::State& state) {
  World& w = world();
  w.save();
  for (const meshsim::DTensor& t : w.shards) {
    if (!meshsim::load_world_tensor(w.dir, "w", t.spec().mesh, t.spec().placements)
             .local()
             .same_as(t.local()))
      state.SkipWithError("a shard did not load back");
  }
  for (auto _ : state) {
    w.save();
    for (const meshsim::DTensor& t : w.shards) {
      benchmark::DoNotOptimize(
          meshsim::load_world_tensor(w.dir, "w", t.spec().mesh, t.spec().placements));
    }
  }
  state.SetBytesProcessed(state.iterations() * kBytes);
}
BENCHMARK(BM_checkpoint_save_load_1GiB_64_ranks)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_checkpoint_save_1GiB_64_ranks(benchmark::State& state) {
  World& w = world();
  for (auto _ : state) w.save();
  state.SetBytesProcessed(state.iterations() * kBytes);
}
BENCHMARK(BM_checkpoint_save_1GiB_64_ranks)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_checkpoint_load_1GiB_64_ranks(benchmark::State& state) {
  World& w = world();
  w.save();
  for (auto _ : state) {
    for (int64_t r = 0; r < kRanks; ++r) {
      const meshsim::DTensor& t = w.shards[static_cast<size_t>(r)];
      benchmark::DoNotOptimize(
          meshsim::load_world_tensor(w.dir, "w", t.spec().mesh, t.spec().placements));
    }
  }
  state.SetBytesProcessed(state.iterations() * kBytes);
}
BENCHMARK(BM_checkpoint_load_1GiB_64_ranks)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
BENCHMARK_MAIN();
