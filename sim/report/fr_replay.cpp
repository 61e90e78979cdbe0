#include "sim/report/fr_replay.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "sim/report/fr_entry.hpp"
#include "sim/runtime/group_label.hpp"
#include "sim/runtime/hang_phrases.hpp"
#include "src/printable.hpp"
#include "src/tensor/dtype.hpp"

namespace meshsim::sim {

namespace {

// How far ahead the merge looks for a call before giving it to the ranks whose next call it is.
constexpr size_t kLookahead = 16;
// Past this many different histories, each is written as a block of its own (still exact, only
// longer): merging them call by call would cost histories squared per step.
constexpr size_t kMaxMergedHistories = 256;
// Ranks without a dump that are given their peers' calls (each costs a pass over every history);
// past these, they make no call.
constexpr size_t kMaxAssumedRanks = 256;
// Calls the file lists as left out, and notes of one kind, before "and N more".
constexpr size_t kNotesShown = 8;

bool is_world(const FrGroup& g) {
  return g.members_from == "world" || g.desc == "default_pg";
}

// An identifier made of the name's letters, digits and underscores (a group's name or
// description comes from a file); empty when nothing is left.
std::string identifier(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 32))
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')
      out.push_back(c);
  return out;
}

// The dtype the recorder names as c10 does ("Float", "BFloat16").
std::optional<DType> dtype_of(std::string_view scalar_type) {
  for (const DType d : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                        DType::kInt64, DType::kInt32, DType::kUInt8, DType::kBool})
    if (scalar_type_name(d) == scalar_type) return d;
  return std::nullopt;
}

std::string ranks_list(const std::vector<int64_t>& ranks) {
  return fmt::format("[{}]", fmt::join(ranks, ", "));
}

// A `when` expression that holds on `ranks` (sorted, distinct) of a world of `world` ranks: runs
// of ranks, or a pattern of the rank modulo a period when the runs are many.
std::string when_of(const std::vector<int64_t>& ranks, int64_t world) {
  if (static_cast<int64_t>(ranks.size()) == world) return "";
  auto runs_of = [](const std::vector<int64_t>& sorted) {
    std::vector<std::pair<int64_t, int64_t>> runs;
    for (const int64_t r : sorted) {
      if (!runs.empty() && runs.back().second + 1 == r)
        runs.back().second = r;
      else
        runs.emplace_back(r, r);
    }
    return runs;
  };
  auto text_of = [](const std::vector<std::pair<int64_t, int64_t>>& runs, std::string_view of,
                    int64_t end) {
    std::vector<std::string> parts;
    for (const auto& [a, b] : runs) {
      if (a == b)
        parts.push_back(fmt::format("{} == {}", of, a));
      else if (a == 0)
        parts.push_back(fmt::format("{} <= {}", of, b));
      else if (b == end - 1)
        parts.push_back(fmt::format("{} >= {}", of, a));
      else
        parts.push_back(fmt::format("{} <= {} and {} <= {}", a, of, of, b));
    }
    return fmt::format("{}", fmt::join(parts, " or "));
  };
  const auto runs = runs_of(ranks);
  constexpr size_t kFewRuns = 4;
  if (runs.size() > kFewRuns) {
    std::vector<char> in(static_cast<size_t>(world), 0);
    for (const int64_t r : ranks) in[static_cast<size_t>(r)] = 1;
    std::vector<int64_t> periods;  // the world's divisors, smallest first
    for (int64_t p = 2; p * p <= world; ++p)
      if (world % p == 0) {
        periods.push_back(p);
        if (p * p != world) periods.push_back(world / p);
      }
    std::sort(periods.begin(), periods.end());
    for (const int64_t p : periods) {
      if (p == world) continue;
      bool periodic = true;
      for (int64_t r = p; r < world && periodic; ++r)
        periodic = in[static_cast<size_t>(r)] == in[static_cast<size_t>(r % p)];
      if (!periodic) continue;
      std::vector<int64_t> residues;
      for (int64_t r = 0; r < p; ++r)
        if (in[static_cast<size_t>(r)]) residues.push_back(r);
      const auto residue_runs = runs_of(residues);
      if (residue_runs.size() <= kFewRuns)
        return text_of(residue_runs, fmt::format("rank % {}", p), p);
      break;
    }
  }
  return text_of(runs, "rank", world);
}

// A mesh the scenario creates: one recorded group (1-D), or the groups of one or two dims of a
// DeviceMesh as the rows (and columns) of a 2-D rank table.
struct MeshPlan {
  std::string name;
  std::vector<std::vector<int64_t>> table;  // one row for a 1-D mesh
  std::vector<std::string> dims;            // empty for a 1-D mesh
  std::string comment;
};

// One call of a history, as the step that makes it.
struct Call {
  size_t key = 0;  // into Writer::steps_
  size_t group = 0;
  int64_t seq = -1;            // collective seq as recorded; -1 for a send or recv, or assumed
  size_t mirrored = SIZE_MAX;  // into Writer::mirrored_, when its peer left no dump
};

// A step of the written program: a call, and the ranks that make it.
struct ProgramStep {
  size_t key = 0;
  std::string when;
};

// A collective the dumps hold, with how its members made it: what a rank without a dump is
// assumed to have done.
struct CollectiveVotes {
  std::map<size_t, int64_t> keys;  // step key -> members that made it so
  int64_t time_ns = INT64_MAX;
};

// A send or recv whose peer left no dump: the peer is assumed to have made the other half.
struct MirroredCall {
  int64_t peer = 0;  // the rank without a dump
  size_t key = 0;
  int64_t time_ns = 0;
};

class Writer {
 public:
  Writer(const std::vector<FrRankDump>& dumps, const FrAnalysis& analysis,
         const FrReplayOptions& options)
      : analysis_(analysis), options_(options) {
    by_rank_.assign(static_cast<size_t>(analysis.world_size), nullptr);
    for (const FrRankDump& d : dumps) {
      if (d.rank < 0 || d.rank >= analysis.world_size) continue;
      const FrRankDump*& slot = by_rank_[static_cast<size_t>(d.rank)];
      if (slot == nullptr) slot = &d;  // as the analysis: a rank's first dump
    }
    for (size_t g = 0; g < analysis.groups.size(); ++g) {
      group_index_.emplace(analysis.groups[g].name, g);
      members_.push_back(analysis.groups[g].members);
      complete_.push_back(analysis.groups[g].unnamed_members == 0);
    }
    histories_.resize(static_cast<size_t>(analysis.world_size));
  }

  std::string write() {
    plan_meshes();
    plan_cuts();
    record_histories();
    fill_in_ranks_without_dump();
    std::string out = header();
    for (const MeshPlan& m : meshes_) out += mesh_text(m);
    out += program_text(merged_program());
    out += expectation();
    return out;
  }

