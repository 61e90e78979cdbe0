#include "sim/report/fr_settle.hpp"

#include <deque>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "sim/report/fr_entry.hpp"
#include "sim/runtime/group_label.hpp"

namespace meshsim::sim {

namespace {

// The other half of a send or recv: on a recorded rank, on a rank without a dump (assumed to
// make it), or nowhere (its peer's history has no such call).
struct Partner {
  enum class Kind { kAt, kAssumed, kMissing };
  Kind kind = Kind::kMissing;
  size_t dump = 0;
  size_t index = 0;
};

// Collectives whose members may pass tensors of different sizes (a root's list, uneven splits):
// only their op is compared.
bool sizes_may_differ(std::string_view op) {
  return op == "gather" || op == "scatter" || op.find("all_to_all") != std::string_view::npos ||
         op.find("alltoall") != std::string_view::npos;
}

bool same_call(const FrEntry& a, const FrEntry& b) {
  if (a.profiling_name != b.profiling_name) return false;
  if (sizes_may_differ(op_name(a))) return true;
  return a.input_sizes == b.input_sizes && a.output_sizes == b.output_sizes &&
         a.input_dtypes == b.input_dtypes && a.output_dtypes == b.output_dtypes;
}

class Settler {
 public:
  explicit Settler(std::vector<FrRankDump>& dumps) : dumps_(dumps) {
    for (size_t d = 0; d < dumps_.size(); ++d) by_rank_.emplace(dumps_[d].rank, d);
    for (const FrRankDump& d : dumps_)
      for (const auto& [key, cfg] : d.dump.pg_config)
        if (!cfg.ranks.empty()) members_.emplace(cfg.name, cfg.ranks);
    head_.assign(dumps_.size(), 0);
    matched_.resize(dumps_.size());
    arrived_at_.resize(dumps_.size());
    for (size_t d = 0; d < dumps_.size(); ++d)
      matched_[d].assign(dumps_[d].dump.entries.size(), false);
    find_partners();
  }

  void run() {
    std::deque<size_t> work;
    for (size_t d = 0; d < dumps_.size(); ++d) work.push_back(d);
    while (!work.empty()) {
      const size_t d = work.front();
      work.pop_front();
      step(d, work);
    }
  }

  std::vector<std::string> finish() {
    std::vector<std::string> notes;
    const FrRecorded& first = *dumps_.front().dump.recorded;
    std::vector<int64_t> stopped;
    size_t dropped = 0;
    for (size_t d = 0; d < dumps_.size(); ++d) {
      std::vector<FrEntry>& entries = dumps_[d].dump.entries;
      if (head_[d] >= entries.size()) continue;
      const size_t end = unit_end(d, head_[d]);
      for (size_t i = head_[d]; i < end; ++i) {
        FrEntry& e = entries[i];
        e.state = "started";
        e.retired = false;
        e.time_started_ns = e.time_created_ns;
        e.time_completed_ns.reset();
      }
      dropped += entries.size() - end;
      entries.resize(end);
      stopped.push_back(dumps_[d].rank);
    }
    notes.push_back(fmt::format(
        "recorded by meshsim_record{}{}: each dump is its rank's whole history, in which every "
        "call finished at once; settled as the job would run it: {}",
        first.torch_version.empty() ? "" : " with torch " + first.torch_version,
        first.command.empty() ? "" : " from `" + first.command + "`",
        stopped.empty() ? std::string("every call finishes")
                        : fmt::format("{} stop in a call their peers never finish, and the {} "
                                      "calls they would make after it are left out",
                                      ranks_phrase(stopped), dropped)));
    // Ranks whose program ended early, one line per way it ended.
    std::map<std::string, std::vector<int64_t>> ended;
    for (const FrRankDump& d : dumps_) {
      const FrRecorded& r = *d.dump.recorded;
      if (r.status.empty() || r.status == "ok") continue;
      std::string how = r.status == "raised" ? "raised " + r.error
                        : r.status == "exit" ? "exited with " + r.error
                        : r.error.empty()    ? r.status
                                             : r.error;
      if (!r.at.empty()) how += " at " + r.at;
      ended[how].push_back(d.rank);
    }
    for (const auto& [how, ranks] : ended)
      notes.push_back(fmt::format("the program of {} {}", ranks_phrase(ranks), how));
    for (std::string& line : creation_order_notes()) notes.push_back(std::move(line));
    std::set<int64_t> unrecorded;
    for (const auto& [name, members] : members_)
      for (const int64_t m : members)
        if (!by_rank_.contains(m)) unrecorded.insert(m);
    if (!unrecorded.empty())
      notes.push_back(fmt::format(
          "{} {} not recorded: {} taken to make every call their peers wait for",
          ranks_phrase({unrecorded.begin(), unrecorded.end()}),
          unrecorded.size() == 1 ? "was" : "were", unrecorded.size() == 1 ? "it is" : "they are"));
    return notes;
  }

