#include "sim/runtime/first_divergence.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace meshsim::sim {

std::optional<Divergence> first_divergence(const std::vector<RankActivity>& activity) {
  struct Entry {
    int64_t rank;
    CollectiveRecord record;
  };
  std::map<std::pair<int64_t, int64_t>, std::vector<Entry>> by_call;  // (group, seq)
  for (size_t r = 0; r < activity.size(); ++r) {
    for (const CollectiveRecord& c : activity[r].history.records()) {
      if (c.peer >= 0) continue;
      by_call[{c.group_id, c.seq}].push_back({static_cast<int64_t>(r), c});
    }
  }
  std::optional<Divergence> best;
  double best_time = 0.0;
  for (const auto& [key, entries] : by_call) {
    const CollectiveRecord& first = entries.front().record;
    const bool differs = std::any_of(entries.begin(), entries.end(), [&](const Entry& e) {
      return !(e.record.signature == first.signature) || e.record.line != first.line ||
             e.record.column != first.column;
    });
    if (!differs) continue;
    double entered = entries.front().record.entered_at;
    for (const Entry& e : entries) entered = std::min(entered, e.record.entered_at);
    // Keys are visited in (group, seq) order, so a strictly earlier time is needed to replace.
    if (best && entered >= best_time) continue;
    std::map<std::string, std::vector<int64_t>> calls;
    for (const Entry& e : entries) {
      calls[fmt::format("{} at line {}", e.record.signature.describe(), e.record.line)].push_back(
          e.rank);
    }
    Divergence d{key.first, key.second, {calls.begin(), calls.end()}};
    for (auto& [call, ranks] : d.calls) std::sort(ranks.begin(), ranks.end());
    std::stable_sort(d.calls.begin(), d.calls.end(), [](const auto& a, const auto& b) {
      return std::tuple(a.second.size(), a.second.front()) <
             std::tuple(b.second.size(), b.second.front());
    });
    best = std::move(d);
    best_time = entered;
  }
  return best;
}

}  // namespace meshsim::sim
