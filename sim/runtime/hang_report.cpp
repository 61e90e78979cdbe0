#include "sim/runtime/hang_report.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "sim/runtime/hang_phrases.hpp"
#include "sim/runtime/history_departure.hpp"
#include "src/enum_names.hpp"

namespace meshsim::sim {

namespace {

const std::vector<int64_t> kNoRanks;

// Whether the collective-level wait graph has a cycle (iterative DFS in index order).
bool has_cycle(const std::vector<std::vector<int64_t>>& edges) {
  std::vector<int> color(edges.size(), 0);  // 0 new, 1 on the stack, 2 done
  for (size_t start = 0; start < edges.size(); ++start) {
    if (color[start] != 0) continue;
    std::vector<std::pair<size_t, size_t>> stack{{start, 0}};
    color[start] = 1;
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next == edges[node].size()) {
        color[node] = 2;
        stack.pop_back();
        continue;
      }
      const auto to = static_cast<size_t>(edges[node][next++]);
      if (color[to] == 1) return true;
      if (color[to] == 0) {
        color[to] = 1;
        stack.emplace_back(to, 0);
      }
    }
  }
  return false;
}

// Builds the root-cause sentences of a report (its kind and culprits already known or found here).
class RootCause {
 public:
  explicit RootCause(HangReport& r) : r_(r) {}

  void explain() {
    // What went wrong before the hang, where the run shows it: a member that came to a
    // collective from another call site than the others, or a call its `when` skipped that
    // others wait for. Those ranks are the culprits; the rest of the report is the consequence.
    const Departure departure = first_departure();
    const Departure by_peers = history_departure();
    if (departure.proven) {
      // The peers that made the call, when their histories tell the same story.
      const bool same = by_peers.proven && by_peers.odd == departure.odd &&
                        !departure.skipped.empty() && by_peers.skipped == departure.skipped;
      say(same ? fmt::format("{}, which {} called", departure.line, by_peers.peers)
               : departure.line);
      blame(departure.odd);
    } else if (by_peers.proven) {
      // Not named for sure: a second run, where the runner makes one, tells.
      r_.probe = by_peers.probe;
      say(by_peers.line);
      blame(by_peers.odd);
      // What followed (a head-to-head recv, say) does not rename it.
      refine(by_peers.cause);
      cause_fixed_ = true;
    } else if (by_peers.probe) {
      r_.probe = by_peers.probe;
    }
    // Once a member is known to have departed, later skips are its consequences.
    if (r_.culprits.empty()) explain_skipped_calls();
    if (r_.culprits.empty()) explain_extra_calls();
    // Every desync is a bug of its own: one found by symmetry does not stand for the others.
    const bool by_symmetry_only = !departure.proven && by_peers.proven;
    std::vector<int64_t> root =
        by_symmetry_only && r_.kind == HangKind::kDesync ? std::vector<int64_t>{} : r_.culprits;
    explain_hang();
    if (!departure.line.empty() && !departure.proven) {
      // Without a skip to prove it, a divergence only leads when the hang's own culprits went
      // that way too (or it found none): an SPMD branch only rank 0 takes is no fault.
      const bool shared = std::any_of(departure.odd.begin(), departure.odd.end(), [&](int64_t o) {
        return std::find(r_.culprits.begin(), r_.culprits.end(), o) != r_.culprits.end();
      });
      if (r_.culprits.empty() || (shared && root.empty())) {
        r_.summary.insert(r_.summary.begin(), departure.line);
        if (r_.culprits.empty()) root = departure.odd;
      } else {
        say(departure.line);
      }
    }
    say_the_rest();
    if (!root.empty()) {
      r_.culprits = root;
      std::sort(r_.culprits.begin(), r_.culprits.end());
      r_.culprits.erase(std::unique(r_.culprits.begin(), r_.culprits.end()), r_.culprits.end());
      r_.blamed_earlier = true;
    }
  }

 private:
  void explain_hang() {
    if (r_.timeout) {
      explain_timeout();
    } else if (!r_.desyncs.empty()) {
      for (size_t i = 0; i < r_.desyncs.size() && i < kDesyncsListed; ++i)
        explain_desync(r_.desyncs[i]);
      if (r_.desyncs.size() > kDesyncsListed) {
        say(fmt::format("... and {} more desyncs (see --json)",
                        r_.desyncs.size() - kDesyncsListed));
      }
      // A rank that skipped a collective elsewhere is a bug of its own, not a consequence.
      explain_abandoned_waits();
    } else {
      explain_deadlock();
    }
  }

  static constexpr size_t kDesyncsListed = 4;
  static constexpr size_t kOtherWaitsListed = 3;
  static constexpr size_t kPeersListed = 8;

