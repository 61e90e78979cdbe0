// Numbers on the command line, read strictly: "-1", "1e23" or "2^64" is an error naming the
// flag, never a wrapped or rounded value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace meshsim::sim {

// Decimal digits only, within [min, max]. Returns "" or the error for the message.
std::string parse_unsigned(std::string_view text, uint64_t min, uint64_t max, uint64_t& out);

// A byte count: "12884901888", "512M", "16G", "16GiB", "1.5T" (units are binary: K = 1024), or a
// share of the machine's memory, "50%". Returns "" or the error for the message.
std::string parse_byte_size(std::string_view text, uint64_t physical_bytes, uint64_t& out);

// A wall-clock duration: seconds ("90", "1.5s"), "500ms", "10m" or "2h", more than 0 and at most
// a week. Returns "" or the error for the message.
std::string parse_duration(std::string_view text, double& seconds);

// "8,4" as sizes, each at most `max`; "" is a 0-d shape. Returns "" or the error.
std::string parse_sizes(std::string_view text, uint64_t max, std::vector<int64_t>& out);

}  // namespace meshsim::sim
