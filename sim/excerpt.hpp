// Quoting user text in messages without repeating all of it: a 20 KB expression or a 400-digit
// flag value is shown by its ends.
#pragma once

#include <string>
#include <string_view>

namespace meshsim::sim {

// `text` for a message: at most `limit` characters, the middle elided with "...".
inline std::string excerpt(std::string_view text, size_t limit = 80) {
  if (text.size() <= limit) return std::string(text);
  const size_t keep = (limit - 3) / 2;
  return std::string(text.substr(0, keep)) + "..." + std::string(text.substr(text.size() - keep));
}

}  // namespace meshsim::sim