  const RankActivity& activity(int64_t rank) const {
    return r_.ranks[static_cast<size_t>(rank)].activity;
  }
  const OpenWait* wait_of(int64_t rank) const {
    const int64_t w = r_.ranks[static_cast<size_t>(rank)].wait;
    return w < 0 ? nullptr : &r_.waits[static_cast<size_t>(w)];
  }
  void say(std::string line) { r_.summary.push_back(std::move(line)); }
  // Every rank's runs and skips of the step at `site`, all iterations (summed once per step).
  SkipLog::Count world_count(const CallSite& site) const {
    const auto [it, fresh] = world_counts_.try_emplace(site.step);
    if (fresh) {
      for (const HangReport::Rank& r : r_.ranks) {
        const SkipLog::Count c = r.activity.skipped.count(site);
        it->second.ran += c.ran;
        it->second.skipped += c.skipped;
      }
    }
    return it->second;
  }
  // The rank ran the step in other iterations at least as often as it skipped it: a skip there
  // is its odd one (a branch only rank 0 takes, skipped on the first pass, is not).
  bool runs_usually(int64_t rank, const CallSite& site) const {
    const SkipLog::Count mine = activity(rank).skipped.count(site);
    return mine.ran > 0 && mine.ran >= mine.skipped;
  }
  // A skip that is not the step's rule on this rank: it runs the step at least as often as it
  // skips it, or it skipped it once, before any run, where most of the world runs it. A stage
  // condition that is always false is neither.
  bool odd_skip(int64_t rank, const CallSite& site) const {
    const SkipLog::Count mine = activity(rank).skipped.count(site);
    if (mine.ran >= mine.skipped) return true;
    if (mine.skipped > 1) return false;
    const SkipLog::Count all = world_count(site);
    return all.ran > all.skipped;
  }
  // A skip as ranks compare them: the step first skipped, in which iterations, the op, and the
  // peer relative to the rank (a stage's skipped sends to the next stage are one key).
  using SkipKey = std::tuple<int64_t, int64_t, std::array<int32_t, CallSite::kShownDepth>, uint64_t,
                             int, int64_t>;
  static SkipKey key_of(int64_t rank, const SkipLog::Tally& t) {
    const CallSite& f = t.first;
    return {f.line,
            f.column,
            f.iterations,
            f.outer_hash,
            static_cast<int>(t.call.op),
            t.call.peer < 0 ? INT64_MIN : t.call.peer - rank};
  }
  // The same skip in any iteration: a stage's last-iteration skip is one key for every stage.
  using StepKey = std::tuple<int64_t, int64_t, int, int64_t>;
  static StepKey step_key_of(int64_t rank, const SkipLog::Tally& t) {
    return {t.first.line, t.first.column, static_cast<int>(t.call.op),
            t.call.peer < 0 ? INT64_MIN : t.call.peer - rank};
  }
  // How many ranks skipped that step (any iteration): the fewer, the less it is the program's
  // rule.
  size_t step_skippers(int64_t rank, const SkipLog::Tally& t) const {
    index_ranks();
    return step_skippers_[step_key_of(rank, t)];
  }
  // Whether fewer than half of the ranks that skipped the step of `t` (any iteration) skipped it
  // between two runs of it, as `rank` did: a one-off skip, not a pattern of the program.
  bool isolated_is_rare(int64_t rank, const SkipLog::Tally& t) const {
    index_ranks();
    const StepKey key = step_key_of(rank, t);
    return 2 * isolated_skippers_[key] < step_skippers_[key];
  }
  // Which ranks made each skip, and which ranks called collectives on each group (their flight
  // recorders): built once per report, so that comparing a rank with its peers is not a pass
  // over the world per wait.
  void index_ranks() const {
    if (indexed_) return;
    indexed_ = true;
    groups_of_.resize(r_.ranks.size());
    // A rank's peers by group are those of groups short of WORLD (which joins every program of
    // a pipeline); WORLD is still compared where it is the only group.
    for (const auto& [id, members] : r_.groups) {
      std::vector<int64_t>& in = group_members_[id];
      for (int64_t m : *members) {
        if (m >= 0 && static_cast<size_t>(m) < r_.ranks.size()) in.push_back(m);
      }
      if (in.size() < 2) {
        group_members_.erase(id);
        continue;
      }
      if (in.size() >= r_.ranks.size()) continue;
      for (int64_t m : in) groups_of_[static_cast<size_t>(m)].push_back(id);
    }
    for (const HangReport::Rank& r : r_.ranks) {
      for (const SkipLog::Tally& u : r.activity.skipped.tallies()) {
        skip_makers_[key_of(r.rank, u)].push_back(r.rank);
        ++step_skippers_[step_key_of(r.rank, u)];
        if (u.isolated > 0) {
          ++isolated_skippers_[step_key_of(r.rank, u)];
          isolated_makers_[step_key_of(r.rank, u)].push_back(r.rank);
        }
      }
    }
  }
  // The other ranks that run `rank`'s program, as far as its skips other than `t` tell: those that
  // share most of them (its dp and tp peers in a pipeline stage), or without other skips the
  // members of its collective groups. Ranks with the same other skips get one set, computed once.
  const std::set<int64_t>& program_peers(int64_t rank, const SkipLog::Tally& t) const {
    index_ranks();
    std::vector<SkipKey> others;
    for (const SkipLog::Tally& m : activity(rank).skipped.tallies()) {
      if (&m != &t) others.push_back(key_of(rank, m));
    }
    std::sort(others.begin(), others.end());
    others.erase(std::unique(others.begin(), others.end()), others.end());
    const std::vector<int64_t>& groups = groups_of_[static_cast<size_t>(rank)];
    auto memo_key = std::pair(others, others.empty() ? groups : std::vector<int64_t>{});
    const auto [it, fresh] = peers_memo_.try_emplace(std::move(memo_key));
    if (!fresh) return it->second;
    std::map<int64_t, size_t> common;
    for (const SkipKey& k : it->first.first) {
      for (int64_t r : skip_makers_[k]) {
        if (r != rank) ++common[r];
      }
    }
    size_t best = 0;
    for (const auto& [r, n] : common) best = std::max(best, n);
    std::set<int64_t>& peers = it->second;
    for (const auto& [r, n] : common) {
      if (best > 0 && n == best) peers.insert(r);
    }
    if (peers.empty()) {
      for (int64_t g : groups) {
        for (int64_t r : group_members_[g]) {
          if (r != rank) peers.insert(r);
        }
      }
    }
    return peers;
  }
  // Whether none of `rank`'s program peers (program_peers) made skip `t`, while it has some.
  bool unique_among_peers(int64_t rank, const SkipLog::Tally& t) const {
    return made_by_none_of_its_peers(rank, t, skip_makers_[key_of(rank, t)]);
  }
  // Whether none of `rank`'s program peers skipped the step of `t` between two runs of it.
  bool isolated_unique_among_peers(int64_t rank, const SkipLog::Tally& t) const {
    index_ranks();
    return made_by_none_of_its_peers(rank, t, isolated_makers_[step_key_of(rank, t)]);
  }
  bool made_by_none_of_its_peers(int64_t rank, const SkipLog::Tally& t,
                                 const std::vector<int64_t>& makers) const {
    const std::set<int64_t>& peers = program_peers(rank, t);
    return !peers.empty() &&
           std::none_of(makers.begin(), makers.end(), [&](int64_t r) { return peers.contains(r); });
  }
  // A call that is not the step's rule: the rank usually skips the step, or most of the world
  // does (an extra call in the first iteration).
  bool odd_call(int64_t rank, const CallSite& site) const {
    if (activity(rank).skipped.usually_skips(site)) return true;
    const SkipLog::Count all = world_count(site);
    return all.skipped > all.ran;
  }
  // A deadlock's cause is refined by what the sentences find; a desync stays a desync.
  void refine(HangCause cause) {
    if (r_.kind == HangKind::kDeadlock && !cause_fixed_) r_.cause = cause;
  }
  void blame(const std::vector<int64_t>& ranks) {
    r_.culprits.insert(r_.culprits.end(), ranks.begin(), ranks.end());
    mentioned_.insert(ranks.begin(), ranks.end());
  }
  std::string in_wait(const OpenWait& w) const { return call_text(w, w.signature); }
  // Where a rank is now, as a phrase: "finished after f.toml:9:1 (barrier)", its last step.
  std::string now(int64_t rank) const {
    const RankActivity& a = activity(rank);
    if (const OpenWait* w = wait_of(rank)) {
      return fmt::format("waits in {} at {}", in_wait(*w), location_text(a));
    }
    if (a.state == RankActivity::State::kFailed) {
      return fmt::format("failed at {}: {}", location_text(a), a.error);
    }
    if (a.state == RankActivity::State::kFinished) return finished_text(a);
    return fmt::format("{} at {}", state_name(a.state), location_text(a));
  }

  // The first meeting whose members came from different call sites, when it is not a desync of
  // its own: who came from where, and who went wrong there. Proven: a rank that skipped another
  // member's call (`when` false, in a step it usually runs), or came from a step it skips in its
  // other iterations. Only voted: the site most of the group came from, or a step the world
  // skips; explain() then lets the hang's own culprits stand.
  struct Departure {
    std::string line;          // "first divergence: ..."; empty without one
    std::vector<int64_t> odd;  // who went another way, when that is known
    bool proven = false;       // they skipped another member's call, or made one they usually skip
    std::string skipped;       // the call site they skipped, when that is the verdict
    std::string peers;         // "its dp peers 17, 21, 23": who made that call (by symmetry)
    // A departure by symmetry the skip logs cannot name, or not for sure: what to probe.
    std::optional<ProbeRequest> probe;
    HangCause cause = HangCause::kMissingRank;  // what the departure makes of a deadlock
  };
  Departure first_departure() const {
    if (!r_.first_divergence) return {};
    const SiteDivergence& d = r_.divergences[*r_.first_divergence];
    std::vector<int64_t> members = d.missing;
    for (const auto& [site, who] : d.sites) members.insert(members.end(), who.begin(), who.end());
    members.insert(members.end(), d.elsewhere.begin(), d.elsewhere.end());
    std::sort(members.begin(), members.end());
    const std::string op(collective_op_name(d.signature.op));
    std::vector<std::string> parts;
    for (size_t i = 0; i < d.sites.size(); ++i) {
      const auto& [site, who] = d.sites[i];
      parts.push_back(i == 0
                          ? fmt::format("{} reached {} seq {} ({}) from {}", ranks_text(who),
                                        label_with_members(r_.group_labels.at(d.group_id), members),
                                        d.seq, op, site.text())
                          : fmt::format("{} from {}", ranks_text(who), site.text()));
    }
    if (!d.elsewhere.empty())
      parts.push_back(fmt::format("{} from other sites", ranks_text(d.elsewhere)));
    std::string verdict, skipped_site;
    std::vector<int64_t> odd;
    const size_t n = d.sites.size();
    const bool majority = n >= 2 && d.sites[n - 1].second.size() > d.sites[n - 2].second.size();
    // A skip of another member's call is the strongest evidence, majority or not: of a step the
    // rank usually runs, or of an earlier iteration of the very step it came from (all earlier
    // meetings agreed, so it is the one that got ahead). A step run once (a program without
    // loops) says nothing of habits: there the fewer side's skip is the odd one, unless the
    // other side skipped its site in turn (two branches).
    for (size_t i = 0; i < n && odd.empty(); ++i) {
      for (size_t j = 0; j < n && odd.empty(); ++j) {
        if (i == j) continue;
        const CallSite& other = d.sites[j].first;
        const CallSite& mine = d.sites[i].first;
        const bool earlier_pass = mine.same_step(other) && mine.outer_hash == other.outer_hash &&
                                  other.iterations < mine.iterations;
        const bool fewer =
            d.sites[i].second.size() < d.sites[j].second.size() && mine.depth() == 0 &&
            other.depth() == 0 &&
            std::none_of(d.sites[j].second.begin(), d.sites[j].second.end(),
                         [&](int64_t o) { return activity(o).skipped.skipped(mine, d.group_id); });
        for (int64_t rank : d.sites[i].second) {
          if (activity(rank).skipped.skipped(other, d.group_id) &&
              (earlier_pass || fewer || runs_usually(rank, other)))
            odd.push_back(rank);
        }
        if (!odd.empty()) {
          skipped_site = d.sites[j].first.text();
          verdict = fmt::format("{} skipped the {} at {} (`when` false)", ranks_text(odd), op,
                                skipped_site);
        }
      }
    }
    bool proven = !odd.empty();
    // A call from a site every other member went past in that very iteration without calling it
    // (their `when` false there), while its callers did not skip the others' sites: an extra
    // call. (Two branches that each make the call skip each other's site: no one is odd.)
    for (size_t i = 0; i < n && odd.empty() && d.elsewhere.empty(); ++i) {
      const CallSite& site = d.sites[i].first;
      bool others_skipped = true, callers_skipped = false;
      for (size_t j = 0; j < n; ++j) {
        if (j == i) continue;
        others_skipped = others_skipped && !site.same_step(d.sites[j].first);
        for (int64_t other : d.sites[j].second)
          others_skipped = others_skipped && activity(other).skipped.skipped(site, d.group_id);
        for (int64_t caller : d.sites[i].second) {
          callers_skipped =
              callers_skipped || activity(caller).skipped.skipped(d.sites[j].first, d.group_id);
        }
      }
      if (!others_skipped || callers_skipped) continue;
      odd = d.sites[i].second;
      proven = true;
      std::vector<int64_t> others;
      for (size_t j = 0; j < n; ++j) {
        if (j != i) others.insert(others.end(), d.sites[j].second.begin(), d.sites[j].second.end());
      }
      std::sort(others.begin(), others.end());
      verdict = fmt::format("{} called the {} at {}, which {} skipped there (`when` false)",
                            ranks_text(odd), op, site.text(), ranks_text(others));
    }
    if (odd.empty() && majority) {
      for (size_t i = 0; i + 1 < n; ++i)
        odd.insert(odd.end(), d.sites[i].second.begin(), d.sites[i].second.end());
      odd.insert(odd.end(), d.elsewhere.begin(), d.elsewhere.end());
      std::sort(odd.begin(), odd.end());
      verdict = fmt::format("{} went another way than the other {} ({})", ranks_text(odd),
                            d.sites[n - 1].second.size(), d.sites[n - 1].first.text());
    }
    // A call from a step the rank skipped in its other iterations is proof too; a step the rest
    // of the world skips is only a vote.
    for (size_t i = 0; i < n && odd.empty(); ++i) {
      const CallSite& site = d.sites[i].first;
      for (int64_t rank : d.sites[i].second) {
        if (odd_call(rank, site)) odd.push_back(rank);
      }
      proven = std::all_of(odd.begin(), odd.end(),
                           [&](int64_t o) { return activity(o).skipped.usually_skips(site); });
      if (!odd.empty()) {
        verdict =
            fmt::format("{} called the {} at {}, a step {} usually skip{}", ranks_text(odd), op,
                        site.text(), odd.size() == 1 ? "it" : "they", odd.size() == 1 ? "s" : "");
      }
    }
    return {fmt::format("first divergence: {}{}{}", fmt::join(parts, "; "),
                        verdict.empty() ? "" : ": ", verdict),
            odd,
            proven && !odd.empty(),
            skipped_site,
            {},
            {},
            HangCause::kMissingRank};
  }

