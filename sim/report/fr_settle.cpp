#include "sim/report/fr_settle.hpp"

#include <algorithm>
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

std::string ranks_phrase(const std::vector<int64_t>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", rank_ranges(ranks));
}

bool all_recorded(const std::vector<FrRankDump>& dumps) {
  return !dumps.empty() && std::all_of(dumps.begin(), dumps.end(), [](const FrRankDump& d) {
    return d.dump.recorded.has_value();
  });
}

// Each dump's own groups by c10d's name: ranks that created groups in another order give one
// name to different rank sets, so a rank's calls are read through its own pg_config.
std::vector<std::map<std::string, std::vector<int64_t>>> groups_by_dump(
    const std::vector<FrRankDump>& dumps) {
  std::vector<std::map<std::string, std::vector<int64_t>>> out(dumps.size());
  for (size_t d = 0; d < dumps.size(); ++d)
    for (const auto& [key, cfg] : dumps[d].dump.pg_config)
      if (!cfg.ranks.empty()) out[d].emplace(cfg.name, cfg.ranks);
  return out;
}

// A send or recv's two global ranks, through the caller's group members: none for a group it
// lists no members of, a peer outside them, or a recv from any source.
std::optional<std::pair<int64_t, int64_t>> global_ends(
    const FrEntry& e, const std::map<std::string, std::vector<int64_t>>& groups) {
  const std::optional<P2pEnds> ends = p2p_ends(e);
  const auto it = groups.find(e.pg_name);
  if (!ends || !ends->src || it == groups.end()) return std::nullopt;
  const std::vector<int64_t>& members = it->second;
  const auto global = [&](int64_t g) -> std::optional<int64_t> {
    if (g < 0 || static_cast<size_t>(g) >= members.size()) return std::nullopt;
    return members[static_cast<size_t>(g)];
  };
  const auto src = global(*ends->src), dst = global(ends->dst);
  if (!src || !dst) return std::nullopt;
  return std::pair(*src, *dst);
}

bool is_point_to_point(const FrEntry& e) {
  return e.is_p2p && !closes_coalesced(e);
}

// The other half of a send or recv: on a recorded rank, taken as made (a rank without a dump, a
// recv from any source, a peer the group does not name), or nowhere (its peer never makes it).
struct Partner {
  enum class Kind { kAt, kAssumed, kMissing };
  Kind kind = Kind::kMissing;
  size_t dump = 0;
  size_t index = 0;
};

// Runs the ranks' histories against each other. Every call is looked at a bounded number of
// times: a rank is queued once per change, a batch's calls are paired when it is entered, and
// each peer keeps a count of its batch's calls still unpaired.
class Settler {
 public:
  explicit Settler(std::vector<FrRankDump>& dumps) : dumps_(dumps), groups_(groups_by_dump(dumps)) {
    for (size_t d = 0; d < dumps_.size(); ++d) by_rank_.emplace(dumps_[d].rank, d);
    const size_t n = dumps_.size();
    head_.assign(n, 0);
    head_end_.assign(n, 0);
    unpaired_.assign(n, 0);
    queued_.assign(n, false);
    arrived_at_.resize(n);
    matched_.resize(n);
    for (size_t d = 0; d < n; ++d) matched_[d].assign(dumps_[d].dump.entries.size(), false);
    find_partners();
  }

