// Checkpoint I/O: sealing a payload in its envelope and verifying it on load (both hash the
// whole payload), and reading a large record tree in each archive format (what a checkpoint's
// metadata over many ranks is), against a plain copy of the same bytes as the floor in the same
// run.
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>

#include "src/io/envelope.hpp"
#include "src/io/record_archive.hpp"

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

std::string fmt_name(int64_t t) {
  return "layers." + std::to_string(t) + ".weight";
}

// A checkpoint-metadata-like tree: 20,000 tensors, each an object of a name, a dtype, a shape and
// per-chunk offsets over 64 ranks (about 30 MiB of text).
meshsim::RecordObject metadata_like_tree() {
  meshsim::RecordObject root{"Metadata", {}};
  std::vector<meshsim::RecordObject> tensors;
  for (int64_t t = 0; t < 20000; ++t) {
    std::vector<int64_t> offsets;
    for (int64_t r = 0; r < 64; ++r) offsets.push_back(r * 4096 + t);
    tensors.push_back(
        meshsim::RecordObject{"Tensor", {}}
            .set("name", meshsim::RecordValue::of(fmt_name(t)))
            .set("dtype", meshsim::RecordValue::of(std::string("float32")))
            .set("shape", meshsim::RecordValue::of(std::vector<int64_t>{4096, 64 * 4096}))
            .set("offsets", meshsim::RecordValue::of(std::move(offsets))));
  }
  root.set("tensors", meshsim::RecordValue::of(std::move(tensors)));
  return root;
}

void BM_io_read_record(benchmark::State& state) {
  const auto format = static_cast<meshsim::ArchiveFormat>(state.range(0));
  const std::string payload = meshsim::write_record_payload(metadata_like_tree(), format);
  for (auto _ : state) {
    const meshsim::RecordObject tree = meshsim::read_record_payload(payload, format, "bench");
    benchmark::DoNotOptimize(tree.fields.data());
  }
  state.SetLabel(std::string(meshsim::archive_format_name(format)));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * payload.size()));
  state.counters["payload_MiB"] = static_cast<double>(payload.size()) / (1 << 20);
}
BENCHMARK(BM_io_read_record)
    ->Arg(static_cast<int>(meshsim::ArchiveFormat::kBinary))
    ->Arg(static_cast<int>(meshsim::ArchiveFormat::kText))
    ->Arg(static_cast<int>(meshsim::ArchiveFormat::kXml))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
BENCHMARK_MAIN();