  // Blame by symmetry: members of a group whose call histories depart from the majority's (ranks
  // that run the same program), where the departure is a call they skipped and the majority made,
  // or made and the majority skipped.
  // The earliest departure that names its call, else the earliest one a probe could name.
  Departure history_departure() const {
    index_ranks();
    const auto history = [&](int64_t r) -> const CallHistory& { return activity(r).calls; };
    // WORLD only where it is the one group (a data-parallel job): next to a mesh's groups, a
    // rank alone in a branch is told by them (or by the hang) better.
    std::map<int64_t, std::vector<int64_t>> compared;
    for (const auto& [id, members] : group_members_) {
      if (members.size() < r_.ranks.size()) compared.emplace(id, members);
    }
    if (compared.empty()) compared = group_members_;
    std::vector<HistoryDeparture> found = history_departures(compared, history);
    // Without a group of three that tells, the ranks its groups join (a pipeline stage's dp x tp
    // ranks) run one program too.
    if (found.empty()) found = history_departures(joined_by_groups(), history);
    std::optional<ProbeRequest> probe;
    for (const HistoryDeparture& d : found) {
      Departure named = named_departure(d);
      if (named.proven) return named;
      if (!probe) probe = named.probe;
    }
    Departure unnamed;
    unnamed.probe = probe;
    return unnamed;
  }

  // What the odd members of `d` skipped and its majority made (or the other way round), between
  // the last agreeing checkpoint and the first differing one; unnamed or not for sure, with a
  // probe from the last agreeing one.
  Departure named_departure(const HistoryDeparture& dep) const {
    std::optional<HistoryDeparture> split;
    if (dep.open_tail() && !(split = split_open_tail(dep))) return {};
    const HistoryDeparture* d = split ? &*split : &dep;
    // Made with `agreed` to `differ - 1` calls, a skip comes before the call that differs; one
    // right at `differ` is counted for telling two branches apart only.
    const auto in_window = [&](uint64_t calls) { return calls >= d->agreed && calls <= d->differ; };
    const auto strictly_in = [&](uint64_t calls) {
      return calls >= d->agreed && calls < d->differ;
    };
    // The iteration of a tally the window holds, the calls made before it, and whether it comes
    // before the call that differs.
    struct InWindow {
      CallSite site;
      uint64_t calls = 0;
      bool before = false;
    };
    const auto skip_in_window = [&](const SkipLog::Tally& t) -> std::optional<InWindow> {
      if (in_window(t.calls_before_first))
        return InWindow{t.first, t.calls_before_first, strictly_in(t.calls_before_first)};
      if (t.isolated > 0 && in_window(t.calls_before_isolated))
        return InWindow{t.first_isolated, t.calls_before_isolated,
                        strictly_in(t.calls_before_isolated)};
      if (in_window(t.calls_before_last))
        return InWindow{t.last, t.calls_before_last, strictly_in(t.calls_before_last)};
      return std::nullopt;
    };
    const auto skipped = [&](int64_t r, const CallSite& site) {
      return activity(r).skipped.skipped_or_probed(site);
    };
    const auto none_skipped = [&](const std::vector<int64_t>& ranks, const CallSite& site) {
      return std::none_of(ranks.begin(), ranks.end(), [&](int64_t r) { return skipped(r, site); });
    };
    const auto all_skipped = [&](const std::vector<int64_t>& ranks, const CallSite& site) {
      return std::all_of(ranks.begin(), ranks.end(), [&](int64_t r) { return skipped(r, site); });
    };
    const auto all_surely_ran = [&](const std::vector<int64_t>& ranks, const CallSite& site) {
      return std::all_of(ranks.begin(), ranks.end(), [&](int64_t r) {
        return activity(r).skipped.surely_ran(site, d->agreed);
      });
    };
    // Calls the odd ones skipped and the majority made, and the other way round: any in the
    // window tells two branches apart. The one named comes before the differing call: one the
    // others surely made (skip logs merge the middle of a tally), the earliest.
    struct Found {
      struct Call {
        CallSite site;
        CollectiveOp op = CollectiveOp::kBarrier;
        uint64_t calls = 0;
        bool sure = false;
      };
      bool any = false;
      std::optional<Call> named;
      void add(const Call& c, bool before) {
        any = true;
        if (!before) return;
        if (!named || (c.sure && !named->sure) || (c.sure == named->sure && c.calls < named->calls))
          named = c;
      }
    };
    Found odd_found, peers_found;
    for (int64_t o : d->odd) {
      for (const SkipLog::Tally& t : activity(o).skipped.tallies()) {
        if (const auto w = skip_in_window(t); w && none_skipped(d->peers, w->site))
          odd_found.add({w->site, t.call.op, w->calls, all_surely_ran(d->peers, w->site)},
                        w->before);
      }
      // A second run's record of every skip in the window (SkipLog::probe).
      for (const SkipLog::Probed& p : activity(o).skipped.probed()) {
        if (in_window(p.calls_before) && none_skipped(d->peers, p.site))
          odd_found.add({p.site, p.call.op, p.calls_before, all_surely_ran(d->peers, p.site)},
                        strictly_in(p.calls_before));
      }
    }
    const SkipLog& first_peer = activity(d->peers.front()).skipped;
    for (const SkipLog::Tally& t : first_peer.tallies()) {
      if (const auto w = skip_in_window(t);
          w && none_skipped(d->odd, w->site) && all_skipped(d->peers, w->site))
        peers_found.add({w->site, t.call.op, w->calls, all_surely_ran(d->odd, w->site)}, w->before);
    }
    for (const SkipLog::Probed& p : first_peer.probed()) {
      if (in_window(p.calls_before) && none_skipped(d->odd, p.site) &&
          all_skipped(d->peers, p.site))
        peers_found.add({p.site, p.call.op, p.calls_before, all_surely_ran(d->odd, p.site)},
                        strictly_in(p.calls_before));
    }
    // Both: two branches that each make a call (rank 0's broadcast and everyone else's), no fault.
    if (odd_found.any && peers_found.any) return {};
    const std::optional<Found::Call>& odd_skip = odd_found.named;
    const std::optional<Found::Call>& peers_skip = peers_found.named;
    // Where the skip logs cannot name the call, or not for sure, a second run records the skips
    // of the odd ones and of a few peers (a skip of theirs is the program's rule) from `agreed`.
    ProbeRequest probe{d->odd, d->agreed};
    const size_t probed_peers = std::min(d->peers.size(), kPeersListed);
    probe.ranks.insert(probe.ranks.end(), d->peers.begin(),
                       d->peers.begin() + static_cast<ptrdiff_t>(probed_peers));
    if (!odd_skip && !peers_skip) {
      Departure unnamed;
      unnamed.probe = std::move(probe);
      return unnamed;
    }
    const bool sure = odd_skip ? odd_skip->sure : peers_skip->sure;
    const auto label = r_.group_labels.find(d->group_id);
    const std::string dim = label == r_.group_labels.end() ? "" : label_dim(label->second);
    std::string peers = fmt::format("{} {}peers {}", d->odd.size() == 1 ? "its" : "their",
                                    dim.empty() ? "" : dim + " ", compact_ranks(d->peers));
    if (d->peers.size() > kPeersListed) peers += fmt::format(" ({} ranks)", d->peers.size());
    if (odd_skip) {
      const CallSite& site = odd_skip->site;
      const CollectiveOp op = odd_skip->op;
      const bool from_probe = std::any_of(d->odd.begin(), d->odd.end(),
                                          [&](int64_t x) { return activity(x).skipped.probing(); });
      std::vector<int64_t> skippers;
      for (int64_t x : d->odd) {
        if (skipped(x, site)) skippers.push_back(x);
      }
      return {fmt::format("{} skipped the {} at {} (`when` false), which {} called{}",
                          ranks_text(skippers), collective_op_name(op), site.text(), peers,
                          from_probe ? " (found by a second run of the same schedule)" : ""),
              skippers,
              true,
              site.text(),
              peers,
              sure ? std::nullopt : std::optional(probe),
              op == CollectiveOp::kSend || op == CollectiveOp::kRecv
                  ? HangCause::kUnmatchedPointToPoint
                  : HangCause::kMissingRank};
    }
    const CallSite& site = peers_skip->site;
    const CollectiveOp op = peers_skip->op;
    return {fmt::format("{} called the {} at {}, which {} skipped (`when` false)",
                        ranks_text(d->odd), collective_op_name(op), site.text(), peers),
            d->odd,
            true,
            {},
            peers,
            sure ? std::nullopt : std::optional(probe),
            HangCause::kExtraCollective};
  }

