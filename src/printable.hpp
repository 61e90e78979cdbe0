// Text taken from a file, made safe to put in a message: printable ASCII as it is, any other byte
// as \xNN, cut after `max` bytes with "...", so a hostile or damaged file never puts raw bytes
// (invalid UTF-8, control characters) into a report.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace meshsim {

inline std::string printable(std::string_view text, size_t max = 64) {
  std::string out;
  for (char c : text.substr(0, max)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) {
      out.push_back(c);
    } else {
      out += fmt::format("\\x{:02x}", byte);
    }
  }
  if (text.size() > max) out += "...";
  return out;
}

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF), as Python's decoder requires of a pickled string.
inline bool valid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<unsigned char>(text[i]);
    size_t extra = 0;
    uint32_t cp = 0;
    if (b < 0x80) {
      ++i;
      continue;
    }
    if ((b & 0xe0) == 0xc0) {
      extra = 1;
      cp = b & 0x1f;
    } else if ((b & 0xf0) == 0xe0) {
      extra = 2;
      cp = b & 0x0f;
    } else if ((b & 0xf8) == 0xf0) {
      extra = 3;
      cp = b & 0x07;
    } else {
      return false;
    }
    if (i + extra >= text.size()) return false;
    for (size_t k = 1; k <= extra; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      if ((c & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3f);
    }
    constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += extra + 1;
  }
  return true;
}

}  // namespace meshsim
