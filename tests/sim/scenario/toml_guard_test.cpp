// The toml++ 3.3 guard, tested against toml++ itself, which meshsim compiles with the project's
// flags (sim/scenario/toml_implementation.cpp): in the sanitizer build UBSan instruments the
// parser, so any input the guard lets through must parse (or fail to parse) without reaching
// undefined behaviour.
#include "sim/scenario/toml_guard.hpp"

#include <catch2/catch.hpp>

#include <string>

#include <toml++/toml.h>

#include "sim/base/source_location.hpp"

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
  try {
    (void)toml::parse(std::string_view(text), std::string_view("t.toml"));
  } catch (const toml::parse_error&) {
  }
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
  // A number or date is read ahead to its terminator, quotes included: no string starts there.
  for (const char* text :
       {"world_size = 1\"\u00a7\"\n", "a = 1'\u00e9'\n", "a = [1\"\u00e9\"]\n"}) {
    CHECK_FALSE(guard_accepts(text));
  }
  // Non-ASCII text where TOML allows it stays allowed.
  CHECK(guard_accepts("# caf\u00e9\ndescription = \"caf\u00e9 \u00a7\"\nx = 'na\u00efve'\n"));
  CHECK(guard_accepts("[t]\nname=\"caf\u00e9\"\nxs = [\"\u00e9\", 1, {k=\"\u00a7\"}] # \u00e9\n"));
  CHECK(guard_accepts("s = \"\"\"\nline one \u00e9\nline \\\\ two \\\"\u00e9\\\" \"\"\"\n"));
  CHECK(guard_accepts("s = \"\"\"\\\n   \u20ac\"\"\"\n"));  // U+20AC: the lookup is defined
  CHECK(guard_accepts("s = '''\\\n\u00a7'''\n"));           // literal strings have no escapes
}

TEST_CASE("toml guard: every BMP code point in every context parses without undefined behaviour",
          "[sim][toml][slow]") {
  const std::string contexts[][2] = {
      {"a = ", "\n"},            // a value
      {"", " = 1\n"},            // a bare key
      {"a = [1, ", "]\n"},       // an array element
      {"a = 1", "\n"},           // after a value
      {"a = true", "\n"},        // after a boolean
      {"a = 1979-05-27", "\n"},  // after a date
      {"a = 1\"", "\"\n"},       // a quote inside a number's look-ahead
      {"a = 1'", "'\n"},
      {"a = [1\"", "\"]\n"},
      {"a = 1 \"", "\"\n"},            // a quote after a value
      {"a = \"x\"", "\n"},             // after a string
      {"a = {b = 1", "}\n"},           // in an inline table
      {"a = \"\"\"\\", "\"\"\"\n"},    // right after a backslash
      {"a = \"\"\"\\\n", "\"\"\"\n"},  // after a line continuation
      {"a = \"\"\"x\\  \n\n  ", "y\"\"\"\n"},
      {"a = \"", "\"\n"},  // inside strings and comments: allowed
      {"a=\"", "\"\n"},
      {"a = '", "'\n"},
      {"a = {b=\"", "\"}\n"},
      {"a = [\"x\", \"", "\"]\n"},
      {"[t.\"", "\"]\n"},
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
  CHECK(parsed > 9 * 63000);    // strings, comments and continuations: 10 contexts
  CHECK(refused > 13 * 63000);  // the 13 contexts outside strings
}
