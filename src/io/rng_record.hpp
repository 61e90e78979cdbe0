// A rank's random state as a checkpoint record: the default generator and DTensor's tracker,
// in a Boost.Serialization archive (binary, text or XML) inside the checkpoint envelope.
#pragma once

#include <string>
#include <string_view>

#include "src/io/envelope.hpp"
#include "src/rng/rank_rng.hpp"

namespace meshsim {

// The layout this meshsim writes; it reads every version up to this one.
inline constexpr uint32_t kRngRecordVersion = 1;

// The whole file's bytes.
std::string seal_rng_state(const RankRng::Snapshot& state, ArchiveFormat format);
// Opens the envelope (see open_envelope), then reads the record strictly: only an RNG state
// record of a version this meshsim knows, whose archive parses completely into valid states.
// Throws meshsim::Error (RuntimeError) naming what is wrong; nothing Boost throws escapes.
RankRng::Snapshot open_rng_state(std::string_view file);

// Atomic save and bounded load of a file holding one record; errors name the path.
void save_rng_state(const std::string& path, const RankRng::Snapshot& state, ArchiveFormat format);
RankRng::Snapshot load_rng_state(const std::string& path);

}  // namespace meshsim
