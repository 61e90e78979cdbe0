// Integer arithmetic that reports overflow instead of wrapping: every size, count and offset
// computed from user input goes through these.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace meshsim {

inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

inline std::optional<int64_t> checked_sub(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_sub_overflow(a, b, &out)) return std::nullopt;
  return out;
}

inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// ceil(a / b) for a >= 0, b > 0, without the overflow of (a + b - 1) / b.
inline int64_t ceil_div(int64_t a, int64_t b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

// Product of non-negative sizes; nullopt when it does not fit in int64. A zero anywhere makes the
// product zero even when the other sizes alone would overflow (as numel does in PyTorch).
inline std::optional<int64_t> checked_product(std::span<const int64_t> sizes) {
  for (int64_t s : sizes) {
    if (s == 0) return 0;
  }
  int64_t out = 1;
  for (int64_t s : sizes) {
    if (__builtin_mul_overflow(out, s, &out)) return std::nullopt;
  }
  return out;
}

}  // namespace meshsim
