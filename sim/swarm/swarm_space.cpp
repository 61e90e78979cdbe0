#include "sim/swarm/swarm_space.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>

#include <fmt/format.h>

#include "src/fnv1a.hpp"

namespace meshsim::sim {

namespace {

constexpr uint64_t kMaxCount = uint64_t{1} << 63;

// a * b, or nullopt past kMaxCount.
std::optional<uint64_t> bounded_product(uint64_t a, uint64_t b) {
  if (a != 0 && b > kMaxCount / a) return std::nullopt;
  return a * b;
}

// The shell quotes a path needs in a command line a person copies.
std::string shell_word(const std::string& text) {
  const bool plain = !text.empty() && text.find_first_not_of(
                                          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "0123456789_-./+=:,@%") == std::string::npos;
  if (plain) return text;
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

std::optional<uint64_t> SeedList::count() const {
  uint64_t n = with_none ? 1 : 0;
  for (const auto& [first, last] : ranges) {
    const uint64_t width = last - first;  // + 1 below, once it is known to fit
    if (width >= kMaxCount || n > kMaxCount - width - 1) return std::nullopt;
    n += width + 1;
  }
  return n;
}

std::optional<uint64_t> SeedList::at(uint64_t index) const {
  if (with_none) {
    if (index == 0) return std::nullopt;
    --index;
  }
  for (const auto& [first, last] : ranges) {
    if (index <= last - first) return first + index;
    index -= last - first + 1;
  }
  return std::nullopt;  // past the end: callers keep index < count()
}

std::string SeedList::text() const {
  std::string out = with_none ? "none" : "";
  for (const auto& [first, last] : ranges) {
    if (!out.empty()) out += ',';
    out += first == last ? std::to_string(first) : fmt::format("{}-{}", first, last);
  }
  return out;
}

std::optional<uint64_t> SwarmSpace::size() const {
  const std::optional<uint64_t> schedules = schedule_seeds.count();
  const std::optional<uint64_t> faults = fault_seeds.count();
  if (!schedules || !faults) return std::nullopt;
  const std::optional<uint64_t> per_file = bounded_product(*schedules, *faults);
  if (!per_file) return std::nullopt;
  return bounded_product(*per_file, files.size());
}

Combination SwarmSpace::at(uint64_t index) const {
  const uint64_t schedules = *schedule_seeds.count();
  const uint64_t per_file = schedules * *fault_seeds.count();
  Combination c;
  c.index = index;
  c.file = static_cast<size_t>(index / per_file);
  const uint64_t within = index % per_file;
  c.faults_seed = fault_seeds.at(within / schedules);
  c.schedule_seed = *schedule_seeds.at(within % schedules);
  return c;
}

std::pair<uint64_t, uint64_t> SwarmSpace::file_range(size_t file) const {
  const uint64_t per_file = *schedule_seeds.count() * *fault_seeds.count();
  return {file * per_file, (file + 1) * per_file};
}

std::string SwarmSpace::replay_line(const Combination& c) const {
  std::string line = fmt::format("meshsim run {} --schedule random --seed {}",
                                 shell_word(files.at(c.file).path), c.schedule_seed);
  if (c.faults_seed) line += fmt::format(" --faults-seed {}", *c.faults_seed);
  if (!run_flags.empty()) line += " " + run_flags;
  return line;
}

std::string parse_seed_list(std::string_view text, bool allow_none, SeedList& out) {
  constexpr size_t kMaxItems = 1000;
  const std::string expected = fmt::format("expected seeds such as 0-99 or 1,5,9-12{}",
                                           allow_none ? " (none: a run without)" : "");
  SeedList list;
  size_t items = 0;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view item = text.substr(at, comma - at);
    at = comma + 1;
    if (++items > kMaxItems) return fmt::format("{}: more than {} items", expected, kMaxItems);
    if (item == "none" && allow_none) {
      if (list.with_none) return "none is listed twice";
      list.with_none = true;
      continue;
    }
    const size_t dash = item.find('-');
    const std::string_view first_text = item.substr(0, dash);
    const std::string_view last_text =
        dash == std::string_view::npos ? first_text : item.substr(dash + 1);
    uint64_t first = 0, last = 0;
    const auto number = [](std::string_view digits, uint64_t& value) {
      if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos)
        return false;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      return ec == std::errc() && end == digits.data() + digits.size();
    };
    if (!number(first_text, first) || !number(last_text, last)) {
      return fmt::format("{} (each seed 0 to 2^64-1), got \"{}\"", expected,
                         item.substr(0, std::min<size_t>(item.size(), 40)));
    }
    if (last < first) return fmt::format("the range {} runs backwards", item);
    list.ranges.emplace_back(first, last);
  }
  if (list.ranges.empty() && !list.with_none) return expected + ", got nothing";
  std::sort(list.ranges.begin(), list.ranges.end());
  // Ranges that touch are joined: "0-4,5-9" and "0-9" are one swarm.
  std::vector<std::pair<uint64_t, uint64_t>> joined;
  for (const auto& range : list.ranges) {
    if (!joined.empty() && range.first <= joined.back().second)
      return fmt::format("seed {} is listed twice", range.first);
    if (!joined.empty() && range.first == joined.back().second + 1) {
      joined.back().second = range.second;
    } else {
      joined.push_back(range);
    }
  }
  list.ranges = std::move(joined);
  if (!list.count()) return "more than 2^63 seeds";
  out = std::move(list);
  return "";
}

std::optional<uint64_t> file_digest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  uint64_t h = kFnv1aOffset;
  char buffer[1 << 16];
  while (in) {
    in.read(buffer, sizeof buffer);
    h = fnv1a(h, std::string_view(buffer, static_cast<size_t>(in.gcount())));
  }
  if (in.bad()) return std::nullopt;
  return h;
}

}  // namespace meshsim::sim
