#include "sim/report/fr_analysis.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "sim/report/fr_entry.hpp"
#include "sim/runtime/group_label.hpp"
#include "sim/runtime/hang_phrases.hpp"
#include "src/error.hpp"
#include "src/printable.hpp"

namespace meshsim::sim {

std::string_view fr_verdict_name(FrAnalysis::Verdict verdict) {
  switch (verdict) {
    case FrAnalysis::Verdict::kClean:
      return "no hang";
    case FrAnalysis::Verdict::kDeadlock:
      return "deadlock";
    case FrAnalysis::Verdict::kDesync:
      return "desync";
    case FrAnalysis::Verdict::kStall:
      return "stall";
  }
  return "?";
}

namespace {

std::string state_text(const FrEntry& e) {
  const std::string state = printable(e.state, 16);
  return e.retired && e.state != "completed" ? state + ", retired" : state;
}

std::string label_of(const std::string& name, const std::string& desc) {
  if (desc == "default_pg") return "WORLD";
  if (desc.empty() || desc == "undefined") return "pg " + printable(name, 32);
  return fmt::format("{} (pg {})", printable(desc, 48), printable(name, 32));
}

int64_t saturating_add(int64_t a, int64_t b) {
  return a > INT64_MAX - b ? INT64_MAX : a + b;
}

// Elements in all the tensors, saturating at INT64_MAX (sizes come from the dump); a negative
// size counts as 0.
int64_t numel(const std::vector<std::vector<int64_t>>& sizes) {
  int64_t total = 0;
  for (const auto& shape : sizes) {
    int64_t n = 1;
    for (const int64_t d : shape) n = d <= 0 ? 0 : (n > INT64_MAX / d ? INT64_MAX : n * d);
    total = saturating_add(total, n);
  }
  return total;
}

// One rank's view of its dump: where it stands on each group.
struct RankView {
  const FrRankDump* dump = nullptr;
  std::map<size_t, int64_t> recorded_seq;  // group -> highest collective seq in the buffer
  std::vector<char> done;                  // per entry: it finished (its coalescing group did)
  std::optional<size_t> oldest_open;       // entry index
  bool wrapped = false;
};

using CallKey = std::pair<size_t, int64_t>;  // (group, collective seq)

// How members of one collective differ, weakest first (a difference in op explains the rest).
enum class MismatchKind { kNone, kDtypes, kSizes, kOp };
constexpr const char* kMismatchKindNames[] = {"", "dtypes", "sizes", "op"};
using RankEntry = std::pair<int64_t, size_t>;  // (rank, entry index)

class Analyzer {
 public:
  Analyzer(std::vector<FrRankDump> dumps, int64_t world_hint) : dumps_(std::move(dumps)) {
    std::stable_sort(dumps_.begin(), dumps_.end(),
                     [](const FrRankDump& a, const FrRankDump& b) { return a.rank < b.rank; });
    // One dump per rank: a second is said and left out of everything.
    for (size_t i = 1; i < dumps_.size();) {
      if (dumps_[i].rank != dumps_[i - 1].rank) {
        ++i;
        continue;
      }
      conflicts_.push_back(fmt::format("rank {} has two dumps ({} and {}); the first is used",
                                       dumps_[i].rank, dumps_[i - 1].file, dumps_[i].file));
      dumps_.erase(dumps_.begin() + static_cast<ptrdiff_t>(i));
    }
    grow_world(std::max<int64_t>(world_hint, 0) - 1, "the world size");
    for (const FrRankDump& d : dumps_) grow_world(d.rank, d.file);
  }

  FrAnalysis run() {
    collect_groups();
    index_ranks();
    init_ranks();
    find_mismatches();
    find_divergences();
    find_open_calls();
    blame();
    tell_ranks();
    note_evidence();
    return std::move(out_);
  }

 private:
  // Makes the world hold `rank`, refusing ranks outside [0, kMaxFrWorld) (-1: nothing to hold).
  void grow_world(int64_t rank, const std::string& where) {
    if (rank < -1 || rank >= kMaxFrWorld)
      throw value_error(fmt::format("{}: rank {} is outside the 0 to {} ranks fr analyze handles",
                                    where, rank, kMaxFrWorld - 1));
    out_.world_size = std::max(out_.world_size, rank + 1);
  }

  const FrGroup& group(size_t g) const { return out_.groups[g]; }
  const FrEntry& entry(int64_t rank, size_t index) const {
    return views_[static_cast<size_t>(rank)].dump->dump.entries[index];
  }
  bool has_dump(int64_t rank) const { return views_[static_cast<size_t>(rank)].dump != nullptr; }

  // The groups the entries name, with their members from pg_config where it lists them.
  void collect_groups() {
    std::map<size_t, std::set<int64_t>> naming;
    std::map<size_t, std::pair<std::vector<int64_t>, int64_t>> config;  // members, from rank
    for (const FrRankDump& d : dumps_) {
      for (const FrEntry& e : d.dump.entries) {
        auto [it, fresh] = group_index_.emplace(e.pg_name, out_.groups.size());
        if (fresh)
          out_.groups.push_back({e.pg_name, e.pg_desc, label_of(e.pg_name, e.pg_desc), {}, "", 0});
        naming[it->second].insert(d.rank);
      }
    }
    for (const FrRankDump& d : dumps_) {
      for (const auto& [key, cfg] : d.dump.pg_config) {
        const auto it = group_index_.find(key);
        if (key.empty() || cfg.ranks.empty() || it == group_index_.end()) continue;
        std::vector<int64_t> members = cfg.ranks;
        std::sort(members.begin(), members.end());
        members.erase(std::unique(members.begin(), members.end()), members.end());
        grow_world(members.front(), d.file + " pg_config");
        grow_world(members.back(), d.file + " pg_config");
        auto [known, fresh] = config.emplace(it->second, std::pair(members, d.rank));
        if (!fresh && known->second.first != members)
          conflicts_.push_back(fmt::format(
              "the pg_config of rank {} gives {} the ranks [{}], that of rank {} [{}]; the "
              "first is used",
              known->second.second, group(it->second).label, rank_ranges(known->second.first),
              d.rank, rank_ranges(members)));
      }
    }
    const std::vector<int64_t> sizes = sizes_from_calls();
    // Without pg_config (Gloo), a last rank that left no dump is counted only by WORLD's
    // gathers and reduce-scatters.
    for (size_t g = 0; g < out_.groups.size(); ++g)
      if (out_.groups[g].desc == "default_pg" && !config.contains(g) &&
          sizes[g] > out_.world_size) {
        conflicts_.push_back(fmt::format(
            "the sizes of WORLD's collectives say the job has {} ranks; the dumps name {}",
            sizes[g], out_.world_size));
        grow_world(sizes[g] - 1, "the sizes of WORLD's collectives");
      }
    for (size_t g = 0; g < out_.groups.size(); ++g) {
      FrGroup& grp = out_.groups[g];
      if (const auto it = config.find(g); it != config.end()) {
        grp.members = it->second.first;
        grp.members_from = "pg_config";
      } else if (grp.desc == "default_pg") {
        grp.members.resize(static_cast<size_t>(out_.world_size));
        for (int64_t r = 0; r < out_.world_size; ++r) grp.members[static_cast<size_t>(r)] = r;
        grp.members_from = "world";
      } else {
        grp.members_from = "dumps";
        grp.members.assign(naming[g].begin(), naming[g].end());
        if (sizes[g] > static_cast<int64_t>(grp.members.size()))
          grp.unnamed_members = sizes[g] - static_cast<int64_t>(grp.members.size());
      }
    }
  }

