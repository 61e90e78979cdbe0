// Quoting user text in messages without repeating all of it: a 20 KB expression or a 400-digit
// flag value is shown by its ends.
#pragma once

#include <string>
#include <string_view>

namespace meshsim::sim {

// `text` for a message: at most about `limit` bytes, the middle elided with "...". Cuts fall
// between UTF-8 code points, so the excerpt is as valid as the text.
inline std::string excerpt(std::string_view text, size_t limit = 80) {
  if (text.size() <= limit) return std::string(text);
  auto continuation = [&](size_t i) {
    return i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80;
  };
  size_t head = (limit - 3) / 2;
  while (head > 0 && continuation(head)) --head;
  size_t tail = text.size() - (limit - 3) / 2;
  while (tail < text.size() && continuation(tail)) ++tail;
  return std::string(text.substr(0, head)) + "..." + std::string(text.substr(tail));
}

}  // namespace meshsim::sim
