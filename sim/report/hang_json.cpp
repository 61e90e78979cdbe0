#include "sim/report/hang_render.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "sim/runtime/group_label.hpp"
#include "sim/runtime/hang_phrases.hpp"

namespace meshsim::sim {

namespace {

constexpr size_t kListMembersUpTo = 64;  // larger groups are described by their size
constexpr size_t kMaxEdges = 4096;       // larger wait-for graphs are given per collective

}  // namespace

nlohmann::json hang_json(const HangReport& report) {
  nlohmann::json waits_json = nlohmann::json::array();
  for (const auto& w : report.waits) {
    nlohmann::json j{{"group", w.group},
                     {"group_id", w.group_id},
                     {"group_size", w.members->size()},
                     {"seq", w.seq},
                     {"op", collective_op_name(w.signature.op)},
                     {"signature", w.signature.describe()},
                     {"arrived", w.arrived},
                     {"missing", w.missing}};
    if (w.members->size() <= kListMembersUpTo) j["group_ranks"] = *w.members;
    if (!w.creating.empty()) j["creating"] = w.creating;
    if (w.channel != w.group) j["channel"] = w.channel;
    // As the per-rank lines print it, members included: "world.tp#1 [4-7]".
    if (const std::string shown = group_text(w); shown != w.channel) j["shown_as"] = shown;
    waits_json.push_back(std::move(j));
  }
  nlohmann::json ranks_json = nlohmann::json::array();
  size_t edge_count = 0;
  for (const HangReport::Rank& r : report.ranks) {
    nlohmann::json j{{"rank", r.rank},
                     {"state", state_name(r.activity.state)},
                     {"location",
                      {{"file", r.activity.where.file},
                       {"line", r.activity.where.line},
                       {"column", r.activity.where.column}}},
                     {"step", r.activity.step},
                     {"call_site", r.activity.site.text()},
                     {"virtual_time_s", r.activity.clock}};
    if (r.wait >= 0) j["wait"] = r.wait;
    if (!r.activity.error.empty()) j["error"] = r.activity.error;
    nlohmann::json history = nlohmann::json::array();
    for (const CollectiveRecord& c : r.activity.history.records(FlightRecorder::kReportDepth)) {
      nlohmann::json e{{"group", report.group_labels.at(c.group_id)},
                       {"group_id", std::to_string(c.group_id)},
                       {"seq", c.seq},
                       {"signature", c.signature.describe()},
                       {"line", c.site.line},
                       {"call_site", c.site.text()},
                       {"state", record_state_name(c.state)}};
      if (c.site.depth() > 0) e["iterations"] = c.site.iterations_text();
      if (c.peer >= 0) e["peer"] = c.peer;
      history.push_back(std::move(e));
    }
    j["history"] = std::move(history);
    j["history_total"] = r.activity.history.total();
    edge_count += report.waits_for(r.rank).size();
    ranks_json.push_back(std::move(j));
  }
  nlohmann::json out{{"kind", hang_kind_name(report.kind)},
                     {"cause", hang_cause_name(report.cause)},
                     {"summary", report.summary},
                     {"culprits", report.culprits},
                     {"waits", waits_json},
                     {"ranks", ranks_json}};
  if (edge_count <= kMaxEdges) {
    nlohmann::json edges = nlohmann::json::array();
    for (const HangReport::Rank& r : report.ranks) {
      for (int64_t to : report.waits_for(r.rank)) edges.push_back({r.rank, to});
    }
    out["edges"] = edges;
  } else {
    out["edges_omitted"] = edge_count;  // arrived x report.missing of each entry of "waits"
  }
  if (report.legacy_cause != report.cause)
    out["cause_aliases"] = {hang_cause_name(report.legacy_cause)};
  if (report.blamed_earlier) out["blamed_earlier"] = true;
  nlohmann::json all_divergences = nlohmann::json::array();
  for (const SiteDivergence& d : report.divergences) {
    nlohmann::json calls = nlohmann::json::array();
    for (const auto& [site, who] : d.sites) {
      calls.push_back({{"call", fmt::format("{} at {}", d.signature.describe(), site.text())},
                       {"call_site", site.text()},
                       {"line", site.line},
                       {"iterations", site.iterations_text()},
                       {"ranks", who}});
    }
    nlohmann::json j{{"group", report.group_labels.at(d.group_id)},
                     {"group_id", std::to_string(d.group_id)},
                     {"seq", d.seq},
                     {"op", collective_op_name(d.signature.op)},
                     {"complete", d.complete},
                     {"calls", std::move(calls)}};
    if (!d.elsewhere.empty()) j["other_sites"] = d.elsewhere;
    if (!d.missing.empty()) j["missing"] = d.missing;
    all_divergences.push_back(std::move(j));
  }
  if (report.first_divergence) out["first_divergence"] = all_divergences[*report.first_divergence];
  if (!all_divergences.empty()) out["divergences"] = std::move(all_divergences);
  if (!report.desyncs.empty()) {
    nlohmann::json all = nlohmann::json::array();
    for (const DesyncRecord& d : report.desyncs) {
      nlohmann::json arrivals = nlohmann::json::array();
      for (const auto& [rank, sig] : d.arrivals) {
        arrivals.push_back({{"rank", rank},
                            {"signature", sig.describe()},
                            {"line", report.ranks[static_cast<size_t>(rank)].activity.where.line}});
      }
      all.push_back({{"group", d.group},
                     {"group_id", d.group_id},
                     {"seq", d.seq},
                     {"arrivals", std::move(arrivals)}});
    }
    out["desync"] = all.front();  // the first, as before several were reported
    out["desyncs"] = std::move(all);
  }
  if (report.timeout) {
    out["timeout"] = {{"group", report.timeout->group},
                      {"group_id", report.timeout->group_id},
                      {"seq", report.timeout->seq},
                      {"op", report.timeout->signature.describe()},
                      {"timed_out", report.timeout->timed_out},
                      {"late", report.timeout->late},
                      {"waited_s", report.timeout->waited_s}};
  }
  return out;
}

}  // namespace meshsim::sim