  // Per group, the most members any gather or reduce-scatter on it implies (its output holds one
  // input per member, or its input one output per member); 0 without one. One pass over every
  // entry.
  std::vector<int64_t> sizes_from_calls() const {
    std::vector<int64_t> size(out_.groups.size(), 0);
    for (const FrRankDump& d : dumps_)
      for (const FrEntry& e : d.dump.entries) {
        const std::string_view op = op_name(e);
        const bool gather = op.find("all_gather") != std::string_view::npos ||
                            op.find("allgather") != std::string_view::npos;
        const bool scatter = op.find("reduce_scatter") != std::string_view::npos;
        if (!gather && !scatter) continue;
        const int64_t in = numel(e.input_sizes), out = numel(e.output_sizes);
        int64_t& n = size[group_index_.at(e.pg_name)];
        if (gather && in > 0 && out % in == 0) n = std::max(n, out / in);
        if (scatter && out > 0 && in % out == 0) n = std::max(n, in / out);
      }
    for (int64_t& n : size) n = std::min(n, kMaxFrWorld);
    return size;
  }

  void index_ranks() {
    views_.resize(static_cast<size_t>(out_.world_size));
    for (const FrRankDump& d : dumps_) {
      RankView& v = views_[static_cast<size_t>(d.rank)];
      v.dump = &d;
      const auto& entries = d.dump.entries;
      v.wrapped = !entries.empty() && entries.front().record_id > 0;
      // NCCL leaves the calls inside a coalescing group "scheduled" for ever and finishes only
      // the group's closing entry (same group and seq): they finish with it.
      std::set<std::tuple<size_t, bool, int64_t>> finished_groups;
      auto key = [&](const FrEntry& e) {
        return std::tuple(group_index_.at(e.pg_name), e.is_p2p,
                          e.is_p2p ? e.p2p_seq_id : e.collective_seq_id);
      };
      for (const FrEntry& e : entries)
        if (closes_coalesced(e) && finished(e)) finished_groups.insert(key(e));
      v.done.resize(entries.size());
      for (size_t i = 0; i < entries.size(); ++i) {
        const FrEntry& e = entries[i];
        v.done[i] = finished(e) || finished_groups.count(key(e)) != 0;
        if (!v.oldest_open && !v.done[i]) v.oldest_open = i;
        if (e.is_p2p || closes_coalesced(e)) continue;
        const size_t g = group_index_.at(e.pg_name);
        int64_t& seq = v.recorded_seq[g];
        seq = std::max(seq, e.collective_seq_id);
        std::vector<RankEntry>& members = calls_[{g, e.collective_seq_id}];
        if (members.empty() || members.back().first != d.rank) members.emplace_back(d.rank, i);
      }
    }
  }

  // How far `rank` got on group `g`: its last collective seq there; nothing when its buffer
  // wrapped past every call it made on the group, or holds no call at all. (pg_status's counters
  // would survive a wrap, but they count sends and recvs too.)
  std::optional<int64_t> progress(int64_t rank, size_t g) const {
    const RankView& v = views_[static_cast<size_t>(rank)];
    if (const auto it = v.recorded_seq.find(g); it != v.recorded_seq.end()) return it->second;
    // A recorder's dump is the rank's whole history: holding no call, it made none.
    if (v.wrapped || (v.dump->dump.entries.empty() && !v.dump->dump.recorded)) return std::nullopt;
    return 0;
  }

  static std::vector<FrVariant> variants_of(std::map<std::string, std::vector<int64_t>> by_text,
                                            bool most_first) {
    std::vector<FrVariant> out;
    for (auto& [text, ranks] : by_text) out.push_back({text, std::move(ranks)});
    std::sort(out.begin(), out.end(), [&](const FrVariant& a, const FrVariant& b) {
      if (a.ranks.size() != b.ranks.size())
        return most_first ? a.ranks.size() > b.ranks.size() : a.ranks.size() < b.ranks.size();
      return a.ranks.front() < b.ranks.front();
    });
    return out;
  }

  int64_t created(const std::vector<RankEntry>& members) const {
    int64_t earliest = INT64_MAX;
    for (const auto& [rank, i] : members)
      earliest = std::min(earliest, entry(rank, i).time_created_ns.value_or(INT64_MAX));
    return earliest;
  }

