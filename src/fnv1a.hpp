// FNV-1a, 64-bit: the one fast hash meshsim uses within a process (interning, mesh hashes, the
// schedule digest the JSON report prints, fuzz mutation seeds). Changing it changes that digest.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace meshsim {

inline constexpr uint64_t kFnv1aOffset = 0xcbf29ce484222325ULL;
inline constexpr uint64_t kFnv1aPrime = 0x100000001b3ULL;

// `h` extended by each byte of `bytes`.
constexpr uint64_t fnv1a(uint64_t h, std::string_view bytes) {
  for (const char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * kFnv1aPrime;
  return h;
}

// Whole 64-bit words, a step per word, after the length: faster than bytes for rank lists, whose
// hashes only need to tell lists apart within one run.
constexpr uint64_t fnv1a_words(std::span<const int64_t> words) {
  uint64_t h = kFnv1aOffset ^ words.size();
  for (const int64_t w : words) h = (h ^ static_cast<uint64_t>(w)) * kFnv1aPrime;
  return h;
}

}  // namespace meshsim
