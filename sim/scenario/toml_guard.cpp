#include "sim/scenario/toml_guard.hpp"

#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "sim/base/source_location.hpp"

namespace meshsim::sim {

bool toml_whitespace_lookup_defined(char32_t c) {
  // Found by evaluating the lookup for every code point under UBSan (tests/sim/toml_guard_test.cpp
  // repeats that check in the sanitizer build).
  const bool undefined = (c >= 0xA1 && c <= 0x499) || (c >= 0x2C5E && c <= 0x3057 && c != 0x3000) ||
                         (c >= 0xFB26 && c <= 0xFEFE);
  return !undefined;
}

namespace {

bool is_ascii_space(char32_t c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

// Decodes UTF-8 leniently: only the prefix toml++ accepts matters (it stops at the first invalid
// sequence), and on that prefix this agrees with its decoder.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // toml++ skips a byte-order mark
  }
  bool done() const { return pos_ >= text_.size(); }
  // The next byte without consuming it ('\0' at the end).
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  bool starts_with(std::string_view s) const { return text_.substr(pos_, s.size()) == s; }
  // The next code point, advancing past it; columns count code points, as toml++'s do.
  char32_t next() {
    const auto lead = static_cast<unsigned char>(text_[pos_++]);
    int extra = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
    char32_t c = lead >= 0x80 ? static_cast<char32_t>(lead & (0x3F >> extra)) : lead;
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

// Follows TOML's lexical states closely enough to know, for every character, whether toml++ may
// ask its whitespace lookup about it: everywhere outside strings and comments (keys, bare values
// and the ~127 characters it scans ahead of a number or date, quotes included), and after a
// backslash in a multi-line basic string.
class Scanner {
 public:
  Scanner(std::string_view text, const std::string& file) : r_(text), file_(file) {}

  void run() {
    while (!r_.done()) {
      if (r_.peek() == '#') {
        skip_comment();
        continue;
      }
      const char b = r_.peek();
      if (b == '\n') {
        r_.next();
        if (nesting_.empty()) expect_ = Expect::kKey;  // a new line starts a key or a header
        continue;
      }
      if (b == ' ' || b == '\t' || b == '\r') {
        r_.next();
        continue;
      }
      if (b == '"' || b == '\'') {
        // A quote opens a string only where a key or a value begins; after a value it is an
        // error for toml++, which stops there, so scanning it as bare text is the safe reading.
        if (expect_ == Expect::kAfterValue) {
          bare_text();
        } else {
          string();
          if (expect_ == Expect::kValue) expect_ = Expect::kAfterValue;
        }
        continue;
      }
      structural_or_bare();
    }
  }

 private:
  enum class Expect { kKey, kValue, kAfterValue };

  [[noreturn]] void refuse(char32_t c, const char* where) const {
    throw InputError(
        {file_, r_.at().first, r_.at().second},
        fmt::format("character U+{:04X} is not allowed {}", static_cast<uint32_t>(c), where));
  }
  // Consumes one code point outside strings and comments: toml++ may look it up.
  char32_t outside() {
    const char32_t c = r_.next();
    if (c >= 0x80) refuse(c, "outside a string or a comment");
    return c;
  }

  void skip_comment() {
    while (!r_.done() && r_.peek() != '\n') r_.next();
  }

  void structural_or_bare() {
    const char b = r_.peek();
    switch (expect_) {
      case Expect::kKey:
        if (b == '[' && nesting_.empty()) {
          outside();  // a table header: [name] or [[name]], keys until the closing bracket
          if (r_.peek() == '[') outside();
          header_ = true;
        } else if (b == ']' && header_) {
          outside();
          if (r_.peek() == ']') outside();
          header_ = false;
          expect_ = Expect::kAfterValue;
        } else if (b == '=') {
          outside();
          expect_ = Expect::kValue;
        } else if (b == '}' && !nesting_.empty() && nesting_.back() == '{') {
          outside();
          close();
        } else {
          outside();  // bare key characters, '.', or something toml++ refuses
        }
        return;
      case Expect::kValue:
        if (b == '[' || b == '{') {
          outside();
          nesting_.push_back(b);
          expect_ = b == '[' ? Expect::kValue : Expect::kKey;
        } else if (b == ']') {
          outside();
          close();
        } else {
          bare_text();
        }
        return;
      case Expect::kAfterValue:
        if (b == ',') {
          outside();
          expect_ = !nesting_.empty() && nesting_.back() == '{' ? Expect::kKey : Expect::kValue;
        } else if (b == ']' || b == '}') {
          outside();
          close();
        } else {
          bare_text();
        }
        return;
    }
  }
  void close() {
    if (!nesting_.empty()) nesting_.pop_back();
    expect_ = Expect::kAfterValue;
  }

  // A number, date, boolean, inf or nan (or junk): toml++ reads ahead to a value terminator, and
  // quotes do not open strings here.
  void bare_text() {
    while (!r_.done()) {
      const char b = r_.peek();
      if (b == ' ' || b == '\t' || b == '\r' || b == '\n' || b == ',' || b == ']' || b == '}' ||
          b == '#') {
        break;
      }
      outside();
    }
    expect_ = Expect::kAfterValue;
  }

  void string() {
    const char quote = r_.peek();
    const std::string_view triple = quote == '"' ? "\"\"\"" : "'''";
    if (r_.starts_with(triple)) return multi_line_string(quote, triple);
    r_.next();
    // A single-line string: no lookups inside; it ends at its quote or (an error) at the line.
    while (!r_.done() && r_.peek() != '\n') {
      const char32_t d = r_.next();
      if (d == static_cast<char32_t>(quote)) return;
      if (quote == '"' && d == '\\' && !r_.done() && r_.peek() != '\n') r_.next();
    }
  }

  void multi_line_string(char quote, std::string_view triple) {
    r_.skip(3);
    while (!r_.done() && !r_.starts_with(triple)) {
      const char32_t c = r_.next();
      if (quote != '"' || c != '\\' || r_.done()) continue;
      const auto b = static_cast<unsigned char>(r_.peek());
      if (b < 0x80 && !is_ascii_space(b)) {
        r_.next();  // an escape such as \n, \" or \\: its character is plain text
        continue;
      }
      // toml++ asks whether the character after the backslash is whitespace, and after a line
      // continuation keeps asking until a character that is not. Check every code point up to
      // the first ASCII character that is not whitespace.
      while (!r_.done()) {
        const auto d = static_cast<unsigned char>(r_.peek());
        if (d < 0x80 && !is_ascii_space(d)) break;
        const char32_t e = r_.next();
        if (!toml_whitespace_lookup_defined(e)) {
          refuse(e, "after a backslash in a multi-line string (toml++ 3.3 bug)");
        }
      }
    }
    // The closing quotes, plus the one or two extra quotes TOML lets the string end with.
    size_t n = 0;
    while (r_.peek(n) == quote) ++n;
    r_.skip(n);
  }

  Reader r_;
  const std::string& file_;
  Expect expect_ = Expect::kKey;
  bool header_ = false;
  std::vector<char> nesting_;  // '[' arrays and '{' inline tables being read
};

}  // namespace

void check_toml_text(std::string_view text, const std::string& file) {
  Scanner(text, file).run();
}

}  // namespace meshsim::sim