  void find_mismatches() {
    for (const auto& [key, members] : calls_) {
      if (members.size() < 2) continue;
      const FrEntry& first = entry(members.front().first, members.front().second);
      // Members are told apart by what they must agree on; each side shows its first rank's call.
      std::map<std::string, std::vector<int64_t>> by_key;
      std::map<std::string, std::string> text;
      MismatchKind kind = MismatchKind::kNone;
      for (const auto& [rank, i] : members) {
        const FrEntry& e = entry(rank, i);
        const std::string k = agreed_call(e);
        by_key[k].push_back(rank);
        text.emplace(k, call_text(e));
        if (op_name(e) != op_name(first))
          kind = std::max(kind, MismatchKind::kOp);
        else if (agreed_sizes(e) != agreed_sizes(first))
          kind = std::max(kind, MismatchKind::kSizes);
        else if (agreed_dtypes(e) != agreed_dtypes(first))
          kind = std::max(kind, MismatchKind::kDtypes);
      }
      // All-to-all sizes differ by rank; together, what the members send must be what they
      // receive (when every member recorded the call).
      bool uneven = false;
      if (kind == MismatchKind::kNone && all_to_all(op_name(first)) &&
          members.size() == group(key.first).members.size()) {
        int64_t in_total = 0, out_total = 0;
        for (const auto& [rank, i] : members) {
          in_total = saturating_add(in_total, numel(entry(rank, i).input_sizes));
          out_total = saturating_add(out_total, numel(entry(rank, i).output_sizes));
        }
        uneven = in_total != out_total;
      }
      if (kind == MismatchKind::kNone && !uneven) continue;
      std::map<std::string, std::vector<int64_t>> by_text;
      for (auto& [k, ranks] : by_key) {
        auto& side = by_text[text.at(k)];
        side.insert(side.end(), ranks.begin(), ranks.end());
        std::sort(side.begin(), side.end());
      }
      FrMismatch m;
      m.group = key.first;
      m.seq = key.second;
      m.kind = uneven ? "sizes" : kMismatchKindNames[static_cast<size_t>(kind)];
      m.variants = variants_of(std::move(by_text), true);
      m.created_ns = created(members);
      // The sides other than the largest; an even split names every side, unless the other
      // groups of its mesh dim say which is wrong.
      bool even = m.variants.size() > 1 && m.variants[0].ranks.size() == m.variants[1].ranks.size();
      if (even && break_tie(key, m.variants, [&](const FrEntry& e) { return call_text(e); })) {
        std::reverse(m.variants.begin(), m.variants.end());
        even = false;
      }
      if (!uneven)
        for (size_t v = even ? 0 : 1; v < m.variants.size(); ++v)
          m.culprits.insert(m.culprits.end(), m.variants[v].ranks.begin(),
                            m.variants[v].ranks.end());
      std::sort(m.culprits.begin(), m.culprits.end());
      out_.mismatches.push_back(std::move(m));
    }
    std::stable_sort(out_.mismatches.begin(), out_.mismatches.end(),
                     [](const FrMismatch& a, const FrMismatch& b) {
                       return std::tie(a.created_ns, a.group, a.seq) <
                              std::tie(b.created_ns, b.group, b.seq);
                     });
  }

  // A call its members split evenly on (an extra call in a pair tells nothing by itself): the
  // other groups of the same DeviceMesh dim run the same program, so what their members called
  // at the same seq (`text_of` their entries) says which side is the odd one. When the votes
  // decide (no tie left at the top), sorts `variants` by ranks plus votes, fewest first, and
  // returns true; else leaves them. Groups that are not a mesh dim's are not assumed alike.
  template <typename TextOf>
  bool break_tie(const CallKey& key, std::vector<FrVariant>& variants, TextOf text_of) const {
    const FrGroup& mine = group(key.first);
    if (!mine.desc.starts_with("mesh_")) return false;
    std::map<std::string, size_t> votes;
    for (size_t g = 0; g < out_.groups.size(); ++g) {
      if (g == key.first || group(g).desc != mine.desc ||
          group(g).members.size() != mine.members.size())
        continue;
      const auto it = calls_.find({g, key.second});
      if (it == calls_.end()) continue;
      for (const auto& [rank, i] : it->second) ++votes[text_of(entry(rank, i))];
    }
    const auto weight = [&](const FrVariant& v) {
      const auto it = votes.find(v.text);
      return v.ranks.size() + (it == votes.end() ? size_t{0} : it->second);
    };
    std::vector<FrVariant> sorted = variants;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [&](const FrVariant& a, const FrVariant& b) { return weight(a) < weight(b); });
    if (weight(sorted[sorted.size() - 1]) == weight(sorted[sorted.size() - 2])) return false;
    variants = std::move(sorted);
    return true;
  }

  // The ranks whose dumps hold a call from a user line (file and line).
  const std::set<size_t>& callers_of(const std::string& filename, int64_t line) {
    if (!callers_indexed_) {
      callers_indexed_ = true;
      for (size_t r = 0; r < views_.size(); ++r) {
        if (views_[r].dump == nullptr) continue;
        for (const FrEntry& e : views_[r].dump->dump.entries)
          if (const FrFrame* u = user_frame(e)) callers_[{u->filename, u->line}].insert(r);
      }
    }
    return callers_[{filename, line}];
  }

  // The collective every root is missing from, when the fewer ranks waiting in it called it from
  // a line no other rank ever called (`if rank == 3: dist.all_reduce(...)`): an extra call by
  // them, not a call the roots skipped. Null otherwise (or without frames).
  const FrOpenCall* extra_call(const std::vector<int64_t>& roots) {
    const FrOpenCall* call = call_missing(roots.front());
    // Fewer ranks in the call than went on without it (a pair tells nothing), since the line
    // that made it may as well be one the others skipped (`if rank != 3: ...`).
    if (call == nullptr || call->p2p || call->waiting.empty() ||
        call->waiting.size() >= call->missing.size())
      return nullptr;
    for (const int64_t r : roots)
      if (call_missing(r) != call) return nullptr;
    std::optional<std::pair<std::string, int64_t>> line;
    for (const int64_t w : call->waiting) {
      const RankView& v = views_[static_cast<size_t>(w)];
      if (v.dump == nullptr || !v.oldest_open) return nullptr;
      const FrFrame* f = user_frame(v.dump->dump.entries[*v.oldest_open]);
      if (f == nullptr || (line && *line != std::pair(f->filename, f->line))) return nullptr;
      line = {f->filename, f->line};
    }
    for (const size_t r : callers_of(line->first, line->second))
      if (!std::binary_search(call->waiting.begin(), call->waiting.end(), static_cast<int64_t>(r)))
        return nullptr;
    return call;
  }