  // The odd members of an open tail: the few with a skip after the last agreeing checkpoint at a
  // call site that every other member went past and surely ran (the earliest such skip).
  std::optional<HistoryDeparture> split_open_tail(const HistoryDeparture& tail) const {
    const auto made = [&](int64_t r) { return activity(r).calls.count(); };
    std::optional<std::pair<uint64_t, CallSite>> earliest;
    const auto consider = [&](int64_t m, const CallSite& site, uint64_t calls_before) {
      if (calls_before < tail.agreed || (earliest && earliest->first <= calls_before)) return;
      const bool others_passed = std::all_of(tail.peers.begin(), tail.peers.end(), [&](int64_t o) {
        return o == m ||
               (made(o) > calls_before && activity(o).skipped.surely_ran(site, tail.agreed));
      });
      if (others_passed) earliest.emplace(calls_before, site);
    };
    for (int64_t m : tail.peers) {
      for (const SkipLog::Tally& t : activity(m).skipped.tallies()) {
        consider(m, t.first, t.calls_before_first);
        if (t.isolated > 0) consider(m, t.first_isolated, t.calls_before_isolated);
        consider(m, t.last, t.calls_before_last);
      }
    }
    if (!earliest) return std::nullopt;
    HistoryDeparture split{tail.group_id, {}, {}, tail.agreed, 0};
    for (int64_t m : tail.peers) {
      const bool skipper = activity(m).skipped.skipped_or_probed(earliest->second);
      (skipper ? split.odd : split.peers).push_back(m);
      if (skipper) split.differ = std::max(split.differ, made(m) + 1);
    }
    if (2 * split.odd.size() >= tail.peers.size()) return std::nullopt;
    return split;
  }

