#include "sim/runtime/hang_report.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace meshsim::sim {

namespace {

constexpr size_t kListMembersUpTo = 64;  // larger groups are described by their size
constexpr size_t kMaxEdges = 4096;       // larger wait-for graphs are given per collective

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

std::string location_text(const RankActivity& a) {
  return a.where.line > 0 ? fmt::format("{} ({})", a.where.to_string(), a.step) : "(no step)";
}

// A finished rank's `where` is the last step it ran (steps its `when` skipped do not count).
std::string finished_text(const RankActivity& a) {
  return a.where.line > 0 ? fmt::format("finished after {}", location_text(a)) : "finished";
}

std::string group_text(const OpenWait& w) {
  return label_with_members(w.channel, *w.members);
}

// "all_reduce(float32[4], op=sum) on world.tp#1 [4, 5, 6, 7] seq 3"; group creation:
// "new_group creating world.tp's 2 groups of 2 ([0, 1], ...) (store barrier seq 1)".
std::string call_text(const OpenWait& w, const Signature& signature) {
  if (signature.op == CollectiveOp::kNewGroup) {
    return fmt::format("new_group creating {} (store barrier seq {})",
                       w.creating.empty() ? "groups" : w.creating, w.seq);
  }
  return fmt::format("{} on {} seq {}", signature.describe(), group_text(w), w.seq);
}

// "rank 3", "ranks 0-2", "ranks 8-1023 (1016 ranks)".
std::string ranks_text(const std::vector<int64_t>& ranks) {
  if (ranks.size() == 1) return fmt::format("rank {}", ranks[0]);
  const std::string list = compact_ranks(ranks);
  return ranks.size() <= 4 ? fmt::format("ranks {}", list)
                           : fmt::format("ranks {} ({} ranks)", list, ranks.size());
}

// Text inside a quoted DOT label.
std::string dot_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

bool is_p2p(const OpenWait& w) {
  return w.signature.op == CollectiveOp::kSend || w.signature.op == CollectiveOp::kRecv;
}

// A send or recv as `rank` calls it, its peer relative to the rank: "recv(float32[4],
// src=rank-256)", so that a pipeline stage's calls read the same.
std::string relative_call(const Signature& sig, int64_t rank) {
  std::string call = sig.describe();
  if (!sig.root) return call;
  const std::string key = sig.op == CollectiveOp::kSend ? "dst" : "src";
  const std::string peer = fmt::format("{}={}", key, *sig.root);
  if (const size_t at = call.find(peer); at != std::string::npos)
    call.replace(at, peer.size(), fmt::format("{}=rank{:+}", key, *sig.root - rank));
  return call;
}

// "1st", "2nd", "3rd", "4th", ...
std::string ordinal(int64_t n) {
  const int64_t tens = n % 100;
  const char* suffix = (tens >= 11 && tens <= 13) ? "th"
                       : n % 10 == 1              ? "st"
                       : n % 10 == 2              ? "nd"
                       : n % 10 == 3              ? "rd"
                                                  : "th";
  return fmt::format("{}{}", n, suffix);
}

// Builds the root-cause sentences of a report (its kind and culprits already known or found here).
class RootCause {
 public:
  explicit RootCause(HangReport& r) : r_(r) {}

  void explain() {
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
    explain_divergence();
    say_the_rest();
  }

 private:
  static constexpr size_t kDesyncsListed = 4;
  static constexpr size_t kOtherWaitsListed = 3;

