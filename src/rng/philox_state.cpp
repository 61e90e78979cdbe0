#include "src/rng/philox_state.hpp"

#include <charconv>

#include <fmt/format.h>

#include "src/error.hpp"

namespace meshsim {

PhiloxState PhiloxState::from_seed_text(const std::string& seed) {
  const char* begin = seed.data();
  const char* end = seed.data() + seed.size();
  PhiloxState out;
  if (!seed.empty() && seed[0] == '-') {
    int64_t value = 0;
    const auto [stop, ec] = std::from_chars(begin, end, value);
    if (ec == std::errc() && stop == end) {
      out.seed = static_cast<uint64_t>(value);  // two's complement, as PyTorch takes it
      return out;
    }
  } else {
    uint64_t value = 0;
    const auto [stop, ec] = std::from_chars(begin, end, value);
    if (ec == std::errc() && stop == end) {
      out.seed = value;
      return out;
    }
  }
  throw runtime_error(fmt::format(
      "Overflow when unpacking long: a seed must be an integer in [-0x8000000000000000, "
      "0xffffffffffffffff], got \"{}\"",
      seed));
}

PhiloxState PhiloxState::from_bytes(std::span<const uint8_t> bytes) {
  if (bytes.size() != 16 && bytes.size() != 8) throw runtime_error("RNG state is wrong size");
  const auto word = [&](size_t at) {
    uint64_t v = 0;
    for (size_t i = 0; i < 8; ++i) v |= static_cast<uint64_t>(bytes[at + i]) << (8 * i);
    return v;
  };
  PhiloxState out;
  out.seed = word(0);
  if (bytes.size() == 16) {
    out.offset = word(8);
    if (static_cast<int64_t>(out.offset) < 0 || out.offset % 4 != 0) {
      throw runtime_error("offset must be a multiple of 4");
    }
  }
  return out;
}

std::vector<uint8_t> PhiloxState::to_bytes() const {
  std::vector<uint8_t> out(16);
  for (size_t i = 0; i < 8; ++i) {
    out[i] = static_cast<uint8_t>(seed >> (8 * i));
    out[8 + i] = static_cast<uint8_t>(offset >> (8 * i));
  }
  return out;
}

}  // namespace meshsim