  // The sets of ranks that collective groups short of WORLD join (union of their members), by
  // negative ids (no group has one), those of one rank left out.
  std::map<int64_t, std::vector<int64_t>> joined_by_groups() const {
    std::vector<int64_t> parent(r_.ranks.size());
    for (size_t i = 0; i < parent.size(); ++i) parent[i] = static_cast<int64_t>(i);
    const auto root = [&](int64_t x) {
      while (parent[static_cast<size_t>(x)] != x) {
        parent[static_cast<size_t>(x)] =
            parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
        x = parent[static_cast<size_t>(x)];
      }
      return x;
    };
    for (const auto& [group, members] : group_members_) {
      if (members.size() >= r_.ranks.size()) continue;  // WORLD joins every program
      for (int64_t m : members) {
        const int64_t a = root(members.front()), b = root(m);
        if (a != b) parent[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
      }
    }
    std::map<int64_t, std::vector<int64_t>> by_root;
    for (size_t i = 0; i < parent.size(); ++i)
      by_root[root(static_cast<int64_t>(i))].push_back(static_cast<int64_t>(i));
    std::vector<std::vector<int64_t>> sets;
    for (auto& [r, members] : by_root) {
      if (members.size() > 1) sets.push_back(std::move(members));
    }
    // Ids in the order of the sets' lowest ranks: -n, ..., -1.
    std::map<int64_t, std::vector<int64_t>> out;
    for (size_t i = 0; i < sets.size(); ++i)
      out[static_cast<int64_t>(i) - static_cast<int64_t>(sets.size())] = std::move(sets[i]);
    return out;
  }

  // Collectives whose callers came from a step they skipped in earlier iterations (a `when` true
  // once), while the other members are busy elsewhere: the callers made an extra call. (Members
  // that finished without it are told by explain_extra_collective.)
  void explain_extra_calls() {
    for (const OpenWait& w : r_.waits) {
      if (is_p2p(w) || w.signature.op == CollectiveOp::kNewGroup || w.missing.empty()) continue;
      if (mentioned_.contains(w.arrived.front()) || w.arrived.size() > w.missing.size()) continue;
      // Its own earlier iterations, not the world, tell: in a 2-rank order inversion the world
      // skips each side's step too.
      const bool odd = std::all_of(w.arrived.begin(), w.arrived.end(), [&](int64_t a) {
        return activity(a).skipped.usually_skips(w.site);
      });
      // The other members went past this very iteration without calling it (their `when` was
      // false there): gradient accumulation's last-microbatch all_reduce is no extra call.
      const bool passed = std::all_of(w.missing.begin(), w.missing.end(), [&](int64_t m) {
        return wait_of(m) != nullptr && activity(m).skipped.skipped(w.site, w.group_number);
      });
      if (!odd || !passed) continue;
      refine(HangCause::kExtraCollective);
      blame(w.arrived);
      mentioned_.insert(w.arrived.begin(), w.arrived.end());
      say(fmt::format(
          "{} called the {} at {}, a step {} usually skip{}, on {} seq {}; {} "
          "skipped it there and wait{} elsewhere",
          ranks_text(w.arrived), collective_op_name(w.signature.op), w.site.text(),
          w.arrived.size() == 1 ? "it" : "they", w.arrived.size() == 1 ? "s" : "", group_text(w),
          w.seq, ranks_text(w.missing), w.missing.size() == 1 ? "s" : ""));
      return;
    }
  }

  // Waits whose missing member reached the call its peers wait in and skipped it (`when` false,
  // in a step most ranks run); a whole stage that skipped the same send is one sentence.
  void explain_skipped_calls() {
    struct Story {
      std::vector<int64_t> skippers, waiting;
      const OpenWait* wait = nullptr;
      const SkipLog::Tally* tally = nullptr;
      bool unique = false;       // none of the skippers' peers made the skip
      size_t rarity = SIZE_MAX;  // the fewest ranks that skipped one of its steps, any iteration
    };
    std::map<std::tuple<int64_t, int64_t, std::string, int64_t, int, int64_t>, Story> stories;
    std::vector<Story*> order;
    for (const OpenWait& w : r_.waits) {
      if (w.signature.op == CollectiveOp::kNewGroup || mentioned_.contains(w.arrived.front()))
        continue;
      // (skipper, its tally, whether its peers did not make it)
      std::vector<std::tuple<int64_t, const SkipLog::Tally*, bool>> found;
      if (is_p2p(w)) {
        const int64_t me = w.arrived.front(), peer = *w.signature.root;
        const CollectiveOp needed =
            w.signature.op == CollectiveOp::kRecv ? CollectiveOp::kSend : CollectiveOp::kRecv;
        // A skip none of the peer's own peers made is odd even in the first iteration, where
        // counts say nothing yet; what its whole stage skips is the program's rule.
        const SkipLog::Tally* best = nullptr;
        std::tuple<bool, bool, int64_t> best_key{true, true, 0};
        for (const SkipLog::Tally* t : activity(peer).skipped.with_peer(needed, me)) {
          // One skip inside a stretch of runs, where few ranks have one: that skip alone.
          if (t->isolated == 1 &&
              (isolated_is_rare(peer, *t) || isolated_unique_among_peers(peer, *t))) {
            SkipLog::Tally& one = isolated_.emplace_back(*t);
            one.first = one.last = t->first_isolated;
            one.calls_before_first = one.calls_before_last = t->calls_before_isolated;
            one.count = 1;
            const std::tuple<bool, bool, int64_t> key{false, false, 1};
            if (best == nullptr || key < best_key) {
              best = &one;
              best_key = key;
            }
            continue;
          }
          const bool unique = unique_among_peers(peer, *t);
          const bool odd = odd_skip(peer, t->first);
          if (!odd && !unique) continue;
          const std::tuple<bool, bool, int64_t> key{!unique, !odd, t->count};
          if (best == nullptr || key < best_key) {
            best = t;
            best_key = key;
          }
        }
        if (best != nullptr) found.emplace_back(peer, best, !std::get<0>(best_key));
      } else {
        for (int64_t m : w.missing) {
          const SkipLog::Tally* t = activity(m).skipped.step(w.site, w.group_number);
          if (t != nullptr && activity(m).skipped.skipped(w.site, w.group_number) &&
              odd_skip(m, w.site))
            found.emplace_back(m, t, unique_among_peers(m, *t));
        }
      }
      for (const auto& [skipper, t, unique] : found) {
        const CallSite& site = is_p2p(w) ? t->first : w.site;
        Story& story =
            stories[{site.line, site.column, site.iterations_text(), is_p2p(w) ? t->count : 0,
                     static_cast<int>(w.signature.op), is_p2p(w) ? w.seq : 0}];
        if (story.wait == nullptr) {
          story.wait = &w;
          story.tally = t;
          order.push_back(&story);
        }
        story.unique = story.unique || unique;
        story.rarity = std::min(story.rarity, step_skippers(skipper, *t));
        story.skippers.push_back(skipper);
        story.waiting.insert(story.waiting.end(), w.arrived.begin(), w.arrived.end());
      }
    }
    // A skip no peer made is the cause; skips the skippers' peers made too are then what the
    // program does at that point (or what followed), not told. Otherwise the most particular
    // story first: a step fewer ranks ever skipped (every stage skipping its last iteration is a
    // rule), then one rank's odd skip before what a whole stage skipped.
    if (std::any_of(order.begin(), order.end(), [](const Story* s) { return s->unique; })) {
      std::erase_if(order, [](const Story* s) { return !s->unique; });
    }
    std::stable_sort(order.begin(), order.end(), [](const Story* a, const Story* b) {
      return std::pair(a->rarity, a->skippers.size()) < std::pair(b->rarity, b->skippers.size());
    });
    for (size_t i = 0; i < order.size() && i < kOtherWaitsListed; ++i) {
      Story& s = *order[i];
      for (auto* list : {&s.skippers, &s.waiting}) {
        std::sort(list->begin(), list->end());
        list->erase(std::unique(list->begin(), list->end()), list->end());
      }
      const OpenWait& w = *s.wait;
      if (is_p2p(w)) {
        refine(HangCause::kUnmatchedPointToPoint);
        const bool recv = w.signature.op == CollectiveOp::kRecv;
        const char* needed = recv ? "send" : "recv";
        const std::string what =
            s.tally->count == 1
                ? fmt::format("the {} at {}", needed, s.tally->first.text())
                : fmt::format("{} {}s at line {} (first {}, last {})", s.tally->count, needed,
                              s.tally->first.line, s.tally->first.text(), s.tally->last.text());
        std::string line = fmt::format(
            "{} did not post {} (`when` false); {} wait{} for it in {} {} {} {} ({} seq {})",
            ranks_text(s.skippers), what, ranks_text(s.waiting), s.waiting.size() == 1 ? "s" : "",
            s.waiting.size() == 1 ? "its" : "their", ordinal(w.seq), recv ? "recv" : "send",
            recv ? "from it" : "to it",
            s.skippers.size() == 1 ? w.channel : fmt::format("{} p2p", w.group), w.seq);
        const int64_t posted = recv ? w.sends_posted : w.recvs_posted;
        line += fmt::format(": {} {}{} posted", posted, needed, posted == 1 ? "" : "s");
        if (w.matched_send.line > 0) {
          line += fmt::format(", the last pair met at {} (send) and {} (recv)",
                              w.matched_send.text(), w.matched_recv.text());
        }
        if (s.skippers.size() == 1)
          line += fmt::format("; rank {} then {}", s.skippers[0], now(s.skippers[0]));
        say(line);
      } else {
        refine(HangCause::kMissingRank);
        say(fmt::format(
            "{} skipped the {} at {} (`when` false), where {} wait{} for {} ({} seq {})",
            ranks_text(s.skippers), collective_op_name(w.signature.op), w.site.text(),
            ranks_text(s.waiting), s.waiting.size() == 1 ? "s" : "",
            s.skippers.size() == 1 ? "it" : "them", group_text(w), w.seq));
      }
      blame(s.skippers);
      mentioned_.insert(s.waiting.begin(), s.waiting.end());
    }
    if (order.size() > kOtherWaitsListed)
      say(fmt::format("... and {} more calls a `when` skipped", order.size() - kOtherWaitsListed));
  }

  void explain_timeout() {
    const TimeoutRecord& t = *r_.timeout;
    blame(t.late);
    mentioned_.insert(t.timed_out.begin(), t.timed_out.end());
    say(fmt::format("{} reached {} on {} seq {} {:.3f} s after {}, whose watchdog fired",
                    ranks_text(t.late), t.signature.describe(), t.channel, t.seq, t.waited_s,
                    ranks_text(t.timed_out)));
  }

  void explain_desync(const DesyncRecord& d) {
    // Ranks that called the same thing from the same line, fewest first: the odd ones out.
    std::map<std::string, std::vector<int64_t>> by_call;
    for (const auto& [rank, sig] : d.arrivals) {
      mentioned_.insert(rank);
      by_call[fmt::format("{} at {}", sig.describe(), location_text(activity(rank)))].push_back(
          rank);
    }
    std::vector<std::pair<std::string, std::vector<int64_t>>> calls(by_call.begin(), by_call.end());
    std::stable_sort(calls.begin(), calls.end(), [](const auto& a, const auto& b) {
      return a.second.size() != b.second.size() ? a.second.size() < b.second.size()
                                                : a.second.front() < b.second.front();
    });
    // One call made by more ranks than any other is what was meant; everyone else is odd.
    const size_t n = calls.size();
    const bool majority = n >= 2 && calls[n - 1].second.size() > calls[n - 2].second.size();
    std::vector<std::string> parts;
    for (const auto& [call, who] : calls)
      parts.push_back(fmt::format("{} called {}", ranks_text(who), call));
    if (majority) {
      for (size_t i = 0; i + 1 < n; ++i) blame(calls[i].second);
      say(fmt::format("{} seq {}: {}, unlike the others: {}", d.channel, d.seq,
                      fmt::join(parts.begin(), parts.end() - 1, "; "), parts.back()));
    } else if (const auto [skippers, verdict] = tie_breaker(d); !skippers.empty()) {
      blame(skippers);
      say(fmt::format("{} seq {}: {}: {}", d.channel, d.seq, fmt::join(parts, "; "), verdict));
    } else {
      for (const auto& [call, who] : calls) blame(who);
      say(fmt::format("{} seq {}: {}", d.channel, d.seq, fmt::join(parts, "; ")));
    }
  }

  // In a desync without a majority (two tp ranks): a member that skipped the call another member
  // makes there (`when` false, in a step it usually runs) is the odd one.
  std::pair<std::vector<int64_t>, std::string> tie_breaker(const DesyncRecord& d) const {
    for (const auto& [rank, sig] : d.arrivals) {
      for (const auto& [other, other_sig] : d.arrivals) {
        const CallSite& there = activity(other).site;
        if (other == rank || there.same_step(activity(rank).site)) continue;
        const SkipLog::Tally* t = activity(rank).skipped.step(there, -1);
        if (t != nullptr && activity(rank).skipped.skipped(there, -1) && odd_skip(rank, there)) {
          return {{rank},
                  fmt::format("rank {} skipped the {} at {} (`when` false)", rank,
                              collective_op_name(other_sig.op), there.text())};
        }
      }
    }
    return {};
  }

  // Missing members of `w` that are not parked anywhere (finished, failed, aborted).
  std::vector<int64_t> gone(const OpenWait& w) const {
    std::vector<int64_t> out;
    for (int64_t m : w.missing) {
      if (wait_of(m) == nullptr) out.push_back(m);
    }
    return out;
  }

  void explain_deadlock() {
    // 1. Members that will never come: they failed, finished, or were aborted.
    if (explain_abandoned_waits()) return;
    // 2. Everyone missing is parked elsewhere: group creation, point to point, or a cycle.
    for (const OpenWait& w : r_.waits) {
      if (w.signature.op == CollectiveOp::kNewGroup) return explain_skipped_creation(w);
    }
    size_t p2p_lines = 0;
    for (const OpenWait& w : r_.waits) {
      if (!is_p2p(w) || mentioned_.contains(w.arrived.front())) continue;
      if (p2p_lines == kOtherWaitsListed) {
        say("... and more point-to-point waits (see per rank)");
        break;
      }
      p2p_lines += explain_p2p(w) ? 1 : 0;
    }
    if (p2p_lines == 0 && r_.culprits.empty()) explain_cycle();
  }

  // Waits (not yet told) that lost a member for good; false when there are none.
  bool explain_abandoned_waits() {
    std::vector<const OpenWait*> abandoned;
    for (const OpenWait& w : r_.waits) {
      if (!gone(w).empty() && !mentioned_.contains(w.arrived.front())) abandoned.push_back(&w);
    }
    // Point-to-point waits with the same story (a whole pipeline stage short of one send) are
    // told once, with rank ranges.
    std::map<P2pStory, std::vector<const OpenWait*>> stories;
    for (const OpenWait* w : abandoned) {
      if (is_p2p(*w)) stories[story_of(*w)].push_back(w);
    }
    size_t told = 0, covered = 0;
    std::set<P2pStory> done;
    for (const OpenWait* w : abandoned) {
      if (told == kOtherWaitsListed) break;
      if (is_p2p(*w)) {
        const P2pStory story = story_of(*w);
        const std::vector<const OpenWait*>& same = stories.at(story);
        if (same.size() > 1) {
          if (done.insert(story).second) {
            say_unmatched_together(same);
            ++told;
            covered += same.size();
          }
          continue;
        }
      }
      explain_abandoned(*w);
      ++told;
      ++covered;
    }
    if (abandoned.size() > covered) {
      say(fmt::format("... and {} more collectives that lost a member",
                      abandoned.size() - covered));
    }
    return !abandoned.empty();
  }

  void explain_abandoned(const OpenWait& w) {
    const std::vector<int64_t> who = gone(w);
    std::vector<int64_t> failed, other;
    for (int64_t m : who) {
      (activity(m).state == RankActivity::State::kFailed ? failed : other).push_back(m);
    }
    const std::vector<int64_t>& culprits = failed.empty() ? other : failed;
    const std::string entered = location_text(activity(w.arrived.front()));
    const bool may_be_extra =
        r_.cause == HangCause::kRankExitedEarly || r_.kind == HangKind::kDesync;
    // More ranks finished without it, or as many and the call is one its callers usually skip.
    const bool fewer = w.arrived.size() < other.size() ||
                       (w.arrived.size() == other.size() &&
                        std::all_of(w.arrived.begin(), w.arrived.end(),
                                    [&](int64_t a) { return odd_call(a, w.site); }));
    if (may_be_extra && failed.empty() && !is_p2p(w) && fewer &&
        std::all_of(other.begin(), other.end(), [&](int64_t m) {
          return activity(m).state == RankActivity::State::kFinished;
        })) {
      return explain_extra_collective(w, other, entered);
    }
    blame(culprits);
    if (is_p2p(w)) return say_unmatched(w, "then " + now(culprits.front()));
    // One sentence per place the culprits stopped (line and state), the first few of them.
    std::map<std::tuple<int64_t, int64_t, int>, std::vector<int64_t>> by_place;
    for (int64_t c : culprits) {
      const RankActivity& a = activity(c);
      by_place[{a.where.line, a.where.column, static_cast<int>(a.state)}].push_back(c);
    }
    std::vector<std::vector<int64_t>> places;
    for (auto& [place, ranks] : by_place) places.push_back(std::move(ranks));
    std::sort(places.begin(), places.end());  // by lowest rank
    for (size_t i = 0; i < places.size() && i < kOtherWaitsListed; ++i) {
      // A failure's message may end in a clause of its own ("... without being a member").
      const bool stopped_failing =
          activity(places[i].front()).state == RankActivity::State::kFailed;
      say(fmt::format("{} {}{} {}", ranks_text(places[i]), now(places[i].front()),
                      stopped_failing
                          ? (places[i].size() == 1 ? "; it never called" : "; they never called")
                          : " without calling",
                      in_wait(w)));
    }
    if (places.size() > kOtherWaitsListed) {
      say(fmt::format("... and ranks that stopped in {} other places",
                      places.size() - kOtherWaitsListed));
    }
    mentioned_.insert(w.arrived.begin(), w.arrived.end());
    say(fmt::format("{} wait{} for {} there (entered at {})", ranks_text(w.arrived),
                    w.arrived.size() == 1 ? "s" : "", culprits.size() == 1 ? "it" : "them",
                    entered));
  }

  // Fewer members entered than finished without it: the odd ones are those that called it (a
  // collective under a `when`, such as a full_tensor() on rank 0 alone).
  void explain_extra_collective(const OpenWait& w, const std::vector<int64_t>& finished,
                                const std::string& entered) {
    refine(HangCause::kExtraCollective);
    blame(w.arrived);
    mentioned_.insert(w.arrived.begin(), w.arrived.end());
    say(fmt::format("{} alone called {} at {}; {} finished without it", ranks_text(w.arrived),
                    in_wait(w), entered, ranks_text(finished)));
  }

  void explain_skipped_creation(const OpenWait& w) {
    blame(w.missing);
    mentioned_.insert(w.arrived.begin(), w.arrived.end());
    say(fmt::format("{} wait in {} at {}, which {} skipped", ranks_text(w.arrived), in_wait(w),
                    location_text(activity(w.arrived.front())), ranks_text(w.missing)));
    std::set<int64_t> said;
    for (int64_t m : w.missing) {
      if (said.size() >= kOtherWaitsListed) break;
      const int64_t index = r_.ranks[static_cast<size_t>(m)].wait;
      if (!said.insert(index).second) continue;
      const OpenWait& other = r_.waits[static_cast<size_t>(index)];
      std::vector<int64_t> there;
      for (int64_t x : w.missing) {
        if (r_.ranks[static_cast<size_t>(x)].wait == index) there.push_back(x);
      }
      say(fmt::format("{} went on to {} at {}", ranks_text(there), in_wait(other),
                      location_text(activity(m))));
    }
  }

  // Where `rank` is parked in `op` (send or recv) with peer `peer`, or null.
  const OpenWait* parked_in(int64_t rank, CollectiveOp op, int64_t peer) const {
    const OpenWait* w = wait_of(rank);
    if (w == nullptr || w->signature.op != op) return nullptr;
    return w->signature.root == peer ? w : nullptr;
  }

  bool explain_p2p(const OpenWait& w) {
    const int64_t me = w.arrived.front();
    const int64_t peer = *w.signature.root;
    if (w.signature.op == CollectiveOp::kSend) {
      if (const OpenWait* back = parked_in(peer, CollectiveOp::kSend, me)) {
        refine(HangCause::kHeadToHeadSend);
        blame({std::min(me, peer), std::max(me, peer)});
        mentioned_.insert(peer);
        say(
            fmt::format("ranks {} and {} both send to each other first ({} seq {} at {}; {} seq "
                        "{} at {}): each blocking send waits for a recv the other never reaches",
                        me, peer, w.channel, w.seq, location_text(activity(me)), back->channel,
                        back->seq, location_text(activity(peer))));
        return true;
      }
    } else {
      // Someone else sends to this rank while it waits for `peer`.
      for (const OpenWait& other : r_.waits) {
        if (other.signature.op != CollectiveOp::kSend || other.signature.root != me) continue;
        const int64_t sender = other.arrived.front();
        if (sender == peer) continue;
        refine(HangCause::kWrongPeer);
        blame({me});
        mentioned_.insert(sender);
        say(fmt::format(
            "rank {} receives from rank {} ({} seq {} at {}), but rank {} sends to "
            "it ({} seq {} at {}); rank {} {}",
            me, peer, w.channel, w.seq, location_text(activity(me)), sender, other.channel,
            other.seq, location_text(activity(sender)), peer, now(peer)));
        return true;
      }
      if (const OpenWait* back = parked_in(peer, CollectiveOp::kRecv, me)) {
        refine(HangCause::kHeadToHeadRecv);
        blame({std::min(me, peer), std::max(me, peer)});
        mentioned_.insert(peer);
        say(fmt::format(
            "ranks {} and {} both receive from each other first ({} seq {} at {}; {} seq {} at "
            "{}): each recv waits for a send the other posts only after its own recv",
            me, peer, w.channel, w.seq, location_text(activity(me)), back->channel, back->seq,
            location_text(activity(peer))));
        return true;
      }
    }
    // The peer is parked in something else: it posted fewer matching calls.
    const OpenWait* elsewhere = wait_of(peer);
    if (elsewhere == nullptr || is_p2p(*elsewhere)) return false;
    say_unmatched(w, now(peer));
    return true;
  }

  // What makes two abandoned send/recv waits the same story: op, group, seq, the line the
  // waiting rank is at, and where and how its peer stopped.
  using P2pStory = std::tuple<int, std::string, int64_t, int64_t, int, int64_t>;
  P2pStory story_of(const OpenWait& w) const {
    const RankActivity& peer = activity(*w.signature.root);
    return {static_cast<int>(w.signature.op),
            w.group,
            w.seq,
            activity(w.arrived.front()).where.line,
            static_cast<int>(peer.state),
            peer.where.line};
  }

  void say_unmatched_together(const std::vector<const OpenWait*>& same) {
    refine(HangCause::kUnmatchedPointToPoint);
    std::vector<int64_t> waiting, peers;
    for (const OpenWait* w : same) {
      waiting.push_back(w->arrived.front());
      peers.push_back(*w->signature.root);
    }
    std::sort(waiting.begin(), waiting.end());
    std::sort(peers.begin(), peers.end());
    blame(peers);
    mentioned_.insert(waiting.begin(), waiting.end());
    const OpenWait& w = *same.front();
    const bool recv = w.signature.op == CollectiveOp::kRecv;
    say(fmt::format(
        "ranks {} wait in their {} {} ranks {} (one channel each on {} seq {}, such "
        "as {}; at {}), but each of ranks {} posted {} {}{} to its partner and then {}",
        rank_ranges(waiting), ordinal(w.seq), recv ? "recv from" : "send to", rank_ranges(peers),
        w.group, w.seq, w.channel, location_text(activity(w.arrived.front())), rank_ranges(peers),
        w.seq - 1, recv ? "send" : "recv", w.seq - 1 == 1 ? "" : "s", now(peers.front())));
  }

  // "rank 4 waits in its 2nd recv from rank 6 (...), but rank 6 posted 1 send to rank 4 and
  // <then>": the n-th send meets the n-th recv, so the peer posted seq - 1 of them.
  void say_unmatched(const OpenWait& w, const std::string& then) {
    refine(HangCause::kUnmatchedPointToPoint);
    const int64_t me = w.arrived.front(), peer = *w.signature.root;
    blame({peer});
    mentioned_.insert(me);
    const bool recv = w.signature.op == CollectiveOp::kRecv;
    say(
        fmt::format("rank {} waits in its {} {} rank {} ({} seq {}, at {}), but rank {} posted {} "
                    "{}{} {} rank {} and {}",
                    me, ordinal(w.seq), recv ? "recv from" : "send to", peer, w.channel, w.seq,
                    location_text(activity(me)), peer, w.seq - 1, recv ? "send" : "recv",
                    w.seq - 1 == 1 ? "" : "s", recv ? "to" : "from", me, then));
  }

  void explain_cycle() {
    // Follow each rank to the lowest member it waits for until a rank repeats.
    std::vector<int64_t> path;
    std::map<int64_t, size_t> seen;
    int64_t rank = r_.blocked().empty() ? -1 : r_.blocked().front();
    while (rank >= 0 && !seen.contains(rank)) {
      seen[rank] = path.size();
      path.push_back(rank);
      const OpenWait* w = wait_of(rank);
      rank = w == nullptr || w->missing.empty() ? -1 : w->missing.front();
    }
    if (rank < 0) {
      say("no rank can make progress, and none is missing from a collective");
      return;
    }
    std::vector<int64_t> cycle(path.begin() + static_cast<ptrdiff_t>(seen[rank]), path.end());
    if (std::all_of(cycle.begin(), cycle.end(), [&](int64_t r) { return is_p2p(*wait_of(r)); }))
      return explain_p2p_cycle(cycle);
    // Steps run in file order, so a rank parked on a later line than a collective it is missing
    // from went past it: it skipped the call, or makes it later (an order inversion).
    std::vector<int64_t> ahead;
    for (size_t i = 0; i < cycle.size(); ++i) {
      const OpenWait& w = *wait_of(cycle[i]);
      const int64_t next = cycle[(i + 1) % cycle.size()];
      const SourceLocation& here = activity(cycle[i]).where;
      const SourceLocation& there = activity(next).where;
      if (here.file != there.file || there.line <= here.line || activity(cycle[i]).in_loop ||
          activity(next).in_loop) {
        continue;
      }
      const OpenWait* later = wait_of(next);
      say(
          fmt::format("rank {} went past {} at line {}, where {} wait{} for it, to {} at line {}: "
                      "it skipped the call, or makes it later (an order inversion)",
                      next, in_wait(w), here.line, ranks_text(w.arrived),
                      w.arrived.size() == 1 ? "s" : "", in_wait(*later), there.line));
      mentioned_.insert(w.arrived.begin(), w.arrived.end());
      ahead.push_back(next);
    }
    std::vector<std::string> steps;
    for (size_t i = 0; i < cycle.size(); ++i) {
      const OpenWait& w = *wait_of(cycle[i]);
      steps.push_back(fmt::format("rank {} waits in {} at {} for rank {}", cycle[i], in_wait(w),
                                  location_text(activity(cycle[i])),
                                  cycle[(i + 1) % cycle.size()]));
    }
    std::vector<int64_t> sorted = cycle;
    std::sort(sorted.begin(), sorted.end());
    blame(ahead.empty() ? sorted : ahead);
    mentioned_.insert(sorted.begin(), sorted.end());
    if (cycle.size() == 2 && !ahead.empty()) return;  // the sentence above says it all
    say(fmt::format("{} wait for each other in a cycle, each in another collective:",
                    ranks_text(sorted)));
    for (size_t i = 0; i < steps.size() && i < 4; ++i) say("  " + steps[i]);
    if (steps.size() > 4) say(fmt::format("  ... and {} more in the cycle", steps.size() - 4));
  }

  // A ring of blocking sends/recvs, each to the next rank of the ring: every rank posts its
  // half of one pair before its half of the pair the previous rank waits in.
  void explain_p2p_cycle(const std::vector<int64_t>& cycle) {
    refine(HangCause::kPointToPointCycle);
    std::vector<int64_t> sorted = cycle;
    std::sort(sorted.begin(), sorted.end());
    blame(sorted);
    say(
        fmt::format("{} wait for each other in a ring of blocking send/recv, each posted before "
                    "the call its neighbour waits for (order them so every send meets a posted "
                    "recv: for example even ranks send first, odd ranks receive first):",
                    ranks_text(sorted)));
    for (size_t i = 0; i < cycle.size() && i < 4; ++i) {
      say(fmt::format("  rank {} waits in {} at {}", cycle[i], in_wait(*wait_of(cycle[i])),
                      location_text(activity(cycle[i]))));
    }
    if (cycle.size() > 4) say(fmt::format("  ... and {} more in the ring", cycle.size() - 4));
  }

  // Blocked ranks the sentences above did not name: what they wait in, biggest groups first.
  // Sends and recvs are told relative to the rank ("src=rank-256"), so a pipeline stage that
  // waits on the one before is one entry.
  void say_the_rest() {
    std::sort(r_.culprits.begin(), r_.culprits.end());
    r_.culprits.erase(std::unique(r_.culprits.begin(), r_.culprits.end()), r_.culprits.end());
    std::map<std::string, std::vector<int64_t>> by_story;
    std::vector<std::string> order;  // stories in the order first told
    const auto tell = [&](const std::string& story, int64_t rank) {
      std::vector<int64_t>& who = by_story[story];
      if (who.empty()) order.push_back(story);
      who.push_back(rank);
    };
    std::map<std::string, std::vector<int64_t>> relative;  // send/recv stories
    for (const HangReport::Rank& rank : r_.ranks) {
      if (rank.wait < 0 || mentioned_.contains(rank.rank)) continue;
      const OpenWait& w = r_.waits[static_cast<size_t>(rank.wait)];
      if (is_p2p(w)) {
        relative[fmt::format("in {} on {} p2p seq {}", relative_call(w.signature, rank.rank),
                             w.group, w.seq)]
            .push_back(rank.rank);
      } else {
        tell(fmt::format("in {} on {} seq {}", w.signature.describe(), w.channel, w.seq),
             rank.rank);
      }
    }
    // A send/recv story of one rank reads better with its peer by number.
    for (const auto& [story, who] : relative) {
      if (who.size() > 1) {
        for (int64_t rank : who) tell(story, rank);
        continue;
      }
      const OpenWait& w = *wait_of(who.front());
      tell(fmt::format("in {} on {} seq {}", w.signature.describe(), w.channel, w.seq),
           who.front());
    }
    if (order.empty()) return;
    std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
      return by_story[a].size() > by_story[b].size();
    });
    std::vector<std::string> parts;
    for (size_t i = 0; i < order.size() && i < kOtherWaitsListed; ++i)
      parts.push_back(fmt::format("{} {}", ranks_text(by_story[order[i]]), order[i]));
    size_t more = 0;
    for (size_t i = kOtherWaitsListed; i < order.size(); ++i) more += by_story[order[i]].size();
    std::string line = fmt::format("also blocked: {}", fmt::join(parts, "; "));
    if (more > 0)
      line += fmt::format("; {} more ranks in {} other collectives", more,
                          order.size() - kOtherWaitsListed);
    say(line);
  }

  HangReport& r_;
  bool cause_fixed_ = false;  // a departure named the cause; the sentences after it keep it
  std::set<int64_t> mentioned_;
  // Caches of the comparisons across ranks (filled as the sentences need them).
  mutable std::map<int32_t, SkipLog::Count> world_counts_;
  mutable bool indexed_ = false;
  mutable std::map<SkipKey, std::vector<int64_t>> skip_makers_;
  mutable std::map<StepKey, size_t> step_skippers_;
  mutable std::map<StepKey, size_t> isolated_skippers_;
  mutable std::map<StepKey, std::vector<int64_t>> isolated_makers_;
  mutable std::deque<SkipLog::Tally> isolated_;  // one-skip tallies the stories point at
  mutable std::map<int64_t, std::vector<int64_t>> group_members_;
  mutable std::vector<std::vector<int64_t>> groups_of_;
  mutable std::map<std::pair<std::vector<SkipKey>, std::vector<int64_t>>, std::set<int64_t>>
      peers_memo_;
};

}  // namespace

