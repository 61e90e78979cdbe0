#include "sim/toml_guard.hpp"

#include <cstdint>

#include <fmt/format.h>

#include "sim/source_location.hpp"

namespace meshsim::sim {

bool toml_whitespace_lookup_defined(char32_t c) {
  // Found by evaluating the lookup for every code point under UBSan (tests/sim/toml_guard_test.cpp
  // repeats that check in the sanitizer build).
  const bool undefined = (c >= 0xA1 && c <= 0x499) || (c >= 0x2C5E && c <= 0x3057 && c != 0x3000) ||
                         (c >= 0xFB26 && c <= 0xFEFE);
  return !undefined;
}

namespace {

// Decodes UTF-8 leniently: only the prefix toml++ accepts matters (it stops at the first invalid
// sequence), and on that prefix this agrees with its decoder.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // toml++ skips a byte-order mark
  }
  bool done() const { return pos_ >= text_.size(); }
  char peek_byte(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  bool starts_with(std::string_view s) const { return text_.substr(pos_, s.size()) == s; }
  // The next code point, advancing past it; column counts code points, as toml++ does.
  char32_t next() {
    const auto lead = static_cast<unsigned char>(text_[pos_++]);
    char32_t c = lead;
    int extra = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
    if (lead >= 0x80) c = lead & (0x3F >> extra);
    for (; extra > 0 && pos_ < text_.size(); --extra) {
      const auto b = static_cast<unsigned char>(text_[pos_]);
      if ((b & 0xC0) != 0x80) break;
      c = (c << 6) | (b & 0x3F);
      ++pos_;
    }
    at_ = {line_, column_};
    if (c == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    return c;
  }
  void skip(size_t n) {
    for (size_t i = 0; i < n && !done(); ++i) next();
  }
  // Line and column of the code point next() returned last.
  std::pair<int64_t, int64_t> at() const { return at_; }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  int64_t line_ = 1;
  int64_t column_ = 1;
  std::pair<int64_t, int64_t> at_{1, 1};
};

[[noreturn]] void refuse(const Reader& r, const std::string& file, char32_t c, const char* where) {
  throw InputError(
      {file, r.at().first, r.at().second},
      fmt::format("character U+{:04X} is not allowed {}", static_cast<uint32_t>(c), where));
}

// Skips a closing delimiter of three quotes plus the one or two extra quotes TOML lets a
// multi-line string end with.
void skip_closing(Reader& r, char quote) {
  size_t n = 0;
  while (r.peek_byte(n) == quote) ++n;
  r.skip(n);
}

}  // namespace

void check_toml_text(std::string_view text, const std::string& file) {
  Reader r(text);
  while (!r.done()) {
    if (r.starts_with("\"\"\"") || r.starts_with("'''")) {
      const char quote = r.peek_byte();
      r.skip(3);
      const std::string_view close = quote == '"' ? "\"\"\"" : "'''";
      while (!r.done() && !r.starts_with(close)) {
        const char32_t c = r.next();
        if (quote != '"' || c != '\\' || r.done()) continue;
        const char b = r.peek_byte();
        if (static_cast<unsigned char>(b) < 0x80 && b != ' ' && b != '\t' && b != '\r' &&
            b != '\n') {
          r.next();  // an escape such as \n, \" or \\: its character is plain text
          continue;
        }
        // toml++ asks whether the character after the backslash is whitespace, and after a line
        // continuation keeps asking until a character that is not. Check every code point up to
        // the first ASCII character that is not whitespace.
        while (!r.done()) {
          const char d = r.peek_byte();
          if (static_cast<unsigned char>(d) < 0x80 && d != ' ' && d != '\t' && d != '\r' &&
              d != '\n') {
            break;
          }
          const char32_t e = r.next();
          if (!toml_whitespace_lookup_defined(e)) {
            refuse(r, file, e, "after a backslash in a multi-line string (toml++ 3.3 bug)");
          }
        }
      }
      skip_closing(r, quote);
      continue;
    }
    const char32_t c = r.next();
    if (c == '#') {
      while (!r.done() && r.peek_byte() != '\n') r.next();
    } else if (c == '"' || c == '\'') {
      // A single-line string: no whitespace lookups inside; it ends at its quote or the line.
      while (!r.done() && r.peek_byte() != '\n') {
        const char32_t d = r.next();
        if (d == static_cast<char32_t>(c)) break;
        if (c == '"' && d == '\\' && !r.done() && r.peek_byte() != '\n') r.next();
      }
    } else if (c >= 0x80) {
      refuse(r, file, c, "outside a string or a comment");
    }
  }
}

}  // namespace meshsim::sim