  void blame_extra(const FrOpenCall& call, const std::vector<int64_t>& roots) {
    out_.verdict = FrAnalysis::Verdict::kDeadlock;
    out_.cause = HangCause::kExtraCollective;
    out_.culprits = call.waiting;
    out_.summary.push_back(fmt::format(
        "{} called {} on {} seq {} at {}, a line no other rank calls; {} went on without it",
        ranks_text(call.waiting), call.call, group(call.group).label, call.seq, call.site,
        ranks_text(roots)));
  }

  // An even divergence where one side called from a line no rank outside it ever called (a call
  // planted on one rank: `if rank == 3: dist.all_reduce(...)`): that side is the odd one, moved
  // first. False when no single side is.
  bool only_side_calling(const std::vector<RankEntry>& members, std::vector<FrVariant>& sites) {
    std::optional<size_t> odd;
    for (size_t v = 0; v < sites.size(); ++v) {
      const std::vector<int64_t>& side = sites[v].ranks;
      const auto in_side = [&](int64_t r) { return std::ranges::binary_search(side, r); };
      const auto it = std::ranges::find_if(
          members, [&](const RankEntry& m) { return m.first == side.front(); });
      const FrFrame* f = it == members.end() ? nullptr : user_frame(entry(it->first, it->second));
      if (f == nullptr) return false;
      const std::set<size_t>& callers = callers_of(f->filename, f->line);
      if (std::ranges::all_of(callers,
                              [&](size_t r) { return in_side(static_cast<int64_t>(r)); })) {
        if (odd) return false;
        odd = v;
      }
    }
    if (!odd) return false;
    std::rotate(sites.begin(), sites.begin() + static_cast<std::ptrdiff_t>(*odd),
                sites.begin() + static_cast<std::ptrdiff_t>(*odd) + 1);
    return true;
  }

  // Each group's first collective whose members came from different lines (dumps with frames).
  void find_divergences() {
    std::set<size_t> seen;
    for (const auto& [key, members] : calls_) {
      if (seen.count(key.first) != 0) continue;
      std::map<std::string, std::vector<int64_t>> by_site;
      for (const auto& [rank, i] : members) {
        const FrEntry& e = entry(rank, i);
        if (!e.frames.empty()) by_site[site_text(e)].push_back(rank);
      }
      if (by_site.size() < 2) continue;
      seen.insert(key.first);
      std::vector<FrVariant> sites = variants_of(std::move(by_site), false);
      const size_t n = sites.size();  // fewest first: a tie at the top is an even split
      if (sites[n - 1].ranks.size() == sites[n - 2].ranks.size() &&
          !only_side_calling(members, sites))
        break_tie(key, sites,
                  [](const FrEntry& e) { return e.frames.empty() ? "" : site_text(e); });
      out_.divergences.push_back({key.first, key.second, std::move(sites), created(members)});
    }
    std::stable_sort(out_.divergences.begin(), out_.divergences.end(),
                     [](const FrDivergence& a, const FrDivergence& b) {
                       return std::tie(a.created_ns, a.group, a.seq) <
                              std::tie(b.created_ns, b.group, b.seq);
                     });
  }

  // Where a member stands against collective (g, seq) that others wait in.
  void place_member(FrOpenCall& call, int64_t member) const {
    if (!has_dump(member)) return call.no_dump.push_back(member);
    const std::optional<int64_t> reached = progress(member, call.group);
    if (!reached) return call.no_dump.push_back(member);
    if (*reached < call.seq) return call.missing.push_back(member);
    const RankView& v = views_[static_cast<size_t>(member)];
    if (!v.oldest_open) return;  // it finished the call, or went past it
    const FrEntry& open = entry(member, *v.oldest_open);
    if (!open.is_p2p && group_index_.at(open.pg_name) == call.group &&
        open.collective_seq_id == call.seq)
      return;  // waiting in it too
    const auto here = calls_.find({call.group, call.seq});
    if (here == calls_.end()) return;
    // Members are listed in rank order.
    const auto at =
        std::lower_bound(here->second.begin(), here->second.end(), RankEntry{member, 0});
    if (at != here->second.end() && at->first == member && !v.done[at->second] &&
        at->second > *v.oldest_open)
      call.elsewhere.push_back(member);
  }

  // Whether `peer` waits in the send or recv that matches `rank`'s open one on group g: its oldest
  // open call, or one batched with it (a batch of sends and recvs is posted at once).
  bool peer_posted_match(int64_t rank, size_t g, bool send, int64_t peer) const {
    const RankView& v = views_[static_cast<size_t>(peer)];
    if (!v.oldest_open || group(g).members_from == "dumps") return false;
    const auto& entries = v.dump->dump.entries;
    const auto& members = group(g).members;
    const FrEntry& oldest = entries[*v.oldest_open];
    for (size_t i = *v.oldest_open; i < entries.size(); ++i) {
      const FrEntry& e = entries[i];
      if (v.done[i] || !e.is_p2p || group_index_.at(e.pg_name) != g) continue;
      // Calls run in order on a rank's stream: past its oldest open call, only calls batched
      // with it (one coalescing group: the same p2p seq on the same group) are posted.
      if (i != *v.oldest_open &&
          !(oldest.is_p2p && oldest.pg_name == e.pg_name && oldest.p2p_seq_id == e.p2p_seq_id))
        break;
      const std::optional<P2pEnds> ends = p2p_ends(e);
      if (!ends || (op_name(e) == "send") == send) continue;
      const int64_t other = send ? (ends->src ? *ends->src : -1) : ends->dst;
      if (other >= 0 && static_cast<size_t>(other) < members.size() &&
          members[static_cast<size_t>(other)] == rank)
        return true;
    }
    return false;
  }