std::string_view hang_cause_name(HangCause cause) {
  return name_in(kHangCauseNames, cause);
}

constexpr EnumName<HangKind> kHangKindNames[] = {
    {HangKind::kDeadlock, "deadlock"},
    {HangKind::kDesync, "desync"},
    {HangKind::kTimeout, "timeout"},
    {HangKind::kWallClock, "wall_clock"},
};

std::string_view hang_kind_name(HangKind kind) {
  return name_in(kHangKindNames, kind);
}

HangReport analyze_hang(const std::vector<RankActivity>& activity, const Rendezvous& rendezvous,
                        const std::optional<TimeoutRecord>& timeout) {
  HangReport report;
  report.desyncs = rendezvous.desyncs();
  // Found in schedule order; listed by where they are, so every schedule tells the same story.
  std::sort(report.desyncs.begin(), report.desyncs.end(),
            [](const DesyncRecord& a, const DesyncRecord& b) {
              return std::tie(a.members, a.seq, a.group_id) <
                     std::tie(b.members, b.seq, b.group_id);
            });
  report.timeout = timeout;
  std::vector<int64_t> wait_of;
  report.waits = rendezvous.open_waits(wait_of);
  for (size_t r = 0; r < activity.size(); ++r) {
    const auto rank = static_cast<int64_t>(r);
    report.ranks.push_back({rank, activity[r], rendezvous.wait_of(rank), wait_of[r]});
  }
  bool any_failed = false, any_exited = false, creating_group = false;
  std::vector<std::vector<int64_t>> edges(report.waits.size());
  for (size_t i = 0; i < report.waits.size(); ++i) {
    const auto& w = report.waits[i];
    creating_group = creating_group || w.signature.op == CollectiveOp::kNewGroup;
    std::set<int64_t> targets;
    for (int64_t m : w.missing) {
      const auto state = activity[static_cast<size_t>(m)].state;
      any_failed = any_failed || state == RankActivity::State::kFailed;
      any_exited = any_exited || state == RankActivity::State::kFinished;
      if (wait_of[static_cast<size_t>(m)] >= 0) targets.insert(wait_of[static_cast<size_t>(m)]);
    }
    edges[i].assign(targets.begin(), targets.end());
  }
  if (report.timeout) {
    report.kind = HangKind::kTimeout;
    report.cause = HangCause::kTimeout;
  } else if (!report.desyncs.empty()) {
    report.kind = HangKind::kDesync;
    report.cause = HangCause::kSignatureMismatch;
  } else {
    report.kind = HangKind::kDeadlock;
    // A rank waiting to create a group means others skipped creating it; whatever they wait in
    // next closes a cycle, but the skipped creation is the cause.
    report.cause = any_failed         ? HangCause::kRankFailed
                   : creating_group   ? HangCause::kMissingRank
                   : has_cycle(edges) ? HangCause::kOrderInversion
                   : any_exited       ? HangCause::kRankExitedEarly
                                      : HangCause::kMissingRank;
  }
  report.divergences = rendezvous.site_divergences();
  for (size_t i = 0; i < report.divergences.size() && !report.first_divergence; ++i) {
    const SiteDivergence& d = report.divergences[i];
    // A desync is its own first divergence.
    const bool desync =
        std::any_of(report.desyncs.begin(), report.desyncs.end(), [&](const DesyncRecord& x) {
          return x.group_id == std::to_string(d.group_id) && x.seq == d.seq;
        });
    if (!desync) report.first_divergence = i;
  }
  const auto label = [&](int64_t id) {
    if (!report.group_labels.contains(id)) report.group_labels[id] = rendezvous.group_label(id);
  };
  for (const SiteDivergence& d : report.divergences) label(d.group_id);
  for (const RankActivity& a : activity) {
    for (const CollectiveRecord& c : a.history.records(FlightRecorder::kReportDepth))
      label(c.group_id);
  }
  report.groups = rendezvous.collective_groups();
  for (const auto& [id, members] : report.groups) label(id);
  report.legacy_cause = report.cause;
  RootCause(report).explain();  // may refine the cause (point to point)
  return report;
}

