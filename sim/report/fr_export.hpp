// A simulated rank's flight recorder as the dump PyTorch 2.15's NCCL backend writes on a timeout
// (TORCH_FR_BUFFER_SIZE > 0): its process groups, and each kept call with c10d's sequence
// numbers, profiling name, tensor sizes and dtypes, state and the scenario line as its frame. See
// docs/flight-recorder.md.
#pragma once

#include <cstdint>
#include <string>

#include "sim/runtime/flight_recorder.hpp"
#include "src/comm/group_table.hpp"
#include "src/io/fr_dump.hpp"

namespace meshsim::sim {

// Virtual time 0 in the dumps' clock: 2026-01-01 00:00 UTC, in nanoseconds since the epoch, so
// that tools showing times show dates, and no call is made at 0 (which JSON dumps reserve for
// "never").
inline constexpr int64_t kFrDumpEpochNs = int64_t{1767225600} * 1'000'000'000;

// `scenario_file` names the frames' file.
FrDump rank_fr_dump(int64_t rank, const FlightRecorder& recorder, const GroupTable& groups,
                    const std::string& scenario_file);

}  // namespace meshsim::sim