 private:
  const FrGroup& group(size_t g) const { return analysis_.groups[g]; }
  // Whether group ranks map to the members: only when the recorder listed them (a member that
  // never called on a group is in no dump).
  bool members_known(size_t g) const { return group(g).members_from != "dumps"; }
  // The global rank a send or recv on group g names as its peer, where the dumps say.
  std::optional<int64_t> peer_of(const FrEntry& e, size_t g) const {
    const std::optional<P2pEnds> ends = p2p_ends(e);
    const std::optional<int64_t> group_peer = !ends                  ? std::nullopt
                                              : op_name(e) == "send" ? std::optional(ends->dst)
                                                                     : ends->src;
    const auto& members = members_[g];
    if (!group_peer || !members_known(g) || *group_peer >= static_cast<int64_t>(members.size()))
      return std::nullopt;
    return members[static_cast<size_t>(*group_peer)];
  }
  bool is_member(size_t g, int64_t rank) const {
    return std::binary_search(members_[g].begin(), members_[g].end(), rank);
  }

  // The members no dump names of one group, where its neighbours tell them: consecutive groups
  // with no rank in common (one dim of a DeviceMesh: groups of one size that together hold the
  // world) leave to the one group short of members exactly the ranks none of them holds.
  void complete_groups(const std::vector<size_t>& order) {
    const int64_t world = analysis_.world_size;
    for (size_t i = 0; i < order.size();) {
      std::set<int64_t> held;
      size_t end = i, size = 0;
      for (; end < order.size(); ++end) {
        const auto& m = members_[order[end]];
        if (std::any_of(m.begin(), m.end(), [&](int64_t r) { return held.contains(r); })) break;
        held.insert(m.begin(), m.end());
        size = std::max(size, m.size());
      }
      end = std::max(end, i + 1);
      std::vector<size_t> short_of;
      for (size_t j = i; j < end; ++j)
        if (members_[order[j]].size() < size || !complete_[order[j]]) short_of.push_back(order[j]);
      const auto unheld = world - static_cast<int64_t>(held.size());
      if (short_of.size() == 1 && group(short_of[0]).members_from == "dumps" && unheld > 0 &&
          static_cast<int64_t>(size - members_[short_of[0]].size()) == unheld) {
        const size_t g = short_of[0];
        std::vector<int64_t> added;
        for (int64_t r = 0; r < world; ++r)
          if (!held.contains(r)) added.push_back(r);
        members_[g].insert(members_[g].end(), added.begin(), added.end());
        std::sort(members_[g].begin(), members_[g].end());
        complete_[g] = true;
        note(
            "{}: the dumps name {} of its members; the groups created with it have {} each and "
            "hold every other rank, so {} {} taken to be {} too",
            group(g).label, members_[g].size() - added.size(), size, ranks_text(added),
            added.size() == 1 ? "is" : "are", added.size() == 1 ? "its member" : "its members");
        completed_groups_ = true;
      }
      i = end;
    }
  }

