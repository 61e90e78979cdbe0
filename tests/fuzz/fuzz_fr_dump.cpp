// libFuzzer target: any bytes as one rank's Flight Recorder dump (pickle or JSON): the pickle
// reader with nothing allowed, the tree conversion and the schema decoding; the writer (the dump
// written again in either encoding must read back the same); fr analyze's matching and reports
// on it, as the dump of ranks 0 and 1 of a job (its RNG records checked and the dump settled first
// when a recorder wrote it); and fr to-scenario's replay of it, which is loaded as a scenario (a
// refusal there is an error message too). A refusal must be a meshsim::Error; a crash, a hang or
// any other exception is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/report/fr_analysis.hpp"
#include "sim/report/fr_render.hpp"
#include "sim/report/fr_replay.hpp"
#include "sim/report/fr_rng.hpp"
#include "sim/report/fr_settle.hpp"
#include "sim/scenario/scenario_loader.hpp"
#include "sim/steps/builtin_steps.hpp"
#include "src/error.hpp"
#include "src/io/fr_dump.hpp"
#include "src/io/fr_dump_writer.hpp"
#include "src/tensor/memory_budget.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  meshsim::MemoryBudget::set_limit(uint64_t{256} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const meshsim::FrDump dump =
        meshsim::read_fr_dump(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    // Every entry came from the input: never more entries than bytes.
    if (dump.entries.size() > size) __builtin_trap();
    // What the writer makes of it reads back to the same record, in either encoding (JSON has
    // no frames).
    const meshsim::FrDump pickled = meshsim::read_fr_dump(meshsim::fr_dump_pickle(dump), "again");
    const meshsim::FrDump json = meshsim::read_fr_dump(meshsim::fr_dump_json(dump), "again");
    if (pickled.entries.size() != dump.entries.size() ||
        json.entries.size() != dump.entries.size() ||
        pickled.pg_config.size() != dump.pg_config.size())
      __builtin_trap();
    for (size_t i = 0; i < dump.entries.size(); ++i) {
      const meshsim::FrEntry& a = dump.entries[i];
      for (const meshsim::FrEntry* b : {&pickled.entries[i], &json.entries[i]}) {
        if (a.record_id != b->record_id || a.collective_seq_id != b->collective_seq_id ||
            a.input_sizes != b->input_sizes || a.output_sizes != b->output_sizes ||
            a.state != b->state || a.time_created_ns != b->time_created_ns)
          __builtin_trap();
      }
      if (a.frames.size() != pickled.entries[i].frames.size()) __builtin_trap();
    }
    std::vector<meshsim::sim::FrRankDump> job = {{0, "rank0", dump}, {1, "rank1", dump}};
    if (dump.recorded && dump.recorded->rng.size() > size) __builtin_trap();
    // A recorder's RNG records are replayed on the model of a GPU's generator.
    (void)meshsim::sim::fr_rng_text(
        meshsim::sim::check_recorded_rng(job, *meshsim::find_gpu("H200")));
    (void)meshsim::sim::settle_recorded_histories(job);  // a recorder's dumps are settled first
    const meshsim::sim::FrAnalysis analysis = meshsim::sim::analyze_fr_dumps(job);
    if (analysis.ranks.size() != static_cast<size_t>(analysis.world_size)) __builtin_trap();
    (void)meshsim::sim::fr_analysis_text(analysis);
    (void)meshsim::sim::fr_analysis_json(analysis).dump(-1, ' ', false,
                                                        nlohmann::json::error_handler_t::replace);
    (void)meshsim::sim::fr_analysis_dot(analysis);
    const std::string replay = meshsim::sim::fr_replay_scenario(job, analysis, {});
    // Loading checks every step on every rank: kept to worlds a fuzz input runs quickly.
    if (analysis.world_size <= 4096) {
      try {
        (void)meshsim::sim::load_scenario_text(replay, "replay.toml",
                                               meshsim::sim::builtin_steps());
      } catch (const meshsim::sim::InputError&) {  // a scenario error names its place
      }
    }
  } catch (const meshsim::Error&) {
  }
  return 0;
}