  const RankActivity& activity(int64_t rank) const {
    return r_.ranks[static_cast<size_t>(rank)].activity;
  }
  const OpenWait* wait_of(int64_t rank) const {
    const int64_t w = r_.ranks[static_cast<size_t>(rank)].wait;
    return w < 0 ? nullptr : &r_.waits[static_cast<size_t>(w)];
  }
  void say(std::string line) { r_.summary.push_back(std::move(line)); }
  // A deadlock's cause is refined by what the sentences find; a desync stays a desync.
  void refine(HangCause cause) {
    if (r_.kind == HangKind::kDeadlock) r_.cause = cause;
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

  // Only when it comes before the hang itself: a desync is its own first divergence.
  void explain_divergence() {
    if (!r_.divergence) return;
    const Divergence& d = *r_.divergence;
    for (const DesyncRecord& desync : r_.desyncs) {
      if (desync.group_id == std::to_string(d.group_id) && desync.seq == d.seq) return;
    }
    std::vector<std::string> parts;
    for (const auto& [call, who] : d.calls)
      parts.push_back(fmt::format("{} called {}", ranks_text(who), call));
    say(fmt::format("first divergence: {} seq {}: {}", r_.group_labels.at(d.group_id), d.seq,
                    fmt::join(parts, "; ")));
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
    } else {
      for (const auto& [call, who] : calls) blame(who);
      say(fmt::format("{} seq {}: {}", d.channel, d.seq, fmt::join(parts, "; ")));
    }
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
    if (p2p_lines == 0) explain_cycle();
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
    if (may_be_extra && failed.empty() && !is_p2p(w) && w.arrived.size() < other.size() &&
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
      say(fmt::format("{} {} without calling {}", ranks_text(places[i]), now(places[i].front()),
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
  std::set<int64_t> mentioned_;  // ranks the sentences so far name
};

}  // namespace

std::string_view hang_cause_name(HangCause cause) {
  switch (cause) {
    case HangCause::kMissingRank:
      return "missing rank";
    case HangCause::kSignatureMismatch:
      return "signature mismatch";
    case HangCause::kOrderInversion:
      return "cross-group order inversion";
    case HangCause::kRankExitedEarly:
      return "rank exited early";
    case HangCause::kExtraCollective:
      return "collective only some ranks called";
    case HangCause::kRankFailed:
      return "rank failed";
    case HangCause::kTimeout:
      return "watchdog timeout";
    case HangCause::kUnmatchedPointToPoint:
      return "unmatched send/recv";
    case HangCause::kHeadToHeadSend:
      return "head-to-head send";
    case HangCause::kWrongPeer:
      return "recv from the wrong peer";
    case HangCause::kHeadToHeadRecv:
      return "head-to-head recv";
    case HangCause::kPointToPointCycle:
      return "point-to-point cycle";
  }
  return "?";
}

std::string_view hang_kind_name(HangKind kind) {
  switch (kind) {
    case HangKind::kDeadlock:
      return "deadlock";
    case HangKind::kDesync:
      return "desync";
    case HangKind::kTimeout:
      return "timeout";
  }
  return "?";
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
  report.divergence = first_divergence(activity);
  for (const RankActivity& a : activity) {
    for (const CollectiveRecord& c : a.history.records()) {
      if (!report.group_labels.contains(c.group_id))
        report.group_labels[c.group_id] = rendezvous.group_label(c.group_id);
    }
  }
  report.legacy_cause = report.cause;
  RootCause(report).explain();  // may refine the cause (point to point)
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

std::string HangReport::text() const {
  std::string out = fmt::format("{}: {}\n", hang_kind_name(kind), hang_cause_name(cause));
  for (const std::string& line : summary) out += "  " + line + "\n";
  // Ranks with the same story share one line, in order of their lowest rank. A send or recv is
  // told relative to the rank ("src=rank-256") when other ranks tell the same story that way: a
  // pipeline stage waiting on the one before is one line, not one per rank.
  std::vector<std::string> absolute(ranks.size()), relative(ranks.size());
  std::map<std::string, size_t> relative_count;
  for (const Rank& r : ranks) {
    const RankActivity& a = r.activity;
    std::string& what = absolute[static_cast<size_t>(r.rank)];
    if (r.wait >= 0) {
      const auto& w = waits[static_cast<size_t>(r.wait)];
      what = "blocked in " + call_text(w, r.waiting->signature);
      if (!w.missing.empty()) what += fmt::format(", waiting for {}", ranks_text(w.missing));
      const Signature& sig = r.waiting->signature;
      if ((sig.op == CollectiveOp::kSend || sig.op == CollectiveOp::kRecv) && sig.root) {
        relative[static_cast<size_t>(r.rank)] = fmt::format(
            "blocked in {} on {} p2p seq {}, waiting for rank{:+} at {}",
            relative_call(sig, r.rank), w.group, w.seq, *sig.root - r.rank, location_text(a));
        ++relative_count[relative[static_cast<size_t>(r.rank)]];
      }
    } else if (a.state == RankActivity::State::kFailed ||
               a.state == RankActivity::State::kAborted) {
      what = fmt::format("{}: {}", state_name(a.state), a.error);
    } else if (a.state == RankActivity::State::kFinished) {
      what = finished_text(a);
      continue;
    } else {
      what = std::string(state_name(a.state));
    }
    what += " at " + location_text(a);
  }
  std::vector<std::pair<std::string, std::vector<int64_t>>> lines;
  std::map<std::string, size_t> line_of;
  for (const Rank& r : ranks) {
    const std::string& rel = relative[static_cast<size_t>(r.rank)];
    const std::string& what =
        !rel.empty() && relative_count[rel] > 1 ? rel : absolute[static_cast<size_t>(r.rank)];
    auto [it, fresh] = line_of.emplace(what, lines.size());
    if (fresh) lines.emplace_back(what, std::vector<int64_t>{});
    lines[it->second].second.push_back(r.rank);
  }
  // The culprits' lines first: they are what the summary talks about.
  std::stable_partition(lines.begin(), lines.end(), [&](const auto& line) {
    return std::binary_search(culprits.begin(), culprits.end(), line.second.front());
  });
  out += "  per rank:\n";
  for (const auto& [what, who] : lines) {
    out += fmt::format("    rank{} {}: {}\n", who.size() > 1 ? "s" : "", rank_ranges(who), what);
  }
  // Flight recorders: one rank's for each story, the culprits' first (every rank's is in the
  // JSON).
  constexpr size_t kHistoriesShown = 6;
  size_t shown = 0;
  for (const auto& [what, who] : lines) {
    if (shown == kHistoriesShown) break;
    const RankActivity& a = ranks[static_cast<size_t>(who.front())].activity;
    const std::vector<CollectiveRecord> records = a.history.records();
    if (records.empty()) continue;
    out += fmt::format(
        "    last {} collectives of rank {}{} (of {}, oldest first):\n", records.size(),
        who.front(), who.size() > 1 ? fmt::format(", the first of ranks {}", rank_ranges(who)) : "",
        a.history.total());
    for (const CollectiveRecord& c : records) out += "      " + record_text(who.front(), c) + "\n";
    ++shown;
  }
  return out;
}

std::string HangReport::record_text(int64_t rank, const CollectiveRecord& c) const {
  const auto label = group_labels.find(c.group_id);
  std::string where = label == group_labels.end() ? std::to_string(c.group_id) : label->second;
  if (c.peer >= 0) {
    const bool sends = c.signature.op == CollectiveOp::kSend;
    where += fmt::format(" p2p {}→{}", sends ? rank : c.peer, sends ? c.peer : rank);
  }
  return fmt::format("{} seq {}: {} at line {}, {}", where, c.seq, c.signature.describe(), c.line,
                     record_state_name(c.state));
}

nlohmann::json HangReport::json() const {
  nlohmann::json waits_json = nlohmann::json::array();
  for (const auto& w : waits) {
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
  for (const Rank& r : ranks) {
    nlohmann::json j{{"rank", r.rank},
                     {"state", state_name(r.activity.state)},
                     {"location",
                      {{"file", r.activity.where.file},
                       {"line", r.activity.where.line},
                       {"column", r.activity.where.column}}},
                     {"step", r.activity.step},
                     {"virtual_time_s", r.activity.clock}};
    if (r.wait >= 0) j["wait"] = r.wait;
    if (!r.activity.error.empty()) j["error"] = r.activity.error;
    nlohmann::json history = nlohmann::json::array();
    for (const CollectiveRecord& c : r.activity.history.records()) {
      nlohmann::json e{{"group", group_labels.at(c.group_id)},
                       {"group_id", std::to_string(c.group_id)},
                       {"seq", c.seq},
                       {"signature", c.signature.describe()},
                       {"line", c.line},
                       {"state", record_state_name(c.state)}};
      if (c.peer >= 0) e["peer"] = c.peer;
      history.push_back(std::move(e));
    }
    j["history"] = std::move(history);
    j["history_total"] = r.activity.history.total();
    edge_count += waits_for(r.rank).size();
    ranks_json.push_back(std::move(j));
  }
  nlohmann::json out{{"kind", hang_kind_name(kind)},
                     {"cause", hang_cause_name(cause)},
                     {"summary", summary},
                     {"culprits", culprits},
                     {"waits", waits_json},
                     {"ranks", ranks_json},
                     {"dot", dot()}};
  if (edge_count <= kMaxEdges) {
    nlohmann::json edges = nlohmann::json::array();
    for (const Rank& r : ranks) {
      for (int64_t to : waits_for(r.rank)) edges.push_back({r.rank, to});
    }
    out["edges"] = edges;
  } else {
    out["edges_omitted"] = edge_count;  // arrived x missing of each entry of "waits"
  }
  if (legacy_cause != cause) out["cause_aliases"] = {hang_cause_name(legacy_cause)};
  if (divergence) {
    nlohmann::json calls = nlohmann::json::array();
    for (const auto& [call, who] : divergence->calls)
      calls.push_back({{"call", call}, {"ranks", who}});
    out["first_divergence"] = {{"group", group_labels.at(divergence->group_id)},
                               {"group_id", std::to_string(divergence->group_id)},
                               {"seq", divergence->seq},
                               {"calls", std::move(calls)}};
  }
  if (!desyncs.empty()) {
    nlohmann::json all = nlohmann::json::array();
    for (const DesyncRecord& d : desyncs) {
      nlohmann::json arrivals = nlohmann::json::array();
      for (const auto& [rank, sig] : d.arrivals) {
        arrivals.push_back({{"rank", rank},
                            {"signature", sig.describe()},
                            {"line", ranks[static_cast<size_t>(rank)].activity.where.line}});
      }
      all.push_back({{"group", d.group},
                     {"group_id", d.group_id},
                     {"seq", d.seq},
                     {"arrivals", std::move(arrivals)}});
    }
    out["desync"] = all.front();  // the first, as before several were reported
    out["desyncs"] = std::move(all);
  }
  if (timeout) {
    out["timeout"] = {{"group", timeout->group},
                      {"group_id", timeout->group_id},
                      {"seq", timeout->seq},
                      {"op", timeout->signature.describe()},
                      {"timed_out", timeout->timed_out},
                      {"late", timeout->late},
                      {"waited_s", timeout->waited_s}};
  }
  return out;
}

namespace {

// Strongly connected components (Kosaraju, iterative: no recursion however long a chain), as a
// component number per node. u -> v lies on a cycle exactly when both share a component.
std::vector<size_t> components(const std::vector<std::set<size_t>>& edges) {
  const size_t n = edges.size();
  std::vector<std::vector<size_t>> reverse(n);
  for (size_t u = 0; u < n; ++u) {
    for (size_t v : edges[u]) reverse[v].push_back(u);
  }
  // 1. Nodes in order of finishing a depth-first walk.
  std::vector<size_t> finished;
  std::vector<bool> seen(n, false);
  for (size_t start = 0; start < n; ++start) {
    if (seen[start]) continue;
    seen[start] = true;
    std::vector<std::pair<size_t, std::set<size_t>::const_iterator>> stack{
        {start, edges[start].begin()}};
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next == edges[node].end()) {
        finished.push_back(node);
        stack.pop_back();
        continue;
      }
      const size_t to = *next++;
      if (!seen[to]) {
        seen[to] = true;
        stack.emplace_back(to, edges[to].begin());
      }
    }
  }
  // 2. Walks of the reversed graph, latest finished first, each one component.
  constexpr size_t kNone = SIZE_MAX;
  std::vector<size_t> component(n, kNone);
  size_t count = 0;
  for (auto it = finished.rbegin(); it != finished.rend(); ++it) {
    if (component[*it] != kNone) continue;
    std::vector<size_t> todo{*it};
    component[*it] = count;
    while (!todo.empty()) {
      const size_t x = todo.back();
      todo.pop_back();
      for (size_t y : reverse[x]) {
        if (component[y] == kNone) {
          component[y] = count;
          todo.push_back(y);
        }
      }
    }
    ++count;
  }
  return component;
}

std::string edge_lines(const std::vector<std::string>& names,
                       const std::vector<std::set<size_t>>& edges) {
  const std::vector<size_t> component = components(edges);
  std::string out;
  for (size_t u = 0; u < edges.size(); ++u) {
    for (size_t v : edges[u]) {
      const bool on_cycle = u == v || component[u] == component[v];
      out += fmt::format("  {} -> {}{};\n", names[u], names[v],
                         on_cycle ? " [color=red, penwidth=2]" : "");
    }
  }
  return out;
}

}  // namespace

std::string HangReport::dot() const {
  // Titled with the kind and cause (and the collective a watchdog gave up on); culprits drawn
  // bold in red, the edges of a cycle in red.
  std::string title = fmt::format("{}: {}", hang_kind_name(kind), hang_cause_name(cause));
  if (timeout) {
    title += fmt::format("\\n{} on {} #{} after {} s", dot_escape(timeout->signature.describe()),
                         dot_escape(timeout->channel), timeout->seq, timeout->waited_s);
  }
  std::string out = fmt::format(
      "digraph wait_for {{\n  rankdir=LR;\n  labelloc=t;\n  label=\"{}\";\n  node [shape=box];\n",
      title);
  auto color_of = [](RankActivity::State s) {
    return s == RankActivity::State::kBlocked    ? "orange"
           : s == RankActivity::State::kFailed   ? "red"
           : s == RankActivity::State::kFinished ? "gray"
                                                 : "black";
  };
  auto culprit = [&](int64_t rank) {
    return std::binary_search(culprits.begin(), culprits.end(), rank);
  };
  auto style_of = [&](bool blamed, RankActivity::State state) {
    return blamed ? std::string("color=red, penwidth=3, style=bold, fontcolor=red")
                  : fmt::format("color={}", color_of(state));
  };
  if (ranks.size() <= kListMembersUpTo) {
    // Ranks that look the same (state, wait, line, blame, whom they wait for, what they called
    // in a desync) share one node: a barrier's fan-in is one box, not one per rank.
    std::map<int64_t, std::string> called;  // a desync's arrivals: rank -> its own signature
    for (const DesyncRecord& d : desyncs) {
      for (const auto& [rank, sig] : d.arrivals) called.emplace(rank, sig.describe());
    }
    auto role_in_timeout = [&](int64_t rank) -> std::string {
      if (!timeout) return "";
      if (std::find(timeout->timed_out.begin(), timeout->timed_out.end(), rank) !=
          timeout->timed_out.end())
        return "watchdog fired";
      if (std::find(timeout->late.begin(), timeout->late.end(), rank) != timeout->late.end())
        return "late";
      return "";
    };
    using Key =
        std::tuple<int64_t, int, int64_t, bool, std::vector<int64_t>, std::string, std::string>;
    std::map<Key, std::vector<int64_t>> by_look;
    for (const Rank& r : ranks) {
      const auto it = called.find(r.rank);
      by_look[{r.wait, static_cast<int>(r.activity.state), r.activity.where.line, culprit(r.rank),
               waits_for(r.rank), it == called.end() ? "" : it->second, role_in_timeout(r.rank)}]
          .push_back(r.rank);
    }
    std::vector<std::vector<int64_t>> nodes;
    for (auto& [look, who] : by_look) nodes.push_back(std::move(who));
    std::sort(nodes.begin(), nodes.end());  // by lowest rank: names stay stable
    std::vector<size_t> node_of(ranks.size());
    std::vector<std::string> names;
    for (size_t n = 0; n < nodes.size(); ++n) {
      for (int64_t rank : nodes[n]) node_of[static_cast<size_t>(rank)] = n;
      names.push_back(fmt::format("r{}", nodes[n].front()));
    }
    std::vector<std::set<size_t>> edges(nodes.size());
    for (size_t n = 0; n < nodes.size(); ++n) {
      const Rank& r = ranks[static_cast<size_t>(nodes[n].front())];
      std::string label = fmt::format("{} {}\\n{}", nodes[n].size() == 1 ? "rank" : "ranks",
                                      rank_ranges(nodes[n]), state_name(r.activity.state));
      const auto own = called.find(r.rank);
      if (r.wait >= 0) {
        // In a desync the wait's op is another member's: each node says what it called.
        const auto& w = waits[static_cast<size_t>(r.wait)];
        label += own == called.end()
                     ? fmt::format("\\n{} {} #{}", collective_op_name(w.signature.op),
                                   dot_escape(w.channel), w.seq)
                     : fmt::format("\\n{} #{}\\ncalled {}", dot_escape(w.channel), w.seq,
                                   dot_escape(own->second));
      }
      if (const std::string role = role_in_timeout(r.rank); !role.empty()) label += "\\n" + role;
      if (r.activity.where.line > 0) label += fmt::format("\\nline {}", r.activity.where.line);
      out += fmt::format("  {} [label=\"{}\", {}];\n", names[n], label,
                         style_of(culprit(r.rank), r.activity.state));
      for (int64_t to : waits_for(r.rank)) edges[n].insert(node_of[static_cast<size_t>(to)]);
    }
    return out + edge_lines(names, edges) + "}\n";
  }
  // Large worlds: one node per kind of collective waited in (op, group, seq and line: the 256
  // recvs of a pipeline stage are one box), its culprits in a node of their own; one node per
  // state of the missing ranks not parked anywhere, its culprits apart too.
  using ClassKey = std::tuple<int, std::string, int64_t, int64_t, int, int64_t>;
  std::map<ClassKey, size_t> class_of_key;
  std::vector<size_t> class_of(waits.size());
  std::vector<std::vector<size_t>> classes;  // wait indices, in order of first appearance
  for (size_t i = 0; i < waits.size(); ++i) {
    const OpenWait& w = waits[i];
    // ... and what the first rank it misses does (parked or not, and where): a stage that waits
    // for a finished stage is not the one waiting for it.
    const Rank& target =
        ranks[static_cast<size_t>(w.missing.empty() ? w.arrived.front() : w.missing.front())];
    const ClassKey key{static_cast<int>(w.signature.op),
                       w.group,
                       w.seq,
                       ranks[static_cast<size_t>(w.arrived.front())].activity.where.line,
                       target.wait >= 0 ? -1 : static_cast<int>(target.activity.state),
                       target.activity.where.line};
    const auto [it, added] = class_of_key.emplace(key, classes.size());
    if (added) classes.emplace_back();
    classes[it->second].push_back(i);
    class_of[i] = it->second;
  }
  std::vector<std::string> names;
  std::vector<size_t> base(classes.size());
  std::vector<std::optional<size_t>> blamed_node(classes.size());
  for (size_t c = 0; c < classes.size(); ++c) {
    const OpenWait& first = waits[classes[c].front()];
    std::vector<int64_t> arrived, blamed;
    for (size_t i : classes[c])
      arrived.insert(arrived.end(), waits[i].arrived.begin(), waits[i].arrived.end());
    std::sort(arrived.begin(), arrived.end());
    std::copy_if(arrived.begin(), arrived.end(), std::back_inserter(blamed), culprit);
    std::string what =
        classes[c].size() == 1
            ? fmt::format("{} {} #{}", collective_op_name(first.signature.op),
                          dot_escape(first.channel), first.seq)
            : fmt::format("{} {} #{}\\n{} of them ({}, ...)",
                          collective_op_name(first.signature.op), dot_escape(first.group),
                          first.seq, classes[c].size(), dot_escape(first.channel));
    if (const int64_t line = ranks[static_cast<size_t>(first.arrived.front())].activity.where.line;
        line > 0)
      what += fmt::format("\\nline {}", line);
    auto ranks_line = [](const std::vector<int64_t>& who) {
      const std::string list = rank_ranges(who);
      return list.size() > 60 ? list.substr(0, 57) + "..." : list;
    };
    base[c] = names.size();
    names.push_back(fmt::format("w{}", c));
    if (blamed.size() == arrived.size()) {
      out += fmt::format("  w{} [label=\"{}\\nranks {} waiting\", {}];\n", c, what,
                         ranks_line(arrived), style_of(true, RankActivity::State::kBlocked));
      continue;
    }
    std::vector<int64_t> others;
    std::set_difference(arrived.begin(), arrived.end(), blamed.begin(), blamed.end(),
                        std::back_inserter(others));
    out += fmt::format("  w{} [label=\"{}\\n{} waiting: {}\", color=orange];\n", c, what,
                       others.size(), ranks_line(others));
    if (blamed.empty()) continue;
    blamed_node[c] = names.size();
    names.push_back(fmt::format("w{}c", c));
    out += fmt::format("  w{}c [label=\"{} {}\\n{}\", {}];\n", c,
                       blamed.size() == 1 ? "rank" : "ranks", ranks_line(blamed), what,
                       style_of(true, RankActivity::State::kBlocked));
  }
  // Missing ranks not parked anywhere, by state and blame.
  std::map<std::pair<std::string, bool>, std::vector<int64_t>> elsewhere;
  for (const OpenWait& w : waits) {
    for (int64_t m : w.missing) {
      const Rank& target = ranks[static_cast<size_t>(m)];
      if (target.wait < 0)
        elsewhere[{std::string(state_name(target.activity.state)), culprit(m)}].push_back(m);
    }
  }
  std::map<std::pair<std::string, bool>, size_t> state_node;
  for (auto& [look, who] : elsewhere) {
    std::sort(who.begin(), who.end());
    who.erase(std::unique(who.begin(), who.end()), who.end());
    const std::string list = rank_ranges(who);
    const std::string name = look.first + (look.second ? "_blamed" : "");
    state_node[look] = names.size();
    names.push_back(name);
    out += fmt::format("  {} [label=\"{}\\nranks {}\", {}];\n", name, look.first,
                       list.size() > 60 ? list.substr(0, 57) + "..." : list,
                       look.second ? style_of(true, RankActivity::State::kFinished) : "color=gray");
  }
  // A missing rank parked elsewhere points at its collective's node (its culprits' node when it
  // is one of them); one not parked, at its state's node.
  auto node_of = [&](int64_t m) {
    const Rank& target = ranks[static_cast<size_t>(m)];
    if (target.wait < 0)
      return state_node.at({std::string(state_name(target.activity.state)), culprit(m)});
    const size_t c = class_of[static_cast<size_t>(target.wait)];
    return culprit(m) && blamed_node[c] ? *blamed_node[c] : base[c];
  };
  std::vector<std::set<size_t>> edges(names.size());
  for (size_t i = 0; i < waits.size(); ++i) {
    const size_t c = class_of[i];
    for (int64_t m : waits[i].missing) {
      edges[base[c]].insert(node_of(m));
      if (blamed_node[c]) edges[*blamed_node[c]].insert(node_of(m));
    }
  }
  return out + edge_lines(names, edges) + "}\n";
}

}  // namespace meshsim::sim