  void find_open_calls() {
    std::map<CallKey, size_t> collective_call;
    for (int64_t r = 0; r < out_.world_size; ++r) {
      const RankView& v = views_[static_cast<size_t>(r)];
      if (!v.oldest_open) continue;
      const FrEntry& e = entry(r, *v.oldest_open);
      const size_t g = group_index_.at(e.pg_name);
      FrRank& me = rank_record(r);
      if (!e.is_p2p) {
        auto [it, fresh] =
            collective_call.emplace(CallKey{g, e.collective_seq_id}, out_.open_calls.size());
        if (fresh) {
          FrOpenCall call;
          call.group = g;
          call.seq = e.collective_seq_id;
          call.call = call_text(e);
          call.site = site_text(e);
          for (const int64_t m : group(g).members) place_member(call, m);
          call.unnamed = group(g).unnamed_members;
          if (std::find(group(g).members.begin(), group(g).members.end(), r) ==
              group(g).members.end())
            odd_.push_back(fmt::format("rank {} calls on {}, whose members [{}] leave it out", r,
                                       group(g).label, rank_ranges(group(g).members)));
          out_.open_calls.push_back(std::move(call));
        }
        FrOpenCall& call = out_.open_calls[it->second];
        call.waiting.push_back(r);
        me.open_call = it->second;
        for (const auto* list : {&call.missing, &call.elsewhere, &call.no_dump})
          for (const int64_t m : *list)
            if (m != r) me.waits_for.push_back(m);
      } else {
        const std::optional<P2pEnds> ends = p2p_ends(e);
        const bool send = op_name(e) == "send";
        const auto& members = group(g).members;
        std::optional<int64_t> peer;
        // Group ranks name members in order, which the dumps alone do not give.
        if (ends && group(g).members_from != "dumps") {
          const std::optional<int64_t> local = send ? std::optional(ends->dst) : ends->src;
          if (local && static_cast<size_t>(*local) < members.size())
            peer = members[static_cast<size_t>(*local)];
        }
        FrOpenCall call;
        call.group = g;
        call.seq = e.p2p_seq_id;
        call.call = call_text(e);
        call.site = site_text(e);
        call.p2p = true;
        call.waiting = {r};
        if (!peer) {
          odd_.push_back(fmt::format("rank {}'s {} on {} names no peer the analysis can place", r,
                                     printable(e.profiling_name, 64), group(g).label));
        } else {
          call.call += fmt::format(" {} rank {}", send ? "to" : "from", *peer);
          if (!has_dump(*peer))
            call.no_dump.push_back(*peer);
          else if (!peer_posted_match(r, g, send, *peer)) {
            (views_[static_cast<size_t>(*peer)].oldest_open ? call.elsewhere : call.missing)
                .push_back(*peer);
          }
          for (const auto* list : {&call.missing, &call.elsewhere, &call.no_dump})
            me.waits_for.insert(me.waits_for.end(), list->begin(), list->end());
        }
        me.open_call = out_.open_calls.size();
        out_.open_calls.push_back(std::move(call));
      }
      std::sort(me.waits_for.begin(), me.waits_for.end());
      me.waits_for.erase(std::unique(me.waits_for.begin(), me.waits_for.end()), me.waits_for.end());
    }
  }

  void init_ranks() {
    out_.ranks.resize(static_cast<size_t>(out_.world_size));
    for (int64_t i = 0; i < out_.world_size; ++i) {
      FrRank& r = out_.ranks[static_cast<size_t>(i)];
      r.rank = i;
      const RankView& v = views_[static_cast<size_t>(i)];
      if (v.dump == nullptr) continue;
      const auto& entries = v.dump->dump.entries;
      r.state = v.oldest_open ? FrRank::State::kBlocked : FrRank::State::kIdle;
      r.file = v.dump->file;
      r.entries = entries.size();
      r.first_record = entries.empty() ? 0 : entries.front().record_id;
    }
  }

  FrRank& rank_record(int64_t r) { return out_.ranks[static_cast<size_t>(r)]; }

  // The ranks the blocked ones wait for, followed to those that wait for nobody: the culprits;
  // failing those, a cycle of waits.
  void blame() {
    index_missing();
    // A rank alone in a call every other member finished, that nobody waits for, is a dump taken
    // as the call finished (or a rank held outside torch.distributed): said, not blamed.
    std::vector<int64_t> blocked, alone;
    std::vector<char> waited_for(out_.ranks.size(), 0);
    for (const FrRank& r : out_.ranks)
      for (const int64_t w : r.waits_for) waited_for[static_cast<size_t>(w)] = 1;
    for (const FrRank& r : out_.ranks) {
      if (r.state != FrRank::State::kBlocked) continue;
      if (stuck_alone(r) && !waited_for[static_cast<size_t>(r.rank)])
        alone.push_back(r.rank);
      else
        blocked.push_back(r.rank);
    }
    for (const int64_t r : alone) {
      const FrOpenCall& c = out_.open_calls[*out_.ranks[static_cast<size_t>(r)].open_call];
      odd_.push_back(fmt::format(
          "rank {}'s {} on {} seq {} is not finished in its dump, though every other member "
          "finished it (a dump taken as it finished, or the rank is held outside "
          "torch.distributed)",
          r, c.call, group(c.group).label, c.seq));
    }
    // The ranks the waits lead to that wait for nobody, or only in a call the others finished.
    std::vector<char> seen(out_.ranks.size(), 0);
    std::vector<int64_t> stack = blocked, roots;
    for (const int64_t r : blocked) seen[static_cast<size_t>(r)] = 1;
    while (!stack.empty()) {
      const int64_t r = stack.back();
      stack.pop_back();
      const FrRank& rr = out_.ranks[static_cast<size_t>(r)];
      if (waited_for[static_cast<size_t>(r)] &&
          (rr.state != FrRank::State::kBlocked || stuck_alone(rr)))
        roots.push_back(r);
      for (const int64_t w : rr.waits_for)
        if (!seen[static_cast<size_t>(w)]) {
          seen[static_cast<size_t>(w)] = 1;
          stack.push_back(w);
        }
    }
    std::sort(roots.begin(), roots.end());
    // A rank whose dump shows it went on without the call is the surest culprit; then a cycle of
    // ranks with dumps; a rank that left no dump only explains what nothing else does.
    std::vector<int64_t> went_on;
    for (const int64_t r : roots)
      if (has_dump(r) && !lost_[static_cast<size_t>(r)]) went_on.push_back(r);
    const std::vector<int64_t> cycle =
        went_on.empty() ? find_cycle(blocked) : std::vector<int64_t>{};
    if (!went_on.empty()) {
      if (const FrOpenCall* extra = extra_call(went_on))
        blame_extra(*extra, went_on);
      else
        blame_roots(went_on);
    } else if (!cycle.empty()) {
      blame_cycle(cycle);
    } else if (!roots.empty()) {
      blame_roots(roots);
    } else if (const FrOpenCall* unnamed = call_with_unnamed(); unnamed != nullptr) {
      out_.verdict = FrAnalysis::Verdict::kDeadlock;
      out_.cause = HangCause::kMissingRank;
      const FrGroup& g = group(unnamed->group);
      out_.summary.push_back(fmt::format(
          "{} {} in {} on {} seq {} for {} member{} that no dump names: its sizes say the group "
          "has {} members, the dumps name {} ({}), and pg_config lists none",
          ranks_text(unnamed->waiting), unnamed->waiting.size() > 1 ? "wait" : "waits",
          unnamed->call, g.label, unnamed->seq, unnamed->unnamed, unnamed->unnamed > 1 ? "s" : "",
          static_cast<int64_t>(g.members.size()) + unnamed->unnamed, g.members.size(),
          rank_ranges(g.members)));
    } else if (!blocked.empty()) {
      const FrOpenCall& call =
          out_.open_calls[*out_.ranks[static_cast<size_t>(blocked.front())].open_call];
      out_.verdict = FrAnalysis::Verdict::kStall;
      out_.cause = HangCause::kTimeout;
      out_.summary.push_back(fmt::format(
          "{} {} blocked in {} on {} seq {} with every member there, called the same way: the "
          "dumps show no rank at fault",
          ranks_text(blocked), blocked.size() > 1 ? "are" : "is", call.call,
          group(call.group).label, call.seq));
      out_.summary.push_back(
          "look at what the dumps cannot show: the network, a GPU, or a rank stuck outside "
          "torch.distributed");
    }
    if (!out_.mismatches.empty()) blame_mismatch();
    if (out_.verdict != FrAnalysis::Verdict::kClean && !out_.divergences.empty()) {
      const FrDivergence& d = out_.divergences.front();
      std::vector<std::string> parts;
      for (const FrVariant& s : d.sites)
        parts.push_back(fmt::format("{} at {}", ranks_text(s.ranks), s.text));
      out_.summary.push_back(fmt::format("first divergence: {} seq {} was called by {}",
                                         group(d.group).label, d.seq, fmt::join(parts, "; ")));
    }
  }