 private:
  static std::string ranks_phrase(const std::vector<int64_t>& ranks) {
    return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", rank_ranges(ranks));
  }

  // c10d names a group by how many groups the program had created before it, so ranks that
  // create groups in another order give one name to different rank sets. For each name, the
  // ranks that give it the set fewer ranks give are said, with what the others give.
  std::vector<std::string> creation_order_notes() const {
    std::map<std::string, std::map<std::vector<int64_t>, std::vector<int64_t>>> claims;
    for (const FrRankDump& d : dumps_)
      for (const auto& [key, cfg] : d.dump.pg_config)
        if (!cfg.ranks.empty()) claims[cfg.name][cfg.ranks].push_back(d.rank);
    std::map<int64_t, std::string> first_of;  // rank -> its first disagreement
    for (const auto& [name, sets] : claims) {
      if (sets.size() < 2) continue;
      const auto most = std::max_element(
          sets.begin(), sets.end(),
          [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
      for (const auto& [set, ranks] : sets) {
        if (&set == &most->first) continue;
        for (const int64_t r : ranks)
          first_of.emplace(r, fmt::format("its group {} has ranks [{}], where {} {} it [{}]", name,
                                          rank_ranges(set), ranks_phrase(most->second),
                                          most->second.size() == 1 ? "gives" : "give",
                                          rank_ranges(most->first)));
      }
    }
    std::map<std::string, std::vector<int64_t>> by_text;
    for (const auto& [rank, text] : first_of) by_text[text].push_back(rank);
    std::vector<std::string> out;
    for (const auto& [text, ranks] : by_text)
      out.push_back(fmt::format("{} created process groups in another order than the others: {}",
                                ranks_phrase(ranks), text));
    return out;
  }

  const std::vector<int64_t>* members_of(const std::string& group) const {
    const auto it = members_.find(group);
    return it == members_.end() ? nullptr : &it->second;
  }

  // A send or recv's two global ranks, through its group's members.
  std::optional<std::pair<int64_t, int64_t>> global_ends(const FrEntry& e) const {
    const std::optional<P2pEnds> ends = p2p_ends(e);
    const std::vector<int64_t>* members = members_of(e.pg_name);
    if (!ends || !ends->src || !members) return std::nullopt;
    const auto global = [&](int64_t g) -> std::optional<int64_t> {
      if (g < 0 || static_cast<size_t>(g) >= members->size()) return std::nullopt;
      return (*members)[static_cast<size_t>(g)];
    };
    const auto src = global(*ends->src), dst = global(ends->dst);
    if (!src || !dst) return std::nullopt;
    return std::pair(*src, *dst);
  }

  // The k-th send from a to b on a group meets the k-th recv at b from a there.
  void find_partners() {
    using Key = std::tuple<std::string, int64_t, int64_t, size_t>;
    std::map<Key, std::pair<size_t, size_t>> sends, recvs;
    partners_.resize(dumps_.size());
    for (size_t d = 0; d < dumps_.size(); ++d) {
      const std::vector<FrEntry>& entries = dumps_[d].dump.entries;
      partners_[d].resize(entries.size());
      std::map<std::tuple<std::string, int64_t, int64_t, bool>, size_t> count;
      for (size_t i = 0; i < entries.size(); ++i) {
        const FrEntry& e = entries[i];
        if (!e.is_p2p || closes_coalesced(e)) continue;
        const auto ends = global_ends(e);
        if (!ends) {
          partners_[d][i].kind = Partner::Kind::kAssumed;  // a recv from any source
          continue;
        }
        const bool send = op_name(e) == "send";
        const size_t k = count[{e.pg_name, ends->first, ends->second, send}]++;
        (send ? sends : recvs)[{e.pg_name, ends->first, ends->second, k}] = {d, i};
      }
    }
    for (const auto& [mine, theirs] : {std::pair(&sends, &recvs), std::pair(&recvs, &sends)}) {
      for (const auto& [key, at] : *mine) {
        Partner& p = partners_[at.first][at.second];
        const auto& [group, src, dst, k] = key;
        const int64_t peer = mine == &sends ? dst : src;
        if (const auto it = theirs->find(key); it != theirs->end()) {
          p = {Partner::Kind::kAt, it->second.first, it->second.second};
        } else if (!by_rank_.contains(peer)) {
          p.kind = Partner::Kind::kAssumed;
        }
      }
    }
  }

  // The calls posted together from `begin`: one call, or a batch of sends and recvs (the same
  // p2p seq on one group) with its closing `coalesced` entry.
  size_t unit_end(size_t d, size_t begin) const {
    const std::vector<FrEntry>& entries = dumps_[d].dump.entries;
    const FrEntry& first = entries[begin];
    size_t end = begin + 1;
    if (!first.is_p2p || closes_coalesced(first)) return end;
    while (end < entries.size() && entries[end].is_p2p && entries[end].pg_name == first.pg_name &&
           entries[end].p2p_seq_id == first.p2p_seq_id)
      ++end;
    return end;
  }

  bool posted(size_t d, size_t index) const {
    return index >= head_[d] && index < unit_end(d, head_[d]);
  }

  void advance(size_t d, size_t to, std::deque<size_t>& work) {
    head_[d] = to;
    arrived_at_[d].reset();
    work.push_back(d);
  }

  void step(size_t d, std::deque<size_t>& work) {
    const std::vector<FrEntry>& entries = dumps_[d].dump.entries;
    if (head_[d] >= entries.size()) return;
    const size_t begin = head_[d], end = unit_end(d, begin);
    const FrEntry& first = entries[begin];
    if (first.is_p2p || closes_coalesced(first)) {
      bool all = true;
      for (size_t i = begin; i < end; ++i) {
        if (matched_[d][i] || closes_coalesced(entries[i])) continue;
        const Partner& p = partners_[d][i];
        if (p.kind == Partner::Kind::kAssumed) {
          matched_[d][i] = true;
        } else if (p.kind == Partner::Kind::kAt && posted(p.dump, p.index)) {
          matched_[d][i] = true;
          matched_[p.dump][p.index] = true;
          work.push_back(p.dump);
        } else {
          all = false;
        }
      }
      if (all) advance(d, end, work);
      return;
    }
    const std::pair<std::string, int64_t> key(first.pg_name, first.collective_seq_id);
    if (arrived_at_[d] == key) return;
    arrived_at_[d] = key;
    std::vector<size_t>& here = arrivals_[key];
    here.push_back(d);
    size_t expected = 1;
    if (const std::vector<int64_t>* members = members_of(first.pg_name)) {
      expected = 0;
      for (const int64_t m : *members) expected += by_rank_.contains(m) ? 1 : 0;
    }
    if (here.size() < expected) return;
    for (const size_t other : here)
      if (!same_call(dumps_[other].dump.entries[head_[other]], first)) return;  // a desync
    const std::vector<size_t> members = std::move(here);
    arrivals_.erase(key);
    for (const size_t other : members) advance(other, head_[other] + 1, work);
  }

  std::vector<FrRankDump>& dumps_;
  std::map<int64_t, size_t> by_rank_;
  std::map<std::string, std::vector<int64_t>> members_;  // by group name, global ranks
  std::vector<size_t> head_;                             // per dump: its first unfinished call
  std::vector<std::vector<char>> matched_;               // per entry: a send or recv that met
  std::vector<std::vector<Partner>> partners_;
  std::vector<std::optional<std::pair<std::string, int64_t>>> arrived_at_;
  std::map<std::pair<std::string, int64_t>, std::vector<size_t>> arrivals_;
};

}  // namespace

FrPairCounts unpaired_point_to_point(const std::vector<FrRankDump>& dumps) {
  FrPairCounts out;
  if (dumps.empty() || !dumps.front().dump.recorded) return out;
  std::map<std::string, std::vector<int64_t>> members;
  std::set<int64_t> recorded;
  for (const FrRankDump& d : dumps) {
    recorded.insert(d.rank);
    for (const auto& [key, cfg] : d.dump.pg_config)
      if (!cfg.ranks.empty()) members.emplace(cfg.name, cfg.ranks);
  }
  // (group, src, dst) -> the calls of each side, in order: (dump, entry).
  using Calls = std::vector<std::pair<size_t, size_t>>;
  std::map<std::tuple<std::string, int64_t, int64_t>, std::pair<Calls, Calls>> pairs;
  for (size_t d = 0; d < dumps.size(); ++d) {
    const std::vector<FrEntry>& entries = dumps[d].dump.entries;
    for (size_t i = 0; i < entries.size(); ++i) {
      const FrEntry& e = entries[i];
      const std::optional<P2pEnds> ends = e.is_p2p ? p2p_ends(e) : std::nullopt;
      const auto m = members.find(e.pg_name);
      if (!ends || !ends->src || m == members.end()) continue;
      const auto global = [&](int64_t g) {
        return g >= 0 && static_cast<size_t>(g) < m->second.size()
                   ? m->second[static_cast<size_t>(g)]
                   : int64_t{-1};
      };
      const int64_t src = global(*ends->src), dst = global(ends->dst);
      if (src < 0 || dst < 0 || !recorded.contains(src) || !recorded.contains(dst)) continue;
      auto& [sends, recvs] = pairs[{e.pg_name, src, dst}];
      (op_name(e) == "send" ? sends : recvs).emplace_back(d, i);
    }
  }
  std::map<int64_t, size_t> appearances;
  for (const auto& [key, calls] : pairs) {
    const auto& [group, src, dst] = key;
    const auto& [sends, recvs] = calls;
    if (sends.size() == recvs.size()) continue;
    const Calls& more = sends.size() > recvs.size() ? sends : recvs;
    const auto [d, i] = more[std::min(sends.size(), recvs.size())];
    const std::optional<std::string> line = user_line(dumps[d].dump.entries[i]);
    const std::string label =
        dumps[d].dump.entries[i].pg_desc == "default_pg" ? std::string("WORLD") : "pg " + group;
    const auto times = [](size_t n) {
      return n == 1 ? std::string("once") : fmt::format("{} times", n);
    };
    out.lines.push_back(
        fmt::format("rank {} sends to rank {} {} on {}, and rank {} receives from it {}{}", src,
                    dst, times(sends.size()), label, dst, times(recvs.size()),
                    line ? fmt::format(" (the first unpaired {} at {})",
                                       &more == &sends ? "send" : "recv", *line)
                         : std::string()));
    ++appearances[src];
    ++appearances[dst];
  }
  size_t most = 0;
  for (const auto& [rank, n] : appearances) most = std::max(most, n);
  for (const auto& [rank, n] : appearances)
    if (n == most) out.ranks.push_back(rank);
  out.ranks_in = most;
  return out;
}

void blame_unpaired(FrAnalysis& analysis, const FrPairCounts& counts) {
  if (counts.lines.empty() || analysis.verdict == FrAnalysis::Verdict::kClean ||
      analysis.verdict == FrAnalysis::Verdict::kDesync)
    return;
  analysis.culprits = counts.ranks;
  analysis.cause = HangCause::kUnmatchedPointToPoint;
  // A stall says that no rank is at fault; the counts say which is.
  if (analysis.verdict == FrAnalysis::Verdict::kStall) {
    analysis.verdict = FrAnalysis::Verdict::kDeadlock;
    analysis.summary.clear();
  }
  const std::string who =
      fmt::format("{} {}", counts.ranks.size() == 1 ? "rank" : "ranks", rank_ranges(counts.ranks));
  const std::string where = counts.ranks_in == counts.lines.size()
                                ? fmt::format("{} in every pair whose counts differ",
                                              counts.ranks.size() == 1 ? "is" : "are")
                                : fmt::format("{} in {} of the {} pairs whose counts differ",
                                              counts.ranks.size() == 1 ? "is" : "are each",
                                              counts.ranks_in, counts.lines.size());
  std::vector<std::string> summary{
      fmt::format("sends and recvs do not pair up over the whole run: {} {}", who, where)};
  for (const std::string& line : counts.lines) summary.push_back("  " + line);
  summary.insert(summary.end(), analysis.summary.begin(), analysis.summary.end());
  analysis.summary = std::move(summary);
}

std::vector<std::string> settle_recorded_histories(std::vector<FrRankDump>& dumps) {
  if (dumps.empty()) return {};
  size_t recorded = 0;
  for (const FrRankDump& d : dumps) recorded += d.dump.recorded ? 1 : 0;
  if (recorded == 0) return {};
  if (recorded < dumps.size())
    return {
        fmt::format("{} of the {} dumps are a recorder's whole histories and the others a "
                    "real job's: they are analysed as they are, not settled",
                    recorded, dumps.size())};
  Settler settler(dumps);
  settler.run();
  return settler.finish();
}

}  // namespace meshsim::sim
