// The toml++ 3.3 guard, tested against toml++ itself compiled into this test (header-only mode), so
// that in the sanitizer build UBSan instruments the parser: any input the guard lets through must
// parse (or fail to parse) without reaching undefined behaviour.
#include "sim/toml_guard.hpp"

#include <catch2/catch.hpp>

#include <string>

#include <toml++/toml.h>

#include "sim/source_location.hpp"

using meshsim::sim::check_toml_text;
using meshsim::sim::InputError;
using meshsim::sim::toml_whitespace_lookup_defined;

namespace {

std::string utf8(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

bool guard_accepts(const std::string& text) {
  try {
    check_toml_text(text, "t.toml");
    return true;
  } catch (const InputError&) {
    return false;
  }
}

// Parses with the instrumented toml++; what it says does not matter, only that it gets there.
void parse(const std::string& text) {
#if TOML_EXCEPTIONS
  try {
    (void)toml::parse(std::string_view(text), std::string_view("t.toml"));
  } catch (const toml::parse_error&) {
  }
#else
  (void)toml::parse(std::string_view(text), std::string_view("t.toml"));
#endif
}

}  // namespace

TEST_CASE("toml guard: the lookup is called only where it is defined", "[sim][toml]") {
  // In the UBSan build this would stop the test at the first undefined code point.
  int64_t whitespace = 0;
  int64_t undefined = 0;
  for (char32_t c = 0; c < 0x110000; ++c) {
    if (toml_whitespace_lookup_defined(c)) {
      whitespace += toml::impl::is_non_ascii_horizontal_whitespace(c) ? 1 : 0;
    } else {
      ++undefined;
    }
  }
  CHECK(whitespace == 20);  // U+00A0, U+1680, U+180E, U+2000..U+200B, U+202F, ... U+FEFF
  CHECK(undefined == 1017 + 1017 + 985);
  CHECK_FALSE(toml_whitespace_lookup_defined(U'\u00A7'));  // the reproducer of upstream issue 190
  CHECK(toml_whitespace_lookup_defined(U'\u00A0'));
  CHECK(toml_whitespace_lookup_defined(U'\u3000'));
}

TEST_CASE("toml guard: reproducers are refused with their location", "[sim][toml]") {
  // Upstream issue 190: a line-ending backslash, then U+00A7 on the next line.
  try {
    check_toml_text("[scenario]\ns = \"\"\"\\\n\u00a7\"\"\"\n", "x.toml");
    FAIL("the issue-190 reproducer was accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) ==
          "x.toml:3:1: character U+00A7 is not allowed after a backslash in a multi-line string "
          "(toml++ 3.3 bug)");
  }
  try {
    check_toml_text("a = 1\nb = 2\u00e9\n", "y.toml");
    FAIL("a non-ASCII character outside strings was accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) ==
          "y.toml:2:6: character U+00E9 is not allowed outside a string "
          "or a comment");
  }
  // Non-ASCII text where TOML allows it stays allowed.
  CHECK(guard_accepts("# caf\u00e9\ndescription = \"caf\u00e9 \u00a7\"\nx = 'na\u00efve'\n"));
  CHECK(guard_accepts("s = \"\"\"\nline one \u00e9\nline \\\\ two \\\"\u00e9\\\" \"\"\"\n"));
  CHECK(guard_accepts("s = \"\"\"\\\n   \u20ac\"\"\"\n"));  // U+20AC: the lookup is defined
  CHECK(guard_accepts("s = '''\\\n\u00a7'''\n"));           // literal strings have no escapes
}

TEST_CASE("toml guard: every BMP code point in every context parses without undefined behaviour",
          "[sim][toml][slow]") {
  const std::string contexts[][2] = {
      {"a = ", "\n"},                  // a value
      {"", " = 1\n"},                  // a bare key
      {"a = [1, ", "]\n"},             // an array element
      {"a = 1", "\n"},                 // after a value
      {"a = \"\"\"\\", "\"\"\"\n"},    // right after a backslash
      {"a = \"\"\"\\\n", "\"\"\"\n"},  // after a line continuation
      {"a = \"\"\"x\\  \n\n  ", "y\"\"\"\n"},
      {"a = \"", "\"\n"},  // inside strings and comments
      {"a = '", "'\n"},
      {"# ", "\na = 1\n"},
      {"[", "]\n"},
  };
  int64_t parsed = 0;
  int64_t refused = 0;
  for (char32_t c = 0x80; c < 0x10000; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;  // not encodable
    for (const auto& [before, after] : contexts) {
      const std::string text = before + utf8(c) + after;
      if (guard_accepts(text)) {
        parse(text);
        ++parsed;
      } else {
        ++refused;
      }
    }
  }
  CHECK(parsed > 370000);  // 6 of the 11 contexts allow non-ASCII text
  CHECK(refused > 320000);
}