  // Per rank, the first open call it is missing from or has no record for (SIZE_MAX: none), and
  // whether its dump lacks a group it is waited for in: one pass over the open calls.
  void index_missing() {
    first_missing_.assign(out_.ranks.size(), SIZE_MAX);
    lost_.assign(out_.ranks.size(), 0);
    for (size_t c = 0; c < out_.open_calls.size(); ++c) {
      const FrOpenCall& call = out_.open_calls[c];
      for (const auto* list : {&call.missing, &call.no_dump})
        for (const int64_t r : *list) {
          size_t& first = first_missing_[static_cast<size_t>(r)];
          first = std::min(first, c);
        }
      for (const int64_t r : call.no_dump) lost_[static_cast<size_t>(r)] = 1;
    }
  }

  const FrOpenCall* call_with_unnamed() const {
    for (const FrOpenCall& c : out_.open_calls)
      if (c.unnamed > 0) return &c;
    return nullptr;
  }

  const FrOpenCall* call_missing(int64_t root) const {
    const size_t c = first_missing_[static_cast<size_t>(root)];
    return c == SIZE_MAX ? nullptr : &out_.open_calls[c];
  }

  // "all_reduce(Float[4]) on WORLD seq 1 at train.py:28 in step": its newest record.
  std::string last_call_text(int64_t rank) const {
    const auto& entries = views_[static_cast<size_t>(rank)].dump->dump.entries;
    if (entries.empty()) return "";
    const FrEntry& e = entries.back();
    const FrGroup& g = group(group_index_.at(e.pg_name));
    return fmt::format("{} on {} {} at {}", call_text(e), g.label,
                       e.is_p2p ? fmt::format("p2p seq {}", e.p2p_seq_id)
                                : fmt::format("seq {}", e.collective_seq_id),
                       site_text(e));
  }

  void blame_roots(const std::vector<int64_t>& roots) {
    out_.verdict = FrAnalysis::Verdict::kDeadlock;
    out_.culprits = roots;
    bool any_collective = false;
    // Roots with the same story share a sentence.
    std::vector<std::pair<std::string, std::vector<int64_t>>> lines;
    for (const int64_t root : roots) {
      const FrOpenCall* call = call_missing(root);
      std::string what;
      if (call == nullptr) {
        what = "is waited for";
      } else {
        any_collective |= !call->p2p;
        // A collective is waited in by its members; a send waits for the peer's recv (and a
        // recv for its send): "the recv from rank 0 on WORLD that rank 0's send(...) waits for".
        const bool send = call->call.starts_with("send");
        const std::string where =
            call->p2p
                ? fmt::format("the {} {} rank {} on {}", send ? "recv" : "send",
                              send ? "from" : "to", call->waiting.front(), group(call->group).label)
                : fmt::format("{} on {} seq {}", call->call, group(call->group).label, call->seq);
        const std::string waited =
            call->p2p
                ? fmt::format("that rank {}'s {} waits for", call->waiting.front(), call->call)
                : fmt::format("that {} {} in", ranks_text(call->waiting),
                              call->waiting.size() > 1 ? "wait" : "waits");
        if (!has_dump(root)) {
          what =
              fmt::format("left no dump; {} wait for it in {}", ranks_text(call->waiting), where);
        } else if (!progress(root, call->group)) {
          what = fmt::format(
              "has no record of {} in its dump (its buffer wrapped); {} wait for it in {}",
              group(call->group).label, ranks_text(call->waiting), where);
        } else {
          const FrRank& r = out_.ranks[static_cast<size_t>(root)];
          const std::string last = last_call_text(root);
          std::string then =
              last.empty() ? "; it recorded no call" : "; its last call, " + last + ", finished";
          if (r.open_call) {
            const FrOpenCall& held = out_.open_calls[*r.open_call];
            then = fmt::format("; it is held in {} on {} seq {}, which every other member finished",
                               held.call, group(held.group).label, held.seq);
          }
          what = fmt::format("never called {} {} (at {}){}", where, waited, call->site, then);
        }
      }
      auto it = std::find_if(lines.begin(), lines.end(),
                             [&](const auto& line) { return line.first == what; });
      if (it == lines.end())
        lines.emplace_back(what, std::vector<int64_t>{root});
      else
        it->second.push_back(root);
    }
    out_.cause = any_collective ? HangCause::kMissingRank : HangCause::kUnmatchedPointToPoint;
    constexpr size_t kShown = 4;
    for (size_t i = 0; i < lines.size() && i < kShown; ++i)
      out_.summary.push_back(fmt::format("{} {}", ranks_text(lines[i].second), lines[i].first));
    if (lines.size() > kShown)
      out_.summary.push_back(
          fmt::format("and {} more stories (see per rank)", lines.size() - kShown));
  }

