// One rank's Flight Recorder dump written as PyTorch 2.15 writes it: the pickle of _dump_fr_trace
// (what a timed-out job leaves, stack frames included) or the JSON of _dump_fr_trace_json (no
// frames; pg_status counters as text; times never seen as 0). read_fr_dump reads both back to
// the same FrDump, frames aside; torch's analyzer (torchfrtrace) reads the pickle. See
// docs/flight-recorder.md.
#pragma once

#include <string>

#include "src/io/fr_dump.hpp"

namespace meshsim {

std::string fr_dump_pickle(const FrDump& dump);
std::string fr_dump_json(const FrDump& dump);

}  // namespace meshsim
