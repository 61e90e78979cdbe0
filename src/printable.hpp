// Text taken from a file, made safe to put in a message: printable ASCII as it is, any other byte
// as \xNN, cut after `max` bytes with "...", so a hostile or damaged file never puts raw bytes
// (invalid UTF-8, control characters) into a report.
#pragma once

#include <fmt/format.h>

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

}  // namespace meshsim