  // A rank whose oldest open collective every other member finished: it waits for nobody there,
  // so whatever holds it is outside what the dumps show, and ranks waiting for it are held by it.
  bool stuck_alone(const FrRank& r) const {
    if (!r.open_call || !r.waits_for.empty()) return false;
    const FrOpenCall& c = out_.open_calls[*r.open_call];
    return !c.p2p && c.unnamed == 0 && c.waiting.size() == 1 && group(c.group).members.size() > 1;
  }

  // A cycle of waits among blocked ranks: a depth-first walk (explicit stack) over every edge
  // between blocked ranks, lowest first, from each blocked rank in turn; each rank is walked once.
  std::vector<int64_t> find_cycle(const std::vector<int64_t>& blocked) const {
    enum : char { kNew, kOnWalk, kDone };
    std::vector<char> mark(out_.ranks.size(), kNew);
    auto is_blocked = [&](int64_t r) {
      return out_.ranks[static_cast<size_t>(r)].state == FrRank::State::kBlocked;
    };
    for (const int64_t start : blocked) {
      if (mark[static_cast<size_t>(start)] != kNew) continue;
      std::vector<std::pair<int64_t, size_t>> stack{{start, 0}};  // rank, next edge
      mark[static_cast<size_t>(start)] = kOnWalk;
      while (!stack.empty()) {
        auto& [r, next] = stack.back();
        const auto& waits = out_.ranks[static_cast<size_t>(r)].waits_for;
        if (next == waits.size()) {
          mark[static_cast<size_t>(r)] = kDone;
          stack.pop_back();
          continue;
        }
        const int64_t to = waits[next++];
        if (!is_blocked(to) || mark[static_cast<size_t>(to)] == kDone) continue;
        if (mark[static_cast<size_t>(to)] == kOnWalk) {
          std::vector<int64_t> cycle;
          for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
            cycle.push_back(it->first);
            if (it->first == to) break;
          }
          std::reverse(cycle.begin(), cycle.end());
          return cycle;
        }
        mark[static_cast<size_t>(to)] = kOnWalk;
        stack.emplace_back(to, 0);
      }
    }
    return {};
  }

  void blame_cycle(const std::vector<int64_t>& cycle) {
    out_.verdict = FrAnalysis::Verdict::kDeadlock;
    out_.cycles.push_back(cycle);
    // Rank b, which rank a waits for, went ahead when the program calls a's call before b's:
    // it skipped a's. Without frames to order the calls, every member is named.
    std::vector<std::string> ahead;
    for (size_t i = 0; i < cycle.size(); ++i) {
      const int64_t a = cycle[i], b = cycle[(i + 1) % cycle.size()];
      const std::string site_a = open_site(a), site_b = open_site(b);
      if (site_a == site_b || program_order(site_a, site_b) <= 0) continue;
      out_.culprits.push_back(b);
      ahead.push_back(fmt::format(
          "rank {} went ahead: it waits at {}, and the ranks' histories call {} (where rank {} "
          "waits for it) first",
          b, site_b, site_a, a));
    }
    if (out_.culprits.empty()) out_.culprits = cycle;
    std::sort(out_.culprits.begin(), out_.culprits.end());
    out_.culprits.erase(std::unique(out_.culprits.begin(), out_.culprits.end()),
                        out_.culprits.end());
    bool all_p2p = true, all_send = true, all_recv = true;
    std::vector<std::string> parts;
    for (size_t i = 0; i < cycle.size(); ++i) {
      const FrRank& r = out_.ranks[static_cast<size_t>(cycle[i])];
      const FrOpenCall& c = out_.open_calls[*r.open_call];
      all_p2p &= c.p2p;
      all_send &= c.call.starts_with("send");
      all_recv &= c.call.starts_with("recv");
      parts.push_back(fmt::format("rank {} waits in {} on {}{} for rank {}", r.rank, c.call,
                                  group(c.group).label, c.p2p ? "" : fmt::format(" seq {}", c.seq),
                                  cycle[(i + 1) % cycle.size()]));
    }
    out_.cause = !all_p2p                        ? HangCause::kOrderInversion
                 : cycle.size() == 2 && all_send ? HangCause::kHeadToHeadSend
                 : cycle.size() == 2 && all_recv ? HangCause::kHeadToHeadRecv
                                                 : HangCause::kPointToPointCycle;
    std::vector<int64_t> members = cycle;
    std::sort(members.begin(), members.end());
    out_.summary.push_back(fmt::format("{} wait for each other:", ranks_text(members)));
    for (const std::string& p : parts) out_.summary.push_back("  " + p);
    for (std::string& line : ahead) out_.summary.push_back(std::move(line));
  }

  std::string open_site(int64_t rank) const {
    return site_text(entry(rank, *views_[static_cast<size_t>(rank)].oldest_open));
  }

  // Whether the program calls site `a` before site `b` (1), after it (-1), or the dumps cannot
  // tell (0, also without frames). A loop calls both in turn, so per rank the shortest run of
  // calls from an `a` to the next `b` is set against the shortest from a `b` to the next `a`:
  // the shorter way round is the program's order. The ranks vote.
  int program_order(const std::string& a, const std::string& b) const {
    int64_t votes = 0;
    for (const FrRankDump& d : dumps_) {
      size_t a_to_b = SIZE_MAX, b_to_a = SIZE_MAX;
      std::optional<size_t> last_a, last_b;
      const auto& entries = d.dump.entries;
      for (size_t i = 0; i < entries.size(); ++i) {
        if (entries[i].frames.empty()) continue;
        const std::string site = site_text(entries[i]);
        if (site == a) {
          if (last_b) b_to_a = std::min(b_to_a, i - *last_b);
          last_a = i;
        } else if (site == b) {
          if (last_a) a_to_b = std::min(a_to_b, i - *last_a);
          last_b = i;
        }
      }
      votes += a_to_b < b_to_a ? 1 : b_to_a < a_to_b ? -1 : 0;
    }
    return votes > 0 ? 1 : votes < 0 ? -1 : 0;
  }