  void run() {
    for (size_t d = 0; d < dumps_.size(); ++d) head_end_[d] = unit_end(d, 0);
    for (size_t d = 0; d < dumps_.size(); ++d) pair_unit(d);
    for (size_t d = 0; d < dumps_.size(); ++d) queue(d);
    while (!work_.empty()) {
      const size_t d = work_.front();
      work_.pop_front();
      queued_[d] = false;
      step(d);
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
      const size_t end = head_end_[d];
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
        stopped.empty()
            ? std::string("every call finishes")
            : fmt::format("{} {} in a call their peers never finish, and the {} calls they "
                          "would make after it are left out",
                          ranks_phrase(stopped), stopped.size() == 1 ? "stops" : "stop", dropped)));
    // Ranks whose program ended early, one line per way it ended.
    std::map<std::string, std::vector<int64_t>> ended;
    for (const FrRankDump& d : dumps_) {
      const FrRecorded& r = *d.dump.recorded;
      if (r.status.empty() || r.status == "ok") continue;
      std::string how = r.status == "raised"    ? "raised " + r.error
                        : r.status == "exit"    ? "exited with " + r.error
                        : r.status == "crashed" ? "crashed (" + r.error + ")"
                                                : r.status;
      if (!r.at.empty()) how += " at " + r.at;
      ended[how].push_back(d.rank);
    }
    for (const auto& [how, ranks] : ended)
      notes.push_back(fmt::format("the program of {} {}", ranks_phrase(ranks), how));
    for (std::string& line : creation_order_notes()) notes.push_back(std::move(line));
    std::set<int64_t> unrecorded;
    for (const auto& groups : groups_)
      for (const auto& [name, members] : groups)
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
  // c10d names a group by how many groups the program had created before it, so ranks that
  // create groups in another order give one name to different rank sets. For each name, the
  // ranks that give it a set fewer ranks give are said, with what the others give (an even split
  // names the ranks of the set that sorts last).
  std::vector<std::string> creation_order_notes() const {
    std::map<std::string, std::map<std::vector<int64_t>, std::vector<int64_t>>> claims;
    for (size_t d = 0; d < dumps_.size(); ++d)
      for (const auto& [name, members] : groups_[d])
        claims[name][members].push_back(dumps_[d].rank);
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

  const std::vector<int64_t>* members_of(size_t d, const std::string& group) const {
    const auto it = groups_[d].find(group);
    return it == groups_[d].end() ? nullptr : &it->second;
  }

  // The k-th send from a to b on a group meets the k-th recv at b from a there; a send left over
  // meets b's recvs from any source on the group, in order.
  void find_partners() {
    using Key = std::tuple<std::string, int64_t, int64_t, size_t>;
    std::map<Key, std::pair<size_t, size_t>> sends, recvs;
    std::map<std::pair<std::string, int64_t>, std::deque<std::pair<size_t, size_t>>> any_source;
    partners_.resize(dumps_.size());
    for (size_t d = 0; d < dumps_.size(); ++d) {
      const std::vector<FrEntry>& entries = dumps_[d].dump.entries;
      std::map<std::tuple<std::string, int64_t, int64_t, bool>, size_t> count;
      for (size_t i = 0; i < entries.size(); ++i) {
        const FrEntry& e = entries[i];
        if (!is_point_to_point(e)) continue;
        const auto ends = global_ends(e, groups_[d]);
        const bool send = op_name(e) == "send";
        if (!ends) {
          const std::optional<P2pEnds> raw = p2p_ends(e);
          if (!send && raw && !raw->src)
            any_source[{e.pg_name, dumps_[d].rank}].emplace_back(d, i);
          else
            partners_[d][i].kind = Partner::Kind::kAssumed;  // a peer the group does not name
          continue;
        }
        const size_t k = count[{e.pg_name, ends->first, ends->second, send}]++;
        (send ? sends : recvs)[{e.pg_name, ends->first, ends->second, k}] = {d, i};
      }
    }
    const auto link = [&](std::pair<size_t, size_t> a, std::pair<size_t, size_t> b) {
      partners_[a.first][a.second] = {Partner::Kind::kAt, b.first, b.second};
      partners_[b.first][b.second] = {Partner::Kind::kAt, a.first, a.second};
    };
    for (const auto& [key, at] : sends) {
      const auto& [group, src, dst, k] = key;
      if (const auto it = recvs.find(key); it != recvs.end()) {
        link(at, it->second);
      } else if (auto any = any_source.find({group, dst});
                 any != any_source.end() && !any->second.empty()) {
        link(at, any->second.front());
        any->second.pop_front();
      } else if (!by_rank_.contains(dst)) {
        partners_[at.first][at.second].kind = Partner::Kind::kAssumed;
      }
    }
    for (const auto& [key, at] : recvs) {
      const auto& [group, src, dst, k] = key;
      if (!sends.contains(key) && !by_rank_.contains(src))
        partners_[at.first][at.second].kind = Partner::Kind::kAssumed;
    }
    // A recv from any source that no send met waits; one on a group some member of which left
    // no dump is taken as met by that member.
    for (auto& [key, left] : any_source)
      for (const auto& [d, i] : left) {
        const std::vector<int64_t>* members = members_of(d, key.first);
        const bool unknown_sender =
            !members || std::any_of(members->begin(), members->end(),
                                    [&](int64_t m) { return !by_rank_.contains(m); });
        if (unknown_sender) partners_[d][i].kind = Partner::Kind::kAssumed;
      }
  }

  // The calls posted together from `begin`: one call, or a batch of sends and recvs (the same
  // p2p seq on one group) with its closing `coalesced` entry.
  size_t unit_end(size_t d, size_t begin) const {
    const std::vector<FrEntry>& entries = dumps_[d].dump.entries;
    if (begin >= entries.size()) return begin;
    const FrEntry& first = entries[begin];
    size_t end = begin + 1;
    if (!is_point_to_point(first)) return end;
    while (end < entries.size() && entries[end].is_p2p && entries[end].pg_name == first.pg_name &&
           entries[end].p2p_seq_id == first.p2p_seq_id)
      ++end;
    return end;
  }

  bool posted(size_t d, size_t index) const { return index >= head_[d] && index < head_end_[d]; }

  void queue(size_t d) {
    if (queued_[d]) return;
    queued_[d] = true;
    work_.push_back(d);
  }

  // Pairs the sends and recvs of d's current batch with the other halves already posted.
  void pair_unit(size_t d) {
    const std::vector<FrEntry>& entries = dumps_[d].dump.entries;
    unpaired_[d] = 0;
    for (size_t i = head_[d]; i < head_end_[d]; ++i) {
      if (!is_point_to_point(entries[i]) || matched_[d][i]) continue;
      const Partner& p = partners_[d][i];
      if (p.kind == Partner::Kind::kAssumed) {
        matched_[d][i] = true;
      } else if (p.kind == Partner::Kind::kAt && posted(p.dump, p.index)) {
        matched_[d][i] = true;
        matched_[p.dump][p.index] = true;
        if (--unpaired_[p.dump] == 0) queue(p.dump);
      } else {
        ++unpaired_[d];
      }
    }
  }

  void advance(size_t d, size_t to) {
    head_[d] = to;
    head_end_[d] = unit_end(d, to);
    arrived_at_[d].reset();
    pair_unit(d);
    queue(d);
  }

  // How many members of d's group `name` left a dump: they must all arrive.
  size_t recorded_members(size_t d, const std::string& name) {
    const std::vector<int64_t>* members = members_of(d, name);
    if (!members) return 1;
    const auto [it, fresh] = expected_.try_emplace(*members, 0);
    if (fresh)
      for (const int64_t m : *members) it->second += by_rank_.contains(m) ? 1 : 0;
    return it->second;
  }

  void step(size_t d) {
    const std::vector<FrEntry>& entries = dumps_[d].dump.entries;
    if (head_[d] >= entries.size()) return;
    const FrEntry& first = entries[head_[d]];
    if (first.is_p2p) {  // a batch, or its closing entry alone
      if (unpaired_[d] == 0) advance(d, head_end_[d]);
      return;
    }
    // Arrivals are keyed by the group's members too: two rank sets under one name never meet.
    const std::vector<int64_t>* members = members_of(d, first.pg_name);
    CallKey key{first.pg_name, members ? *members : std::vector<int64_t>{},
                first.collective_seq_id};
    if (arrived_at_[d] == key) return;
    arrived_at_[d] = key;
    std::vector<size_t>& here = arrivals_[key];
    here.push_back(d);
    if (here.size() < recorded_members(d, first.pg_name)) return;
    for (const size_t other : here)
      if (agreed_call(dumps_[other].dump.entries[head_[other]]) != agreed_call(first))
        return;  // a desync, as the analysis sees one
    const std::vector<size_t> arrived = std::move(here);
    arrivals_.erase(key);
    for (const size_t other : arrived) advance(other, head_[other] + 1);
  }

  using CallKey = std::tuple<std::string, std::vector<int64_t>, int64_t>;

  std::vector<FrRankDump>& dumps_;
  std::vector<std::map<std::string, std::vector<int64_t>>> groups_;  // per dump
  std::map<int64_t, size_t> by_rank_;
  std::vector<size_t> head_;      // per dump: its first unfinished call
  std::vector<size_t> head_end_;  // per dump: the end of the calls posted with it
  std::vector<size_t> unpaired_;  // per dump: its posted sends and recvs not yet met
  std::vector<char> queued_;
  std::deque<size_t> work_;
  std::vector<std::vector<char>> matched_;           // per entry: a send or recv that met
  std::vector<std::map<size_t, Partner>> partners_;  // per dump, by entry: sends and recvs only
  std::vector<std::optional<CallKey>> arrived_at_;
  std::map<CallKey, std::vector<size_t>> arrivals_;
  std::map<std::vector<int64_t>, size_t> expected_;
};

}  // namespace

