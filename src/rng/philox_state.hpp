// A CUDA generator's state as PyTorch keeps it (docs/rng.md section 1): a seed and a Philox offset,
// 16 bytes when saved (seed uint64 little endian, then offset int64).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace meshsim {

struct PhiloxState {
  uint64_t seed = 0;
  uint64_t offset = 0;  // in 32-bit words; a multiple of 4 between kernels

  // manual_seed(seed): the offset starts again at 0. `seed` as Python gives it, in
  // [-2^63, 2^64 - 1]: negative seeds are taken in two's complement. Throws meshsim::Error
  // (RuntimeError) outside that range or for text that is not an integer.
  static PhiloxState from_seed_text(const std::string& seed);
  // set_rng_state(bytes): 16 bytes (seed, offset) or 8 (seed only, offset 0). Throws
  // meshsim::Error (RuntimeError) "RNG state is wrong size" for other sizes and "offset must be
  // a multiple of 4" for such offsets.
  static PhiloxState from_bytes(std::span<const uint8_t> bytes);
  std::vector<uint8_t> to_bytes() const;

  friend bool operator==(const PhiloxState&, const PhiloxState&) = default;
};

}  // namespace meshsim