  // Groups become meshes, created in the order of their c10d names, as the job created them.
  // Consecutive groups of one size with no rank in common (one dim of a DeviceMesh) become the
  // rows of one 2-D mesh, so that every rank's call on "its" group is one step; when the next
  // run of groups is that table's columns (the other dim, as init_device_mesh creates them
  // first), the two are one mesh.
  void plan_meshes() {
    refs_.assign(analysis_.groups.size(), "");
    labels_.assign(analysis_.groups.size(), "WORLD");
    std::vector<size_t> order;
    for (size_t g = 0; g < analysis_.groups.size(); ++g)
      if (!is_world(group(g)) && !members_[g].empty()) order.push_back(g);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const auto na = parse_rank(group(a).name), nb = parse_rank(group(b).name);
      return std::tuple(na.value_or(INT64_MAX), group(a).name) <
             std::tuple(nb.value_or(INT64_MAX), group(b).name);
    });
    complete_groups(order);
    size_t i = 0;
    while (i < order.size()) {
      const size_t end = family_end(order, i);
      const size_t rows = end - i, size = members_[order[i]].size();
      if (rows >= 2 && size >= 2) {
        const size_t pair_end = family_end(order, end);
        if (pair_end - end >= size && members_[order[end]].size() == rows &&
            pairs_as_columns(order, i, end)) {
          add_two_dim_mesh(order, i, end, end + size);
          i = end + size;
          continue;
        }
      }
      if (rows == 1) {
        const std::string name = mesh_name(order, i, i + 1);
        meshes_.push_back({name, {members_[order[i]]}, {}, group_comment(order[i])});
        refs_[order[i]] = fmt::format("\"{}\"", name);
        labels_[order[i]] = name;
      } else {
        add_rows_mesh(order, i, end);
      }
      i = end;
    }
  }

  // The end of the run of groups from `begin` with one size and no rank in common.
  size_t family_end(const std::vector<size_t>& order, size_t begin) const {
    if (begin >= order.size()) return begin;
    std::set<int64_t> used;
    const size_t size = members_[order[begin]].size();
    size_t end = begin;
    for (; end < order.size(); ++end) {
      const std::vector<int64_t>& m = members_[order[end]];
      if (m.size() != size || !complete_[order[end]]) break;
      if (std::any_of(m.begin(), m.end(), [&](int64_t r) { return used.contains(r); })) break;
      used.insert(m.begin(), m.end());
    }
    return std::max(end, begin + 1);
  }

  // Whether groups [begin, end) are the columns of the table whose rows are the `size` groups
  // after them (size = the first groups' member count).
  bool pairs_as_columns(const std::vector<size_t>& order, size_t begin, size_t end) const {
    const size_t columns = end - begin, rows = members_[order[begin]].size();
    for (size_t c = 0; c < columns; ++c) {
      std::vector<int64_t> column;
      // As listed, so that a group rank is the same member in the mesh's column as in c10d's
      // group (whose ranks are in order).
      for (size_t r = 0; r < rows; ++r) column.push_back(members_[order[end + r]][c]);
      if (column != members_[order[begin + c]]) return false;
    }
    return true;
  }

  // "pg3", or "pg1_4" for groups "1" to "4"; a name made of others' letters is made unique.
  std::string mesh_name(const std::vector<size_t>& order, size_t begin, size_t end) {
    const std::string first = identifier(group(order[begin]).name);
    const std::string last = identifier(group(order[end - 1]).name);
    std::string name = first.empty() || last.empty() ? fmt::format("mesh{}", meshes_.size())
                       : end - begin == 1            ? "pg" + first
                                                     : fmt::format("pg{}_{}", first, last);
    while (!mesh_names_.insert(name).second) name += "_";
    return name;
  }

  // A dim's name: the groups' shared description ("mesh_tp" names dim tp), else "g" and the
  // first group's name.
  std::string dim_name(const std::vector<size_t>& order, size_t begin, size_t end,
                       std::string_view avoid = "") const {
    const std::string& desc = group(order[begin]).desc;
    bool shared = desc != "undefined" && !desc.empty();
    for (size_t i = begin; i < end && shared; ++i) shared = group(order[i]).desc == desc;
    std::string name =
        shared ? identifier(desc.starts_with("mesh_") ? desc.substr(5) : desc) : std::string();
    if (name.empty() || (name[0] >= '0' && name[0] <= '9'))
      name = "g" + identifier(group(order[begin]).name);
    if (name == avoid) name += "_2";
    return name;
  }

  std::string group_comment(size_t g) const {
    const FrGroup& grp = group(g);
    std::string text = fmt::format("c10d group \"{}\"", printable(grp.name, 32));
    if (grp.desc != "undefined" && !grp.desc.empty())
      text += fmt::format(" ({})", printable(grp.desc, 48));
    if (grp.members_from == "dumps")
      text += !complete_[g] ? fmt::format(": {} more member{} no dump names {} not here",
                                          grp.unnamed_members, grp.unnamed_members == 1 ? "" : "s",
                                          grp.unnamed_members == 1 ? "is" : "are")
                            : ": its members are the ranks whose dumps name it";
    return text;
  }

  void add_rows_mesh(const std::vector<size_t>& order, size_t begin, size_t end) {
    MeshPlan m;
    m.name = mesh_name(order, begin, end);
    const std::string dim = dim_name(order, begin, end);
    m.dims = {dim + "_index", dim};
    for (size_t i = begin; i < end; ++i) {
      m.table.push_back(members_[order[i]]);
      refs_[order[i]] = fmt::format("{{ mesh = \"{}\", dim = \"{}\" }}", m.name, dim);
      labels_[order[i]] = fmt::format("{}.{}#{}", m.name, dim, i - begin);
    }
    m.comment = fmt::format(
        "c10d groups \"{}\" to \"{}\": {} groups of {} ranks, the rows of this mesh (its "
        "columns are groups the job may not have had)",
        printable(group(order[begin]).name, 32), printable(group(order[end - 1]).name, 32),
        end - begin, members_[order[begin]].size());
    meshes_.push_back(std::move(m));
  }

  void add_two_dim_mesh(const std::vector<size_t>& order, size_t begin, size_t mid, size_t end) {
    MeshPlan m;
    m.name = mesh_name(order, begin, end);
    const std::string outer = dim_name(order, begin, mid);
    m.dims = {outer, dim_name(order, mid, end, outer)};
    for (size_t i = mid; i < end; ++i) m.table.push_back(members_[order[i]]);
    for (size_t i = begin; i < end; ++i) {
      const std::string& dim = m.dims[i < mid ? 0 : 1];
      refs_[order[i]] = fmt::format("{{ mesh = \"{}\", dim = \"{}\" }}", m.name, dim);
      labels_[order[i]] = fmt::format("{}.{}#{}", m.name, dim, i < mid ? i - begin : i - mid);
    }
    m.comment = fmt::format(
        "c10d groups \"{}\" to \"{}\": a {}x{} DeviceMesh's dims, created in this order",
        printable(group(order[begin]).name, 32), printable(group(order[end - 1]).name, 32),
        end - mid, mid - begin);
    meshes_.push_back(std::move(m));
  }

  std::optional<size_t> group_of(const FrEntry& e) const {
    const auto it = group_index_.find(e.pg_name);
    if (it == group_index_.end()) return std::nullopt;
    return it->second;
  }

  // A buffer that wrapped lost the rank's oldest calls. Each group's calls before the first one
  // every member still holds are left out for all members, and so are the sends and recvs one
  // side holds and the other lost: what remains was a feasible schedule in the real job, so
  // leaving the rest out adds no wait.
  void plan_cuts() {
    start_seq_.assign(analysis_.groups.size(), INT64_MIN);
    // A rank's calls block in the replay, so a collective it finished after one it had not
    // (an async call, or NCCL's stream running ahead) would wait for it for ever: such
    // collectives are left out for every member (they all finished them).
    for (const FrRankDump* d : by_rank_) {
      if (d == nullptr) continue;
      const auto& entries = d->dump.entries;
      const auto closed = closed_batches(*d);
      bool open = false;
      for (const FrEntry& e : entries) {
        const bool done = finished(e) || closed.contains({e.pg_name, e.collective_seq_id});
        const std::optional<size_t> g = group_of(e);
        if (open && done && g && !e.is_p2p && !closes_coalesced(e))
          ran_ahead_.emplace(*g, e.collective_seq_id);
        open |= !done;
      }
    }
    if (!ran_ahead_.empty())
      note(
          "{} collective{} finished after a call of one member's that had not: the replay's "
          "calls block, so {} left out",
          ran_ahead_.size(), ran_ahead_.size() == 1 ? "" : "s",
          ran_ahead_.size() == 1 ? "it is" : "they are");
    // Per group, (time, seq) of every collective any dump holds, for ranks that hold none.
    std::vector<std::vector<std::pair<int64_t, int64_t>>> timeline(analysis_.groups.size());
    for (const FrRankDump* d : by_rank_) {
      if (d == nullptr) continue;
      for (const FrEntry& e : d->dump.entries)
        if (const auto g = group_of(e); g && !e.is_p2p && e.time_created_ns)
          timeline[*g].emplace_back(*e.time_created_ns, e.collective_seq_id);
    }
    for (auto& t : timeline) {
      std::sort(t.begin(), t.end());
      for (size_t i = 1; i < t.size(); ++i) t[i].second = std::max(t[i].second, t[i - 1].second);
    }
    align_p2p();
    for (size_t r = 0; r < by_rank_.size(); ++r) {
      const FrRankDump* d = by_rank_[r];
      if (!wrapped(r)) continue;
      const std::optional<int64_t> first_ns = d->dump.entries.front().time_created_ns;
      std::map<size_t, int64_t> first_seq;
      for (const FrEntry& e : d->dump.entries)
        if (const auto g = group_of(e); g && !e.is_p2p && !first_seq.contains(*g))
          first_seq.emplace(*g, e.collective_seq_id);
      for (size_t g = 0; g < analysis_.groups.size(); ++g) {
        const bool member = is_member(g, static_cast<int64_t>(r));
        if (const auto it = first_seq.find(g); it != first_seq.end()) {
          start_seq_[g] = std::max(start_seq_[g], it->second);
        } else if (member && first_ns) {
          // None of its calls on the group survived: those the others made before its oldest
          // record are left out.
          const auto& t = timeline[g];
          const auto past = std::lower_bound(t.begin(), t.end(), std::pair(*first_ns, INT64_MIN));
          if (past != t.begin())
            start_seq_[g] = std::max(start_seq_[g], std::prev(past)->second + 1);
        }
      }
    }
    for (size_t g = 0; g < start_seq_.size(); ++g)
      if (start_seq_[g] > 1)
        note("{}: calls before seq {} are left out (a member's buffer lost them)", group(g).label,
             start_seq_[g]);
  }

  // The coalescing groups (pg name, seq) of a dump that finished: the calls in one finish with
  // its closing entry, though NCCL leaves them "scheduled".
  static std::set<std::pair<std::string, int64_t>> closed_batches(const FrRankDump& d) {
    std::set<std::pair<std::string, int64_t>> closed;
    for (const FrEntry& e : d.dump.entries)
      if (closes_coalesced(e) && finished(e)) closed.emplace(e.pg_name, e.collective_seq_id);
    return closed;
  }

  bool wrapped(size_t rank) const {
    const FrRankDump* d = by_rank_[rank];
    return d != nullptr && !d->dump.entries.empty() && d->dump.entries.front().record_id > 0;
  }

  // Sends from one rank to another on a group complete in order, each with its recv, so the
  // finished sends of a pair are the finished recvs, one for one. Where a buffer that wrapped
  // lost the oldest of them on one side, the other side's oldest are left out too: the newest
  // min(sends, recvs) of each side are the same messages. Calls not finished stay.
  void align_p2p() {
    // (group, src, dst) -> each side's finished entries, by index into its rank's dump
    std::map<std::tuple<size_t, int64_t, int64_t>, std::array<std::vector<size_t>, 2>> pairs;
    for (size_t r = 0; r < by_rank_.size(); ++r) {
      if (by_rank_[r] == nullptr) continue;
      const auto& entries = by_rank_[r]->dump.entries;
      const auto closed = closed_batches(*by_rank_[r]);
      for (size_t i = 0; i < entries.size(); ++i) {
        const FrEntry& e = entries[i];
        const std::optional<size_t> g = group_of(e);
        const std::optional<int64_t> peer = g ? peer_of(e, *g) : std::nullopt;
        if (!e.is_p2p || !peer ||
            !(finished(e) || closed.contains({e.pg_name, e.collective_seq_id})))
          continue;
        const bool send = op_name(e) == "send";
        const auto rank = static_cast<int64_t>(r);
        pairs[{*g, send ? rank : *peer, send ? *peer : rank}][send ? 0 : 1].push_back(i);
      }
    }
    p2p_left_out_.assign(by_rank_.size(), {});
    size_t dropped = 0;
    for (const auto& [key, sides] : pairs) {
      const auto& [g, src, dst] = key;
      const int64_t ends[2] = {src, dst};
      if (!wrapped(static_cast<size_t>(src)) && !wrapped(static_cast<size_t>(dst))) continue;
      if (by_rank_[static_cast<size_t>(src)] == nullptr ||
          by_rank_[static_cast<size_t>(dst)] == nullptr)
        continue;  // a side without a dump is mirrored from the other
      const size_t kept = std::min(sides[0].size(), sides[1].size());
      for (size_t side = 0; side < 2; ++side) {
        for (size_t k = 0; k + kept < sides[side].size(); ++k) {
          p2p_left_out_[static_cast<size_t>(ends[side])].insert(sides[side][k]);
          ++dropped;
        }
      }
    }
    if (dropped > 0)
      note("{} send{} and recv{} whose other side a wrapped buffer lost {} left out", dropped,
           dropped == 1 ? "" : "s", dropped == 1 ? "" : "s", dropped == 1 ? "is" : "are");
  }

  template <typename... Args>
  void note(fmt::format_string<Args...> text, Args&&... args) {
    notes_.push_back(fmt::format(text, std::forward<Args>(args)...));
  }

  size_t key_of(std::string step) {
    const auto [it, fresh] = step_index_.emplace(step, steps_.size());
    if (fresh) steps_.push_back(std::move(step));
    return it->second;
  }

  // "meta(4, 2, dtype=float32)": a tensor of the recorded shape and dtype, without data.
  // "meta(4, 2, dtype=float32)": a tensor of the recorded shape (the first tensor of the call)
  // and dtype, without data. `dim0_times` stacks that many along dim 0; `split` rounds dim 0 up
  // to a multiple of it, for the collectives that cut dim 0 into one chunk per member (uneven
  // splits are not modelled). A shape no tensor can have (past 25 dims, or bytes past int64)
  // becomes one element, and the file says so.
  std::string tensor_text(const std::vector<std::vector<int64_t>>& sizes,
                          const std::vector<std::string>& dtypes, int64_t dim0_times = 1,
                          int64_t split = 1) {
    std::vector<int64_t> shape = sizes.empty() ? std::vector<int64_t>{0} : sizes.front();
    if (shape.empty()) shape.push_back(1);  // a 0-dim tensor: one element
    for (int64_t& d : shape) d = std::max<int64_t>(d, 0);
    if (dim0_times > 1 && shape[0] <= INT64_MAX / dim0_times) shape[0] *= dim0_times;
    if (split > 1 && shape[0] % split != 0 && shape[0] <= INT64_MAX - split) {
      shape[0] += split - shape[0] % split;
      odd_shapes_.insert("uneven splits are rounded up to a multiple of the group's size");
    }
    const std::string fr_dtype = dtypes.empty() ? "Float" : dtypes.front();
    std::optional<DType> dtype = dtype_of(fr_dtype);
    if (!dtype) {
      dtype = DType::kFloat32;
      unknown_dtypes_.insert(printable(fr_dtype, 24));
    }
    constexpr size_t kMaxDims = 25;
    int64_t bytes = static_cast<int64_t>(dtype_size(*dtype));
    bool fits = shape.size() <= kMaxDims;
    for (const int64_t d : shape) {
      if (!fits || d == 0) continue;
      fits = bytes <= INT64_MAX / d;
      if (fits) bytes *= d;
    }
    if (!fits) {
      odd_shapes_.insert(
          "shapes no tensor can have (past 25 dims, or bytes past int64) are one element");
      shape = {1};
    }
    return fmt::format("meta({}, dtype={})", fmt::join(shape, ", "), dtype_name(*dtype));
  }

  // The step that makes entry `e` of rank `rank`, with the user's line as a comment; none for a
  // send or recv whose peer the dumps do not name.
  std::optional<std::string> step_of(const FrEntry& e, int64_t rank, size_t g,
                                     std::optional<int64_t>* p2p_peer = nullptr) {
    const std::string op(op_name(e));
    const std::string group_arg = group_argument(g);
    std::string comment;
    if (const auto line = user_line(e)) comment = *line;
    auto with_comment = [&](std::string step, std::string_view stands_for = "") {
      std::string why;
      if (!stands_for.empty())
        why = fmt::format("recorded as {}, which meshsim has no step for: {} stands in",
                          printable(op, 48), stands_for);
      if (!comment.empty() && !why.empty()) comment += "; ";
      comment += why;
      return comment.empty() ? step : fmt::format("{}  # {}", step, comment);
    };
    const auto in = [&](int64_t times = 1, int64_t split = 1) {
      return tensor_text(e.input_sizes, e.input_dtypes, times, split);
    };
    if (op == "send" || op == "recv") {
      const bool send = op == "send";
      const std::optional<int64_t> known = peer_of(e, g);
      if (!known) return std::nullopt;
      const int64_t peer = *known;
      if (p2p_peer) *p2p_peer = peer;
      return with_comment(p2p_step(send, received_tensor(e), peer - rank, group_arg));
    }
    auto collective = [&](std::string_view step_op, const std::string& tensor,
                          std::string_view stands_for = "") {
      return with_comment(
          fmt::format("{} = {{ tensor = \"{}\"{}, out = \"out\" }}", step_op, tensor, group_arg),
          stands_for);
    };
    if (op == "all_reduce" || op == "allreduce") return collective("all_reduce", in());
    if (op == "_all_gather_base" || op == "_allgather_base" || op == "all_gather_into_tensor" ||
        op == "allgather_into_tensor")
      return collective("all_gather_into_tensor", in());
    if (op == "allgather" || op == "all_gather")  // one output tensor: the _into_tensor form
      return collective(e.output_sizes.size() == 1 ? "all_gather_into_tensor" : "all_gather", in());
    const auto members = static_cast<int64_t>(members_[g].size());
    if (op == "_reduce_scatter_base" || op == "reduce_scatter_tensor")
      return collective("reduce_scatter", in(1, members));
    if (op == "reduce_scatter")  // a list of inputs, one per member: their rows stacked
      return collective("reduce_scatter", tensor_text(e.output_sizes, e.output_dtypes, members));
    if (op == "alltoall_base" || op == "all_to_all_single")
      return collective("all_to_all", in(1, members));
    if (op == "alltoall" || op == "all_to_all")
      return collective("all_to_all", in(static_cast<int64_t>(e.input_sizes.size()), members));
    if (op == "broadcast")  // the recorder keeps no root: the group's first rank
      return with_comment(fmt::format(
          "broadcast = {{ tensor = \"{}\", group_src = 0{}, out = \"out\" }}", in(), group_arg));
    const std::string barrier = refs_[g].empty()
                                    ? "barrier = \"WORLD\""
                                    : fmt::format("barrier = {{ group = {} }}", refs_[g]);
    if (op == "barrier" || op == "all_reduce_barrier") return with_comment(barrier);
    if (op == "reduce") return collective("all_reduce", in(), "an all_reduce");
    if (op == "gather") return collective("all_gather", in(), "an all_gather");
    return with_comment(barrier, "a barrier");
  }

  // ", group = ..." for a call on group g; nothing on WORLD.
  std::string group_argument(size_t g) const {
    return refs_[g].empty() ? "" : ", group = " + refs_[g];
  }

  // A send's or recv's tensor: what it moves (a recv records it as its output).
  std::string received_tensor(const FrEntry& e) {
    const bool out = !e.output_sizes.empty();
    return tensor_text(out ? e.output_sizes : e.input_sizes,
                       out && !e.output_dtypes.empty() ? e.output_dtypes : e.input_dtypes);
  }

  // A blocking send or recv to the rank `delta` away.
  static std::string p2p_step(bool send, const std::string& tensor, int64_t delta,
                              const std::string& group_arg) {
    const std::string peer = delta == 0  ? "rank"
                             : delta > 0 ? fmt::format("rank + {}", delta)
                                         : fmt::format("rank - {}", -delta);
    return send ? fmt::format("send = {{ tensor = \"{}\", dst = \"{}\"{} }}", tensor, peer,
                              group_arg)
                : fmt::format("recv = {{ like = \"{}\", src = \"{}\"{}, out = \"out\" }}", tensor,
                              peer, group_arg);
  }

  void record_histories() {
    for (size_t r = 0; r < by_rank_.size(); ++r) {
      const FrRankDump* d = by_rank_[r];
      if (d == nullptr) continue;
      const auto rank = static_cast<int64_t>(r);
      for (size_t i = 0; i < d->dump.entries.size(); ++i) {
        const FrEntry& e = d->dump.entries[i];
        const std::optional<size_t> g = group_of(e);
        if (!g || closes_coalesced(e) || p2p_left_out_[r].contains(i)) continue;
        if (!e.is_p2p && (e.collective_seq_id < start_seq_[*g] ||
                          ran_ahead_.contains({*g, e.collective_seq_id})))
          continue;
        const int64_t time = e.time_created_ns.value_or(0);
        std::optional<int64_t> peer;
        std::optional<std::string> step = step_of(e, rank, *g, &peer);
        if (!step) {
          left_out_.push_back(
              fmt::format("rank {}'s {} (record {}): the dumps do not say which "
                          "rank its peer is",
                          r, printable(op_and_peers(e), 48), e.record_id));
          continue;
        }
        const size_t key = key_of(std::move(*step));
        Call call{key, *g, e.is_p2p ? -1 : e.collective_seq_id, SIZE_MAX};
        if (peer && by_rank_[static_cast<size_t>(*peer)] == nullptr) {
          call.mirrored = mirrored_.size();
          mirrored_.push_back({*peer, mirror_key(e, rank, *peer, *g), time});
        }
        histories_[r].push_back(call);
        if (!e.is_p2p) {
          CollectiveVotes& v = votes_[{*g, e.collective_seq_id}];
          ++v.keys[key];
          if (e.time_created_ns) v.time_ns = std::min(v.time_ns, time);
        }
      }
    }
  }

  // The other half of a send or recv, for its peer without a dump.
  size_t mirror_key(const FrEntry& e, int64_t rank, int64_t peer, size_t g) {
    const bool send = op_name(e) == "send";
    return key_of(fmt::format("{}  # assumed: the peer {} it",
                              p2p_step(!send, received_tensor(e), rank - peer, group_argument(g)),
                              send ? "sent" : "waited for"));
  }

  // A rank without a dump makes, on each group it belongs to, the call most members made at each
  // seq, and the other half of every send and recv that names it, in an order no member's
  // history contradicts (each group's calls by seq, and any two calls one after the other as a
  // member that made both made them; ties by the time they were recorded); a rank the analysis
  // blames makes none (what it did is unknown, and the others waited for it).
  void fill_in_ranks_without_dump() {
    std::vector<int64_t> silent, assumed, unguessed;
    bool contradicted = false;
    for (size_t r = 0; r < by_rank_.size(); ++r) {
      if (by_rank_[r] != nullptr) continue;
      const auto rank = static_cast<int64_t>(r);
      if (std::binary_search(analysis_.culprits.begin(), analysis_.culprits.end(), rank)) {
        silent.push_back(rank);
        continue;
      }
      if (assumed.size() == kMaxAssumedRanks) {
        unguessed.push_back(rank);
        continue;
      }
      assumed.push_back(rank);
      contradicted |= !assume_calls(rank);
      assumed_calls_ = true;
    }
    silent_ranks_ = silent;
    silent_ranks_.insert(silent_ranks_.end(), unguessed.begin(), unguessed.end());
    if (!unguessed.empty())
      note(
          "{} left no dump either; the replay guesses the calls of at most {} such ranks, so "
          "here {} no call",
          ranks_text(unguessed), kMaxAssumedRanks,
          unguessed.size() == 1 ? "it makes" : "they make");
    if (!silent.empty())
      note("{} left no dump and the others waited for {}: here {} no call", ranks_text(silent),
           silent.size() == 1 ? "it" : "them", silent.size() == 1 ? "it makes" : "they make");
    if (!assumed.empty())
      note(
          "{} left no dump: here {} the calls the other members of {} groups made, and the "
          "other half of the sends and recvs naming {}",
          ranks_text(assumed), assumed.size() == 1 ? "it makes" : "they make",
          assumed.size() == 1 ? "its" : "their", assumed.size() == 1 ? "it" : "them");
    if (contradicted)
      note(
          "the members' histories order the calls of a rank without a dump in a cycle: the "
          "calls on it are ordered by the time they were recorded");
  }

  // Fills the history of `rank`, which left no dump; false when the members' orders form a
  // cycle (broken by time).
  bool assume_calls(int64_t rank) {
    struct Node {
      int64_t time;
      size_t group;
      int64_t seq;
      size_t key;
    };
    std::vector<Node> nodes;
    std::map<std::pair<size_t, int64_t>, size_t> collective_node;
    std::map<size_t, size_t> mirrored_node;
    for (const auto& [at, v] : votes_) {
      if (!complete_[at.first] || !is_member(at.first, rank)) continue;
      const auto most =
          std::max_element(v.keys.begin(), v.keys.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; });
      collective_node.emplace(at, nodes.size());
      nodes.push_back({v.time_ns, at.first, at.second, most->first});
    }
    for (size_t m = 0; m < mirrored_.size(); ++m)
      if (mirrored_[m].peer == rank) {
        mirrored_node.emplace(m, nodes.size());
        nodes.push_back(
            {mirrored_[m].time_ns, SIZE_MAX, static_cast<int64_t>(m), mirrored_[m].key});
      }
    std::set<std::pair<size_t, size_t>> edges;
    // votes_ is ordered by (group, seq): consecutive nodes of one group follow each other.
    for (size_t i = 1; i < nodes.size(); ++i)
      if (nodes[i].group == nodes[i - 1].group && nodes[i].group != SIZE_MAX)
        edges.emplace(i - 1, i);
    for (const std::vector<Call>& history : histories_) {
      std::optional<size_t> previous;
      for (const Call& c : history) {
        std::optional<size_t> node;
        if (c.mirrored != SIZE_MAX) {
          if (const auto it = mirrored_node.find(c.mirrored); it != mirrored_node.end())
            node = it->second;
        } else if (c.seq >= 0) {
          if (const auto it = collective_node.find({c.group, c.seq}); it != collective_node.end())
            node = it->second;
        }
        if (!node) continue;
        if (previous && *previous != *node) edges.emplace(*previous, *node);
        previous = node;
      }
    }
    std::vector<std::vector<size_t>> next(nodes.size());
    std::vector<size_t> waiting_on(nodes.size(), 0);
    for (const auto& [from, to] : edges) {
      next[from].push_back(to);
      ++waiting_on[to];
    }
    auto later = [&](size_t a, size_t b) {
      return std::tuple(nodes[a].time, nodes[a].group, nodes[a].seq) >
             std::tuple(nodes[b].time, nodes[b].group, nodes[b].seq);
    };
    std::vector<size_t> ready;
    for (size_t i = 0; i < nodes.size(); ++i)
      if (waiting_on[i] == 0) ready.push_back(i);
    std::make_heap(ready.begin(), ready.end(), later);
    std::vector<char> placed(nodes.size(), 0);
    std::vector<Call>& out = histories_[static_cast<size_t>(rank)];
    bool acyclic = true;
    for (size_t done = 0; done < nodes.size(); ++done) {
      size_t n = 0;
      if (!ready.empty()) {
        std::pop_heap(ready.begin(), ready.end(), later);
        n = ready.back();
        ready.pop_back();
      } else {  // a cycle: the earliest node not placed goes next
        acyclic = false;
        n = SIZE_MAX;
        for (size_t i = 0; i < nodes.size(); ++i)
          if (!placed[i] && (n == SIZE_MAX || later(n, i))) n = i;
      }
      placed[n] = 1;
      out.push_back({nodes[n].key, nodes[n].group, -1, SIZE_MAX});
      for (const size_t m : next[n])
        if (--waiting_on[m] == 0 && !placed[m]) {
          ready.push_back(m);
          std::push_heap(ready.begin(), ready.end(), later);
        }
    }
    return acyclic;
  }

  std::string header() const {
    std::string out =
        "# A real job replayed from its ranks' Flight Recorder dumps by meshsim fr to-scenario.\n";
    if (!options_.source.empty()) out += "# Dumps: " + printable(options_.source, 200) + "\n";
    out +=
        "# Every rank makes the calls its dump recorded, in order, with meta tensors of the\n"
        "# recorded sizes and dtypes (no data), and the expectation at the end states the hang\n"
        "# the dumps show. Edit it to try a fix, then `meshsim run` it. The recorder keeps no\n"
        "# broadcast root (the group's first rank stands in) and no reduce op (sum stands in).\n"
        "#\n# What the dumps show:\n";
    for (std::string line : analysis_.summary) {
      for (size_t at; (at = line.find("→")) != std::string::npos;) line.replace(at, 3, "->");
      out += "#   " + printable(line, 400) + "\n";
    }
    if (analysis_.verdict == FrAnalysis::Verdict::kClean)
      out += "#   no hang: every recorded call finished, and the members of each agreed on it\n";
    std::vector<std::string> said = notes_;
    said.insert(said.end(), odd_shapes_.begin(), odd_shapes_.end());
    if (!unknown_dtypes_.empty())
      said.push_back(fmt::format("dtypes meshsim does not model are replayed as float32: {}",
                                 fmt::join(unknown_dtypes_, ", ")));
    for (size_t i = 0; i < left_out_.size() && i < kNotesShown; ++i)
      said.push_back("left out: " + left_out_[i]);
    if (left_out_.size() > kNotesShown)
      said.push_back(fmt::format("left out: {} more calls whose peer is not known",
                                 left_out_.size() - kNotesShown));
    if (!said.empty()) {
      out += "#\n# What the replay cannot know:\n";
      for (const std::string& line : said) out += "#   " + line + "\n";
    }
    bool gloo = false;
    for (const FrRankDump* d : by_rank_)
      if (d && !d->dump.entries.empty() &&
          d->dump.entries.front().profiling_name.starts_with("gloo:"))
        gloo = true;
    std::string name;  // printable ASCII only: a TOML string, whatever the flag held
    for (char c : options_.name.substr(0, 64))
      name.push_back(c == '"' || c == '\\' || c < 0x20 || c > 0x7e ? '_' : c);
    out +=
        fmt::format("\n[scenario]\nname = \"{}\"\nworld_size = {}\n", name, analysis_.world_size);
    if (gloo) out += "device = \"cpu\"  # Gloo recorded these calls\n";
    return out;
  }

  static std::string mesh_text(const MeshPlan& m) {
    std::string out = fmt::format("\n[[mesh]]  # {}\nname = \"{}\"\n", m.comment, m.name);
    if (m.table.size() == 1) return out + fmt::format("ranks = {}\n", ranks_list(m.table[0]));
    out += "ranks = [\n";
    for (const auto& row : m.table) out += fmt::format("  {},\n", ranks_list(row));
    return out + fmt::format("]\ndims = [\"{}\", \"{}\"]\n", m.dims[0], m.dims[1]);
  }

  // The histories merged into one program: each step runs on the ranks whose next call it is.
  // Ranks with one history are one set; among the next calls of the sets, the one no other set
  // makes soon comes first (so a set with an extra call does not split the others' shared
  // steps), then the one most ranks make.
  std::vector<ProgramStep> merged_program() const {
    std::map<std::vector<size_t>, std::vector<int64_t>> sets;  // keys -> ranks
    for (size_t r = 0; r < histories_.size(); ++r) {
      std::vector<size_t> keys;
      keys.reserve(histories_[r].size());
      for (const Call& c : histories_[r]) keys.push_back(c.key);
      sets[keys].push_back(static_cast<int64_t>(r));
    }
    std::vector<const std::vector<size_t>*> keys;
    std::vector<const std::vector<int64_t>*> ranks;
    for (const auto& [k, rs] : sets)
      if (!k.empty()) {
        keys.push_back(&k);
        ranks.push_back(&rs);
      }
    std::vector<ProgramStep> program;
    std::map<std::vector<int64_t>, std::string> whens;  // many steps run on one set of ranks
    auto emit = [&](size_t key, std::vector<int64_t> on) {
      std::sort(on.begin(), on.end());
      auto it = whens.find(on);
      if (it == whens.end()) {
        std::string when = when_of(on, analysis_.world_size);
        it = whens.emplace(std::move(on), std::move(when)).first;
      }
      program.push_back({key, it->second});
    };
    if (keys.size() > kMaxMergedHistories) {
      for (size_t h = 0; h < keys.size(); ++h)
        for (const size_t key : *keys[h]) emit(key, *ranks[h]);
      return program;
    }
    std::vector<size_t> at(keys.size(), 0);
    for (;;) {
      std::map<size_t, int64_t> heads;  // key -> ranks whose next call it is
      for (size_t h = 0; h < keys.size(); ++h)
        if (at[h] < keys[h]->size())
          heads[(*keys[h])[at[h]]] += static_cast<int64_t>(ranks[h]->size());
      if (heads.empty()) break;
      std::map<size_t, int64_t> later;  // key -> ranks that make it soon, but not next
      for (size_t h = 0; h < keys.size(); ++h) {
        const auto& k = *keys[h];
        for (size_t i = at[h] + 1; i < k.size() && i <= at[h] + kLookahead; ++i)
          if (k[i] != k[at[h]] && heads.contains(k[i])) {
            later[k[i]] += static_cast<int64_t>(ranks[h]->size());
            break;
          }
      }
      size_t best = heads.begin()->first;
      auto score = [&](size_t key) { return std::pair(-later[key], heads[key]); };
      for (const auto& [key, n] : heads)
        if (score(key) > score(best)) best = key;
      std::vector<int64_t> on;
      for (size_t h = 0; h < keys.size(); ++h)
        if (at[h] < keys[h]->size() && (*keys[h])[at[h]] == best) {
          on.insert(on.end(), ranks[h]->begin(), ranks[h]->end());
          ++at[h];
        }
      emit(best, std::move(on));
    }
    return program;
  }

  // The program as steps, a run of steps repeated back to back written once in a `repeat` loop
  // (at each step, the period that folds the most steps; the loops are not nested).
  std::string program_text(const std::vector<ProgramStep>& program) const {
    constexpr size_t kMaxPeriod = 64;
    constexpr size_t kMaxFolded = 20000;  // steps; past this, the search would cost too much
    auto same = [&](size_t a, size_t b) {
      return program[a].key == program[b].key && program[a].when == program[b].when;
    };
    auto step_text = [&](const ProgramStep& step, std::string_view indent) {
      std::string text = fmt::format("\n{}[[step]]\n{}{}\n", indent, indent, steps_[step.key]);
      if (!step.when.empty()) text += fmt::format("{}when = \"{}\"\n", indent, step.when);
      return text;
    };
    std::string out;
    size_t loops = 0;
    for (size_t i = 0; i < program.size();) {
      size_t best_period = 0, best_count = 1;
      if (program.size() <= kMaxFolded) {
        for (size_t p = 1; p <= kMaxPeriod && i + 2 * p <= program.size(); ++p) {
          size_t count = 1;
          for (;;) {
            const size_t next = i + count * p;
            if (next + p > program.size()) break;
            bool repeats = true;
            for (size_t j = 0; j < p && repeats; ++j) repeats = same(i + j, next + j);
            if (!repeats) break;
            ++count;
          }
          if (count >= 2 && count * p > best_count * best_period) {
            best_period = p;
            best_count = count;
          }
        }
      }
      if (best_count < 2) {
        out += step_text(program[i], "");
        ++i;
        continue;
      }
      const std::string var = fmt::format("loop{}", ++loops);
      out += fmt::format(
          "\n[[step]]  # {} step{}, {} times\nrepeat = {{ var = \"{}\", count = {} }}\n",
          best_period, best_period == 1 ? "" : "s", best_count, var, best_count);
      for (size_t j = 0; j < best_period; ++j) out += step_text(program[i + j], "  ");
      out += fmt::format("\n[[step]]\nend_repeat = \"{}\"\n", var);
      i += best_period * best_count;
    }
    return out;
  }

  // Whether every rank makes exactly the calls its dump recorded: no call left out (a wrapped
  // buffer, an unknown peer), no rank without a dump, no group short of members. Only then can
  // the run be held to the analysis's reading of the hang (its cause and culprits, whom each
  // rank waits for); otherwise the expectation states what the calls alone decide.
  bool complete_replay() const {
    const bool cut =
        std::any_of(start_seq_.begin(), start_seq_.end(), [](int64_t s) { return s > 1; }) ||
        std::any_of(p2p_left_out_.begin(), p2p_left_out_.end(),
                    [](const std::set<size_t>& s) { return !s.empty(); });
    return !cut && ran_ahead_.empty() && left_out_.empty() && !assumed_calls_ &&
           silent_ranks_.empty() && !completed_groups_ &&
           std::all_of(complete_.begin(), complete_.end(), [](bool c) { return c; });
  }

  // Whether a call's members split no more for it than against it: as many (or fewer) wait in
  // it as went without it. meshsim's run, which sees the replay's members reach the call from
  // different steps, may then name the side that called it the odd one.
  bool split_evenly() const {
    return std::any_of(analysis_.open_calls.begin(), analysis_.open_calls.end(),
                       [](const FrOpenCall& c) {
                         return !c.missing.empty() && c.missing.size() >= c.waiting.size();
                       });
  }

  std::string expectation() const {
    const std::string head = "\n[[expect]]\n";
    switch (analysis_.verdict) {
      case FrAnalysis::Verdict::kClean:
        return head + "no_hang = true\n";
      case FrAnalysis::Verdict::kStall:
        return "\n# The dumps show a stall no recorded call explains (every member entered the "
               "call the\n# same way): the replay finishes, as the calls alone would.\n" +
               head + "no_hang = true\n";
      case FrAnalysis::Verdict::kDesync:
        return desync_expectation();
      case FrAnalysis::Verdict::kDeadlock:
        break;
    }
    const bool complete = complete_replay();
    std::vector<std::string> keys;
    std::vector<int64_t> blocked;
    std::vector<std::string> waits;
    bool p2p_waits = false;
    constexpr size_t kWaitsShown = 8;
    for (const FrRank& r : analysis_.ranks) {
      // A rank blocked in a call every other member finished was caught as the call ended:
      // in the replay it finishes.
      if (r.state != FrRank::State::kBlocked) continue;
      if (r.waits_for.empty() && (!r.open_call || analysis_.open_calls[*r.open_call].unnamed == 0))
        continue;
      blocked.push_back(r.rank);
      p2p_waits |= r.open_call && analysis_.open_calls[*r.open_call].p2p;
      if (waits.size() < kWaitsShown && !r.waits_for.empty())
        waits.push_back(fmt::format("{} = {}", r.rank, ranks_list(r.waits_for)));
    }
    // Who is off is a judgement: in a cycle of waits, on the program's order (the rank that
    // went ahead), or on which side skipped a call or made an extra one; with sends and recvs,
    // on which story comes first. meshsim's run judges from this file's steps, whose order need
    // not be the program's; the ranks that block, and whom they wait for, the calls alone
    // decide.
    const HangCause cause = analysis_.cause;
    const bool judged =
        cause == HangCause::kOrderInversion || cause == HangCause::kExtraCollective ||
        cause == HangCause::kHeadToHeadSend || cause == HangCause::kHeadToHeadRecv ||
        cause == HangCause::kPointToPointCycle || p2p_waits || split_evenly();
    std::string comment;
    if (!complete || judged || analysis_.culprits.empty()) {
      comment = analysis_.culprits.empty()
                    ? "The dumps do not say which rank is to blame."
                    : fmt::format("The dumps show a {}, and name {} as the culprit{}.",
                                  hang_cause_name(cause), ranks_text(analysis_.culprits),
                                  analysis_.culprits.size() == 1 ? "" : "s");
    } else {
      std::string_view name = hang_cause_name(cause);
      // A missing rank whose last recorded call finished ends its program there in the replay:
      // meshsim calls that a rank that exited early.
      if (cause == HangCause::kMissingRank &&
          std::all_of(analysis_.culprits.begin(), analysis_.culprits.end(), [&](int64_t r) {
            return analysis_.ranks[static_cast<size_t>(r)].state != FrRank::State::kBlocked;
          })) {
        comment = fmt::format(
            "{} made no call after {} last recorded one, which finished: the replay ends there,\n"
            "# which meshsim calls a rank that exited early.",
            ranks_text(analysis_.culprits), analysis_.culprits.size() == 1 ? "its" : "their");
        name = hang_cause_name(HangCause::kRankExitedEarly);
      }
      keys.push_back(fmt::format("cause = \"{}\"", name));
      keys.push_back(fmt::format("culprits = {}", ranks_list(analysis_.culprits)));
    }
    if (!assumed_calls_) keys.push_back(fmt::format("waiting = {}", ranks_list(blocked)));
    if (complete && !waits.empty())
      keys.push_back(fmt::format("waits_for = {{ {} }}", fmt::join(waits, ", ")));
    return fmt::format("{}{}deadlock = {{ {} }}\n", comment.empty() ? "" : "\n# " + comment, head,
                       fmt::join(keys, ", "));
  }

  // The first mismatch: where, and who is off unless as many members are off one way as the
  // other (or the replay leaves calls out, which moves where meshsim's run sees ranks diverge).
  std::string desync_expectation() const {
    std::string out = "desync = { cause = \"signature mismatch\"";
    std::string comment;
    if (!analysis_.mismatches.empty()) {
      const FrMismatch& m = analysis_.mismatches.front();
      // meshsim numbers the replay's calls on the group: those a member kept up to this one
      // (calls left out, and a coalescing group's calls that share one seq, move the count).
      int64_t seq = 0;
      for (const Call& c : histories_[static_cast<size_t>(m.variants.front().ranks.front())])
        seq += c.group == m.group && c.seq >= 0 && c.seq <= m.seq;
      out += fmt::format(", group = \"{}\", seq = {}", labels_[m.group], seq);
      const bool tie =
          m.variants.size() >= 2 && m.variants[0].ranks.size() == m.variants[1].ranks.size();
      if (tie)
        comment =
            "\n# As many members called it one way as the other: the dumps cannot say "
            "which is off.";
      else if (complete_replay())
        out += fmt::format(", culprits = {}", ranks_list(analysis_.culprits));
      else
        comment =
            fmt::format("\n# The dumps name {} as the culprit{}.", ranks_text(analysis_.culprits),
                        analysis_.culprits.size() == 1 ? "" : "s");
    }
    return fmt::format("{}\n[[expect]]\n{} }}\n", comment, out);
  }

  const FrAnalysis& analysis_;
  const FrReplayOptions& options_;
  std::vector<const FrRankDump*> by_rank_;
  std::map<std::string, size_t> group_index_;
  std::vector<std::vector<int64_t>> members_;  // per group, sorted: the analysis's, completed
  std::vector<bool> complete_;                 // per group: no member unknown
  std::vector<std::string> refs_;              // per group: its `group = ...` value ("" for WORLD)
  std::vector<std::string> labels_;            // per group: what meshsim's reports call it
  std::vector<MeshPlan> meshes_;
  std::set<std::string> mesh_names_;
  std::vector<int64_t> start_seq_;                  // per group
  std::vector<std::set<size_t>> p2p_left_out_;      // per rank: entries align_p2p leaves out
  std::set<std::pair<size_t, int64_t>> ran_ahead_;  // (group, seq) left out: see plan_cuts
  std::vector<std::string> steps_;
  std::unordered_map<std::string, size_t> step_index_;
  std::vector<std::vector<Call>> histories_;
  std::map<std::pair<size_t, int64_t>, CollectiveVotes> votes_;
  std::vector<MirroredCall> mirrored_;
  std::vector<std::string> notes_, left_out_;
  std::set<std::string> unknown_dtypes_;
  std::set<std::string> odd_shapes_;   // what the replay's tensors could not keep, said once
  bool assumed_calls_ = false;         // a rank without a dump makes the calls its peers made
  std::vector<int64_t> silent_ranks_;  // ranks without a dump that make no call
  bool completed_groups_ = false;      // a group's members were completed from its neighbours
};

}  // namespace

std::string fr_replay_scenario(const std::vector<FrRankDump>& dumps, const FrAnalysis& analysis,
                               const FrReplayOptions& options) {
  return Writer(dumps, analysis, options).write();
}

}  // namespace meshsim::sim
