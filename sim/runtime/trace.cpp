#include "sim/runtime/trace.hpp"

#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "sim/runtime/rank_activity.hpp"

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

void Trace::open_slice(int64_t rank, std::string name, std::string category, double start_s,
                       nlohmann::json args) {
  slices_.push_back(
      {rank, std::move(name), std::move(category), start_s, start_s, std::move(args), true});
}

void Trace::collective(int64_t rank, std::string meeting, std::string name, double start_s,
                       double end_s, nlohmann::json args) {
  meetings_[std::move(meeting)].push_back(slices_.size());
  slice(rank, std::move(name), "collective", start_s, end_s, std::move(args));
}

void Trace::meeting(int64_t rank, const CallSite& site, const Signature& signature,
                    int64_t group_id, int64_t group_size, int64_t seq, double start_s,
                    double end_s) {
  const bool p2p = signature.op == CollectiveOp::kSend || signature.op == CollectiveOp::kRecv;
  const int64_t peer = signature.root.value_or(0);
  const int64_t src = signature.op == CollectiveOp::kSend ? rank : peer;
  const int64_t dst = signature.op == CollectiveOp::kSend ? peer : rank;
  const std::string channel =
      p2p ? fmt::format("p:{}:{}>{}", group_id, src, dst) : fmt::format("c:{}", group_id);
  const std::string shown = group_id == kStoreGroupId ? "store (WORLD)"
                            : label_                  ? label_(group_id)
                                                      : display_group(std::to_string(group_id));
  const std::string where = p2p ? fmt::format("{} p2p {}→{}", shown, src, dst) : shown;
  collective(rank, fmt::format("{}#{}", channel, seq),
             fmt::format("{} {} #{}", collective_op_name(signature.op), where, seq), start_s, end_s,
             {{"signature", signature.describe()},
              {"group", shown},
              {"group_id", std::to_string(group_id)},
              {"seq", seq},
              {"group_size", p2p ? 2 : group_size},
              {"call_site", site.text()}});
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
    if (s.open) {
      out.push_back({{"name", s.name},
                     {"cat", s.category},
                     {"ph", "B"},
                     {"pid", pid},
                     {"tid", s.rank},
                     {"ts", micros(s.start_s)},
                     {"args", s.args}});
      continue;
    }
    out.push_back({{"name", s.name},
                   {"cat", s.category},
                   {"ph", "X"},
                   {"pid", pid},
                   {"tid", s.rank},
                   {"ts", micros(s.start_s)},
                   {"dur", micros(s.end_s) - micros(s.start_s)},
                   {"args", s.args}});
  }
  int64_t flow_id = 0;
  for (const auto& [key, parts] : meetings_) {
    // From the lowest rank to every other; flow ends bind to the enclosing collective slices,
    // which all end when the collective does.
    const Slice* from = &slices_[parts.front()];
    for (size_t i : parts) {
      if (slices_[i].rank < from->rank) from = &slices_[i];
    }
    const int64_t ts = micros(from->end_s) - 1;
    for (size_t i : parts) {
      const Slice& to = slices_[i];
      if (&to == from) continue;
      ++flow_id;
      out.push_back({{"name", "collective"},
                     {"cat", "flow"},
                     {"ph", "s"},
                     {"id", flow_id},
                     {"pid", pid},
                     {"tid", from->rank},
                     {"ts", ts}});
      out.push_back({{"name", "collective"},
                     {"cat", "flow"},
                     {"ph", "f"},
                     {"bp", "e"},
                     {"id", flow_id},
                     {"pid", pid},
                     {"tid", to.rank},
                     {"ts", ts}});
    }
  }
  return out;
}

}  // namespace meshsim::sim
