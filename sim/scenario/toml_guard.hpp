// A pre-check of scenario text that keeps toml++ 3.3 (Debian 12's) away from undefined behaviour.
// Its whitespace lookup hits __builtin_unreachable() for three ranges of non-ASCII code points
// (upstream issues 190 and 295, fixed upstream by pull request 305), and the parser asks that
// lookup about characters outside strings and comments and about the characters after a backslash
// in a multi-line basic string. This scanner follows the same lexical states and refuses such
// input with its location before toml++ reads a byte.
#pragma once

#include <string>
#include <string_view>

namespace meshsim::sim {

// Whether toml++ 3.3's is_non_ascii_horizontal_whitespace() is defined for `c`.
bool toml_whitespace_lookup_defined(char32_t c);

// Throws InputError at file:line:col for a non-ASCII character outside strings and comments (TOML
// allows none there), and for a code point the lookup is undefined for where toml++ would look
// it up inside a multi-line basic string.
void check_toml_text(std::string_view text, const std::string& file);

}  // namespace meshsim::sim