std::vector<int64_t> failed_recorded_ranks(const std::vector<FrRankDump>& dumps) {
  std::vector<int64_t> out;
  for (const FrRankDump& d : dumps)
    if (d.dump.recorded && !d.dump.recorded->status.empty() && d.dump.recorded->status != "ok")
      out.push_back(d.rank);
  std::sort(out.begin(), out.end());
  return out;
}

FrPairCounts unpaired_point_to_point(const std::vector<FrRankDump>& dumps) {
  FrPairCounts out;
  if (!all_recorded(dumps)) return out;
  const auto groups = groups_by_dump(dumps);
  // Ranks whose program ran to its end: one that raised or exited early leaves its pairs short,
  // and is said as such, not as a miscount.
  std::set<int64_t> whole;
  for (const FrRankDump& d : dumps)
    if (d.dump.recorded->status.empty() || d.dump.recorded->status == "ok") whole.insert(d.rank);
  // (group, src, dst) -> the calls of each side, in order: (dump, entry).
  using Calls = std::vector<std::pair<size_t, size_t>>;
  std::map<std::tuple<std::string, int64_t, int64_t>, std::pair<Calls, Calls>> pairs;
  std::set<std::pair<std::string, int64_t>> any_source;  // (group, rank) that recv from anyone
  for (size_t d = 0; d < dumps.size(); ++d) {
    const std::vector<FrEntry>& entries = dumps[d].dump.entries;
    for (size_t i = 0; i < entries.size(); ++i) {
      const FrEntry& e = entries[i];
      if (!is_point_to_point(e)) continue;
      const auto ends = global_ends(e, groups[d]);
      if (!ends) {
        if (const auto raw = p2p_ends(e); raw && !raw->src)
          any_source.emplace(e.pg_name, dumps[d].rank);
        continue;
      }
      const auto [src, dst] = *ends;
      if (!whole.contains(src) || !whole.contains(dst)) continue;
      auto& [sends, recvs] = pairs[{e.pg_name, src, dst}];
      (op_name(e) == "send" ? sends : recvs).emplace_back(d, i);
    }
  }
  const auto times = [](size_t n) {
    return n == 1 ? std::string("once") : fmt::format("{} times", n);
  };
  std::map<int64_t, size_t> appearances;
  for (const auto& [key, calls] : pairs) {
    const auto& [group, src, dst] = key;
    const auto& [sends, recvs] = calls;
    if (sends.size() == recvs.size() || any_source.contains({group, dst})) continue;
    const Calls& more = sends.size() > recvs.size() ? sends : recvs;
    const auto [d, i] = more[std::min(sends.size(), recvs.size())];
    const FrEntry& extra = dumps[d].dump.entries[i];
    const std::optional<std::string> line = user_line(extra);
    const std::string label = extra.pg_desc == "default_pg" ? std::string("WORLD") : "pg " + group;
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
  const std::string where = counts.ranks_in == counts.lines.size()
                                ? fmt::format("{} in every pair whose counts differ",
                                              counts.ranks.size() == 1 ? "is" : "are")
                                : fmt::format("{} in {} of the {} pairs whose counts differ",
                                              counts.ranks.size() == 1 ? "is" : "are each",
                                              counts.ranks_in, counts.lines.size());
  std::vector<std::string> summary{
      fmt::format("sends and recvs do not pair up over the whole run: {} {}",
                  ranks_phrase(counts.ranks), where)};
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
