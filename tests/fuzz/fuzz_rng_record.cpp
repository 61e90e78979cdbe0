// libFuzzer target: the RNG state loader. Inputs that start with the envelope's magic are whole
// files; any other input is a payload (first byte: the archive format) sealed into a valid
// envelope, so that mutations reach Boost's archive parsers past the checksum. The loader may
// only refuse with a meshsim::Error (Boost's exceptions included, translated); what it accepts
// must be a valid state that saves back to an equal record.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "src/error.hpp"
#include "src/io/rng_record.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string sealed;
  if (!input.starts_with("MSIMCKPT") && !input.empty()) {
    const auto format = static_cast<meshsim::ArchiveFormat>(1 + static_cast<uint8_t>(input[0]) % 3);
    sealed = meshsim::seal_envelope(
        {meshsim::RecordKind::kRngState, format, meshsim::kRngRecordVersion, 0}, input.substr(1));
  }
  const std::string_view bytes = sealed.empty() ? input : std::string_view(sealed);
  try {
    const meshsim::RankRng::Snapshot s = meshsim::open_rng_state(bytes);
    if (s.default_generator.offset % 4 != 0 || s.tracker_state.offset % 4 != 0) __builtin_trap();
    const meshsim::OpenedEnvelope opened = meshsim::open_envelope(bytes);
    if (!(meshsim::open_rng_state(meshsim::seal_rng_state(s, opened.header.format)) == s))
      __builtin_trap();
  } catch (const meshsim::Error&) {
  }
  return 0;
}
