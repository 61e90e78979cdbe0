#include "sim/cli/cli_numbers.hpp"

#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "sim/scenario/excerpt.hpp"

namespace meshsim::sim {

std::string parse_unsigned(std::string_view text, uint64_t min, uint64_t max, uint64_t& out) {
  const std::string expected = fmt::format("expected an integer from {} to {}", min, max);
  if (text.empty()) return expected + ", got nothing";
  uint64_t v = 0;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      return fmt::format("{}, got \"{}\"", expected, excerpt(text));
    }
    const auto digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) {
      return fmt::format("{}, got \"{}\"", expected, excerpt(text));
    }
    v = v * 10 + digit;
  }
  if (v < min || v > max) return fmt::format("{}, got {}", expected, v);
  out = v;
  return "";
}

namespace {

// The decimal number `text` starts with ("1.5" of "1.5s") into `value`, and what follows it into
// `unit`. Returns "" or the error for the message, `bad` saying what was expected.
std::string leading_number(std::string_view text, const std::string& bad, double& value,
                           std::string& unit) {
  size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
    ++digits;
  }
  const std::string number(text.substr(0, digits));
  unit = std::string(text.substr(digits));
  if (number.empty() || number.front() == '.' || number.back() == '.' ||
      number.find('.') != number.rfind('.')) {
    return bad;
  }
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || end != number.data() + number.size() || !std::isfinite(value)) {
    return fmt::format("{}: the number is out of range", bad);
  }
  return "";
}

}  // namespace

std::string parse_duration(std::string_view text, double& seconds) {
  const std::string bad = fmt::format(
      "expected a duration such as 90, 90s, 1.5s, 500ms, 10m or 2h, got \"{}\"", excerpt(text));
  double value = 0;
  std::string unit;
  if (std::string error = leading_number(text, bad, value, unit); !error.empty()) return error;
  const double scale = unit.empty() || unit == "s" ? 1
                       : unit == "ms"              ? 1e-3
                       : unit == "m"               ? 60
                       : unit == "h"               ? 3600
                                                   : -1;
  if (scale < 0) return bad;
  seconds = value * scale;
  constexpr double kWeek = 7 * 24 * 3600.0;
  if (seconds <= 0 || seconds > kWeek) return fmt::format("{}: it must be in (0 s, 1 week]", bad);
  return "";
}

std::string parse_byte_size(std::string_view text, uint64_t physical_bytes, uint64_t& out) {
  const std::string bad = fmt::format(
      "expected a size such as 8G, 512M, 12884901888 or 50% (of this machine's memory), got "
      "\"{}\"",
      excerpt(text));
  double value = 0;
  std::string unit;
  if (std::string error = leading_number(text, bad, value, unit); !error.empty()) return error;
  double scale = 1;
  if (unit == "%") {
    if (physical_bytes == 0) return "cannot tell this machine's memory; give a size such as 8G";
    if (value <= 0 || value > 100) return fmt::format("{}: a share must be in (0, 100]%", bad);
    scale = static_cast<double>(physical_bytes) / 100;
  } else {
    if (unit.size() == 3 && unit.substr(1) == "iB") unit = unit.substr(0, 1);
    if (unit.size() == 2 && unit[1] == 'B') unit = unit.substr(0, 1);
    const std::string_view units = "KMGTP";
    if (unit.empty() || unit == "B") {
      scale = 1;
    } else if (unit.size() == 1 &&
               units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0])))) !=
                   std::string::npos) {
      const size_t power =
          units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0])))) + 1;
      scale = std::ldexp(1.0, static_cast<int>(10 * power));
    } else {
      return bad;
    }
  }
  const double bytes = std::floor(value * scale);
  if (!(bytes >= 1)) return fmt::format("{}: the budget must be at least 1 byte", bad);
  if (bytes >= 18446744073709551616.0) return fmt::format("{}: too large", bad);
  out = static_cast<uint64_t>(bytes);
  return "";
}

std::string parse_sizes(std::string_view text, uint64_t max, std::vector<int64_t>& out) {
  out.clear();
  size_t start = 0;
  while (start < text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    uint64_t v = 0;
    const std::string error = parse_unsigned(text.substr(start, comma - start), 0, max, v);
    if (!error.empty()) return error;
    out.push_back(static_cast<int64_t>(v));
    start = comma + 1;
  }
  return "";
}

}  // namespace meshsim::sim
