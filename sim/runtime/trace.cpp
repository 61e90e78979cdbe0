#include "sim/runtime/trace.hpp"

#include <cmath>
#include <cstdint>

namespace meshsim::sim {

namespace {
// Microseconds, as the format wants, rounded so the text does not depend on float printing.
// Virtual time can pass what int64 microseconds hold (a huge tensor over a tiny bandwidth): clamp.
int64_t micros(double seconds) {
  const double us = seconds * 1e6;
  if (!(us < 9.2e18)) return INT64_MAX;
  if (!(us > -9.2e18)) return INT64_MIN;
  return std::llround(us);
}
}  // namespace

void Trace::slice(int64_t rank, std::string name, std::string category, double start_s,
                  double end_s, nlohmann::json args) {
  slices_.push_back({rank, std::move(name), std::move(category), start_s, end_s, std::move(args)});
}

void Trace::collective(const std::vector<int64_t>& members, const std::string& name,
                       const std::vector<double>& arrived_s, double end_s, nlohmann::json args) {
  for (size_t i = 0; i < members.size(); ++i)
    slice(members[i], name, "collective", arrived_s[i], end_s, args);
  for (size_t i = 1; i < members.size(); ++i) {
    flows_.push_back({static_cast<int64_t>(flows_.size()) + 1, members[0], members[i], end_s});
  }
}

nlohmann::json Trace::events(int64_t pid, const std::string& process, int64_t world_size) const {
  nlohmann::json out = nlohmann::json::array();
  out.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", process}}}});
  for (int64_t r = 0; r < world_size; ++r) {
    out.push_back({{"name", "thread_name"},
                   {"ph", "M"},
                   {"pid", pid},
                   {"tid", r},
                   {"args", {{"name", "rank " + std::to_string(r)}}}});
  }
  for (const Slice& s : slices_) {
    out.push_back({{"name", s.name},
                   {"cat", s.category},
                   {"ph", "X"},
                   {"pid", pid},
                   {"tid", s.rank},
                   {"ts", micros(s.start_s)},
                   {"dur", micros(s.end_s) - micros(s.start_s)},
                   {"args", s.args}});
  }
  for (const Flow& f : flows_) {
    // Flow ends bind to the enclosing collective slices, which all end at `at_s`.
    const int64_t ts = micros(f.at_s) - 1;
    out.push_back({{"name", "collective"},
                   {"cat", "flow"},
                   {"ph", "s"},
                   {"id", f.id},
                   {"pid", pid},
                   {"tid", f.from_rank},
                   {"ts", ts}});
    out.push_back({{"name", "collective"},
                   {"cat", "flow"},
                   {"ph", "f"},
                   {"bp", "e"},
                   {"id", f.id},
                   {"pid", pid},
                   {"tid", f.to_rank},
                   {"ts", ts}});
  }
  return out;
}

}  // namespace meshsim::sim