HangReport wall_clock_report(const std::vector<RankActivity>& activity,
                             const Rendezvous& rendezvous, double limit_s) {
  HangReport report = analyze_hang(activity, rendezvous, std::nullopt);
  report.kind = HangKind::kWallClock;
  report.cause = report.legacy_cause = HangCause::kWallClockLimit;
  report.culprits.clear();
  report.blamed_earlier = false;
  report.probe.reset();  // a second run would only reach the limit again
  int64_t running = 0, blocked = 0, done = 0;
  for (const HangReport::Rank& r : report.ranks) {
    if (r.wait >= 0) {
      ++blocked;
    } else if (r.activity.state == RankActivity::State::kRunning) {
      ++running;
    } else {
      ++done;
    }
  }
  report.summary = {
      fmt::format("the run was stopped after {:g} s of wall-clock time (--timeout), still going: "
                  "of its {} ranks, {} running, {} blocked in a collective, {} done. Where each "
                  "one was follows; a rerun with a longer limit tells a slow run from a livelock.",
                  limit_s, report.ranks.size(), running, blocked, done)};
  return report;
}

std::vector<int64_t> HangReport::blocked() const {
  std::vector<int64_t> out;
  for (const Rank& r : ranks) {
    if (r.wait >= 0) out.push_back(r.rank);
  }
  return out;
}

std::vector<int64_t> HangReport::missing() const {
  std::set<int64_t> out;
  for (const auto& w : waits) out.insert(w.missing.begin(), w.missing.end());
  return {out.begin(), out.end()};
}

const std::vector<int64_t>& HangReport::waits_for(int64_t rank) const {
  const int64_t w = ranks.at(static_cast<size_t>(rank)).wait;
  return w < 0 ? kNoRanks : waits[static_cast<size_t>(w)].missing;
}

}  // namespace meshsim::sim