  void blame_mismatch() {
    const FrMismatch& m = out_.mismatches.front();
    std::vector<std::string> summary;
    std::vector<std::string> parts;
    for (const FrVariant& v : m.variants)
      parts.push_back(fmt::format("{} {}", ranks_text(v.ranks), v.text));
    summary.push_back(fmt::format("members of {} called seq {} with different {}: {}",
                                  group(m.group).label, m.seq, m.kind, fmt::join(parts, "; ")));
    if (m.culprits.empty())
      summary.push_back("what each member sends and receives does not add up");
    if (out_.mismatches.size() > 1)
      summary.push_back(fmt::format("{} more mismatched collectives follow (see mismatches)",
                                    out_.mismatches.size() - 1));
    if (out_.verdict == FrAnalysis::Verdict::kDeadlock)
      summary.push_back(fmt::format("then a deadlock: {} ({})", hang_cause_name(out_.cause),
                                    ranks_text(out_.culprits)));
    out_.verdict = FrAnalysis::Verdict::kDesync;
    out_.cause = HangCause::kSignatureMismatch;
    out_.culprits = m.culprits;
    out_.summary = std::move(summary);
  }

  std::string call_line(int64_t rank, const FrEntry& e) const {
    const FrGroup& g = group(group_index_.at(e.pg_name));
    const std::string where = e.is_p2p ? fmt::format("{} p2p seq {}", g.label, e.p2p_seq_id)
                                       : fmt::format("{} seq {}", g.label, e.collective_seq_id);
    (void)rank;
    return fmt::format("{}: {} at {}, {}", where, call_text(e), site_text(e), state_text(e));
  }

  void tell_ranks() {
    constexpr size_t kLastCalls = 4;
    for (FrRank& r : out_.ranks) {
      const RankView& v = views_[static_cast<size_t>(r.rank)];
      if (v.dump == nullptr) {
        r.story = "no dump";
        continue;
      }
      const auto& entries = v.dump->dump.entries;
      const size_t from = entries.size() > kLastCalls ? entries.size() - kLastCalls : 0;
      for (size_t i = from; i < entries.size(); ++i)
        r.last_calls.push_back(call_line(r.rank, entries[i]));
      if (r.state == FrRank::State::kIdle) {
        r.story = entries.empty() ? "no call recorded"
                                  : "idle: its last call, " + last_call_text(r.rank) + ", finished";
        continue;
      }
      const FrOpenCall& c = out_.open_calls[*r.open_call];
      const FrEntry& e = entries[*v.oldest_open];
      r.story = fmt::format("blocked in {} on {}{} at {}", c.call, group(c.group).label,
                            c.p2p ? "" : fmt::format(" seq {}", c.seq), site_text(e));
      if (!r.waits_for.empty()) r.story += ", waiting for " + ranks_text(r.waits_for);
      if (c.unnamed > 0)
        r.story += fmt::format("{} {} member{} no dump names",
                               r.waits_for.empty() ? ", waiting for" : " and", c.unnamed,
                               c.unnamed > 1 ? "s" : "");
      if (r.waits_for.empty() && c.unnamed == 0) r.story += ", with every member there";
    }
  }

  void note_evidence() {
    std::vector<int64_t> no_dump, wrapped;
    int64_t first_low = INT64_MAX, first_high = 0;
    std::set<std::string> versions;
    for (const FrRank& r : out_.ranks) {
      const RankView& v = views_[static_cast<size_t>(r.rank)];
      if (v.dump == nullptr) {
        no_dump.push_back(r.rank);
        continue;
      }
      versions.insert(v.dump->dump.version);
      if (v.wrapped) {
        wrapped.push_back(r.rank);
        first_low = std::min(first_low, r.first_record);
        first_high = std::max(first_high, r.first_record);
      }
    }
    if (!no_dump.empty())
      out_.evidence.push_back(
          fmt::format("no dump from rank{} {} ({} of {} ranks): what {} called is unknown",
                      no_dump.size() > 1 ? "s" : "", rank_ranges(no_dump), no_dump.size(),
                      out_.world_size, no_dump.size() > 1 ? "they" : "it"));
    if (!wrapped.empty())
      out_.evidence.push_back(fmt::format(
          "the ring buffers of {} wrapped (their dumps start at record {}): older calls are "
          "unknown, and collectives are matched by group and seq over what remains",
          ranks_text(wrapped),
          first_low == first_high ? std::to_string(first_low)
                                  : fmt::format("{}-{}", first_low, first_high)));
    std::vector<std::string> inferred;
    for (const FrGroup& g : out_.groups)
      if (g.members_from == "dumps") inferred.push_back(g.label);
    if (!inferred.empty())
      out_.evidence.push_back(fmt::format(
          "pg_config lists no members for {} (Gloo keeps none): their members are taken to be "
          "the ranks whose dumps name them, so a member that never called on one is not seen",
          fmt::join(inferred, ", ")));
    if (versions.size() > 1)
      out_.evidence.push_back(
          fmt::format("the dumps are of different versions: {}", fmt::join(versions, ", ")));
    for (std::string& c : conflicts_) out_.evidence.push_back(std::move(c));
    for (std::string& o : odd_) out_.evidence.push_back(std::move(o));
  }

  std::vector<FrRankDump> dumps_;
  FrAnalysis out_;
  std::map<std::string, size_t> group_index_;
  std::vector<RankView> views_;
  std::map<CallKey, std::vector<RankEntry>> calls_;  // each rank's first entry at (group, seq)
  // The ranks that called from each user line (file, line), made on first use.
  std::map<std::pair<std::string, int64_t>, std::set<size_t>> callers_;
  bool callers_indexed_ = false;
  std::vector<std::string> conflicts_, odd_;
  std::vector<size_t> first_missing_;  // by rank (index_missing)
  std::vector<char> lost_;
};

}  // namespace

FrAnalysis analyze_fr_dumps(std::vector<FrRankDump> dumps, int64_t world_size_hint) {
  return Analyzer(std::move(dumps), world_size_hint).run();
}

}  // namespace meshsim::sim
