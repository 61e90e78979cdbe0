#include "sim/runtime/history_departure.hpp"

#include <algorithm>
#include <utility>

namespace meshsim::sim {
namespace {

// The departure in one group, if its members' hashes split into a strict majority and the rest at
// some checkpoint every member holds.
std::optional<HistoryDeparture> departure_in(int64_t group_id, const std::vector<int64_t>& members,
                                             const std::function<const CallHistory&(int64_t)>& of) {
  uint64_t stride = 1, fewest = UINT64_MAX;
  for (int64_t m : members) {
    stride = std::max(stride, of(m).stride());
    fewest = std::min(fewest, of(m).count());
  }
  // Every member holds the hashes at multiples of the coarsest stride, up to the fewest calls;
  // the fewest calls themselves are compared where every member kept them.
  std::vector<uint64_t> points;
  for (uint64_t c = stride; c <= fewest; c += stride) points.push_back(c);
  if (points.empty() || points.back() != fewest) points.push_back(fewest);
  uint64_t agreed = 0;
  bool unheld_after_agreed = false;
  std::vector<std::pair<uint64_t, int64_t>> hashes(members.size());
  for (const uint64_t calls : points) {
    bool held = true;
    for (size_t i = 0; i < members.size() && held; ++i) {
      const std::optional<uint64_t> h = of(members[i]).hash_at(calls);
      held = h.has_value();
      if (held) hashes[i] = {*h, members[i]};
    }
    if (!held) {
      unheld_after_agreed = true;
      continue;
    }
    unheld_after_agreed = false;
    std::sort(hashes.begin(), hashes.end());
    // The largest run of equal hashes (the first such run on ties).
    size_t best_start = 0, best_len = 0;
    for (size_t i = 0; i < hashes.size();) {
      size_t j = i;
      while (j < hashes.size() && hashes[j].first == hashes[i].first) ++j;
      if (j - i > best_len) {
        best_start = i;
        best_len = j - i;
      }
      i = j;
    }
    if (best_len == hashes.size()) {
      agreed = calls;
      continue;
    }
    if (2 * best_len <= hashes.size()) return std::nullopt;  // no majority: not one program
    // The others must agree among themselves: two minorities (a pipeline group's first and last
    // stage next to its middle ones) are several programs, not one departure.
    const size_t other = best_start == 0 ? best_len : 0;
    for (size_t i = 0; i < hashes.size(); ++i) {
      const bool in_best = i >= best_start && i < best_start + best_len;
      if (!in_best && hashes[i].first != hashes[other].first) return std::nullopt;
    }
    HistoryDeparture d{group_id, {}, {}, agreed, calls};
    for (size_t i = 0; i < hashes.size(); ++i) {
      (i >= best_start && i < best_start + best_len ? d.peers : d.odd).push_back(hashes[i].second);
    }
    std::sort(d.odd.begin(), d.odd.end());
    std::sort(d.peers.begin(), d.peers.end());
    return d;
  }
  // Members far ahead keep only coarse checkpoints: after the last agreeing one, none every member
  // holds may remain. The calls after it are an open tail, split by what the members skipped.
  if (unheld_after_agreed) return HistoryDeparture{group_id, {}, members, agreed, 0};
  return std::nullopt;
}

}  // namespace

std::vector<HistoryDeparture> history_departures(
    const std::map<int64_t, std::vector<int64_t>>& groups,
    const std::function<const CallHistory&(int64_t)>& history_of) {
  std::vector<HistoryDeparture> out;
  for (const auto& [id, members] : groups) {
    if (members.size() < 3) continue;
    std::optional<HistoryDeparture> d = departure_in(id, members, history_of);
    if (!d) continue;
    out.push_back(std::move(*d));
  }
  std::stable_sort(
      out.begin(), out.end(),
      [](const HistoryDeparture& a, const HistoryDeparture& b) { return a.agreed < b.agreed; });
  return out;
}

}  // namespace meshsim::sim
