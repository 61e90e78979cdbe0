// Checkpoint I/O: sealing a payload in its envelope and verifying it on load (both hash the
// whole payload), against a plain copy of the same bytes as the floor in the same run.
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>

#include "src/io/envelope.hpp"

namespace {

constexpr size_t kPayload = size_t{64} << 20;

std::string payload() {
  std::string p(kPayload, '\0');
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<char>(i * 2654435761u >> 13);
  return p;
}

// The floor: one memcpy of the payload (what writing it into a buffer costs at least).
void BM_io_copy_floor(benchmark::State& state) {
  const std::string p = payload();
  std::string out(p.size(), '\0');
  for (auto _ : state) {
    std::memcpy(out.data(), p.data(), p.size());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * p.size()));
}
BENCHMARK(BM_io_copy_floor)->Unit(benchmark::kMillisecond)->UseRealTime();

// The floor of sealing: a fresh buffer of the payload's size, filled by one copy (sealing
// allocates the file's bytes the same way).
void BM_io_fresh_copy_floor(benchmark::State& state) {
  const std::string p = payload();
  for (auto _ : state) {
    std::string out(p);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * p.size()));
}
BENCHMARK(BM_io_fresh_copy_floor)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_io_seal_envelope(benchmark::State& state) {
  const std::string p = payload();
  for (auto _ : state) {
    std::string file = meshsim::seal_envelope(
        {meshsim::RecordKind::kShard, meshsim::ArchiveFormat::kBinary, 1, 0}, p);
    benchmark::DoNotOptimize(file.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * p.size()));
}
BENCHMARK(BM_io_seal_envelope)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_io_open_envelope(benchmark::State& state) {
  const std::string file = meshsim::seal_envelope(
      {meshsim::RecordKind::kShard, meshsim::ArchiveFormat::kBinary, 1, 0}, payload());
  for (auto _ : state) {
    const meshsim::OpenedEnvelope opened = meshsim::open_envelope(file);
    benchmark::DoNotOptimize(opened.payload.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kPayload));
}
BENCHMARK(BM_io_open_envelope)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
BENCHMARK_MAIN();
