#include "sim/report/fr_rng.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/report/fr_entry.hpp"
#include "sim/report/rng_overlap.hpp"
#include "sim/runtime/group_label.hpp"
#include "sim/runtime/hang_phrases.hpp"
#include "src/dtensor/placement.hpp"
#include "src/error.hpp"
#include "src/printable.hpp"
#include "src/rng/dtensor_rng_offsets.hpp"
#include "src/rng/rank_rng.hpp"

namespace meshsim::sim {

namespace {

std::optional<double> argument(const FrRngCall& c, std::string_view name) {
  for (const auto& [n, v] : c.arguments)
    if (n == name) return v;
  return std::nullopt;
}

// The kernel a recorded op runs, as meshsim models it; nullopt for ops it does not model
// (randint_like, bernoulli with a tensor of probabilities).
std::optional<RandomOp> modelled_op(const FrRngCall& c) {
  using Kind = RandomOp::Kind;
  const auto two = [&](Kind kind, std::string_view first, std::string_view second, double a,
                       double b) -> RandomOp {
    RandomOp op{kind, argument(c, first).value_or(a), argument(c, second).value_or(b), {}, 0};
    op.label = fmt::format("{}({:g}, {:g})", c.op, op.a, op.b);
    return op;
  };
  if (c.op == "uniform_") return two(Kind::kUniform, "from", "to", 0.0, 1.0);
  if (c.op == "normal_") return two(Kind::kNormal, "mean", "std", 0.0, 1.0);
  for (const char* name : {"rand", "rand_like"})
    if (c.op == name) return RandomOp{Kind::kUniform, 0.0, 1.0, name, 0};
  for (const char* name : {"randn", "randn_like"})
    if (c.op == name) return RandomOp{Kind::kNormal, 0.0, 1.0, name, 0};
  if (c.op == "bernoulli_" && c.overload == "float") {
    const double p = argument(c, "p").value_or(0.5);
    return RandomOp{Kind::kBernoulli, p, 0.0, fmt::format("bernoulli_({:g})", p), 0};
  }
  if (c.op == "native_dropout") {
    const double p = argument(c, "p").value_or(0.5);
    return RandomOp{Kind::kDropout, p, 0.0, fmt::format("dropout({:g})", p), 0};
  }
  return std::nullopt;
}

SourceLocation where_of(const FrRngCall& c) {
  const FrFrame* f = user_frame(c.frames);
  if (f == nullptr && !c.frames.empty()) f = &c.frames.front();
  if (f == nullptr) return {"(no frame recorded)", 0, 0};
  return {printable(f->filename, 160), f->line, 0};
}

// One rank's CUDA default generator, which DTensor's ops read and advance (PyTorch 2.9 and later).
struct Generator {
  uint64_t seed = RankRng::kDefaultSeed;
  uint64_t offset = 0;
  int64_t epoch = 0;
};

// What ranks holding one shard of one op must agree on, with the first rank that drew it.
struct ShardDraw {
  int64_t rank = 0;
  std::string op;  // the op as ATen names it, its global shape and placements
  uint64_t seed = 0, offset = 0, words = 0;
  SourceLocation where;
};

// An op on a mesh is the k-th random op each of the mesh's ranks ran on it.
using OpKey = std::tuple<std::vector<int64_t>, uint64_t>;

class Checker {
 public:
  Checker(const GpuProfile& gpu, FrRngFindings& out) : gpu_(gpu), out_(out) {}

  void run(const std::vector<FrRankDump>& dumps) {
    std::vector<size_t> order(dumps.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return dumps[a].rank < dumps[b].rank; });
    // Rank 0 first: the others may take its state when a random op makes DTensor's tracker.
    rank0_recorded_ =
        !order.empty() && dumps[order[0]].rank == 0 && dumps[order[0]].dump.recorded.has_value();
    for (const size_t i : order) {
      if (!dumps[i].dump.recorded || dumps[i].dump.recorded->rng.empty()) continue;
      out_.recorded = true;
      ++out_.ranks;
      replay_rank(dumps[i].rank, dumps[i].dump.recorded->rng);
    }
    if (!synced_ranks_.empty()) {
      out_.notes.push_back(fmt::format(
          "{} took rank 0's generator state when a random op made DTensor's RNG tracker (PyTorch "
          "warns; seed every rank with torch.manual_seed or DTensor's manual_seed first)",
          ranks_text({synced_ranks_.begin(), synced_ranks_.end()})));
    }
    if (out_.unplaced > FrRngFindings::kMaxListed)
      out_.notes.push_back(fmt::format("{} draws in all are not placed", out_.unplaced));
    const RngOverlaps found = find_overlaps(draws_, FrRngFindings::kMaxListed);
    out_.overlap_count = found.count;
    bool twice = false, tiny = false;
    for (const RngOverlap& o : found.reported) {
      out_.overlaps.push_back(describe_overlap(o));
      for (const DrawRecord* r : {&o.first, &o.second}) {
        twice |= twice_sharded_.contains(r->tensor);
        tiny |= tiny_shards_.contains(r->tensor);
      }
    }
    if (twice) {
      out_.notes.push_back(
          "a tensor dim sharded over several mesh dims (FSDP2 over TP's Shard gives "
          "_StridedShard and Shard of one dim) makes PyTorch size the first shard by the last of "
          "those mesh dims alone: its shards start past where the op ends, in the next op's "
          "numbers, whatever the seeds");
    }
    if (tiny) {
      out_.notes.push_back(
          "shards of fewer than 4 elements start at offsets rounded up to 4: neighbouring "
          "shards read the same counters, whatever the seeds");
    }
    if (found.stopped)
      out_.notes.push_back("the overlap check stopped early: the overlap count is a lower bound");
  }

 private:
  void stop(int64_t rank, const FrRngCall& c, const std::string& why) {
    if (rank == 0) rank0_stopped_ = true;
    ++out_.stopped_ranks;
    out_.notes.push_back(fmt::format("rank {}: {} at {}: {}; its later draws are not checked", rank,
                                     printable(c.op, 40), where_of(c).to_string(), why));
  }

  void replay_rank(int64_t rank, const std::vector<FrRngCall>& calls) {
    Generator gen;
    std::map<std::vector<int64_t>, uint64_t> ops_on_mesh;
    for (const FrRngCall& c : calls) {
      switch (c.kind) {
        case FrRngCall::Kind::kTorchManualSeed:
          gen = {c.seed, 0, gen.epoch + 1};
          break;
        case FrRngCall::Kind::kManualSeed:
          // A rank outside the mesh got PyTorch's error there (the program's outcome says so).
          if (c.coordinate) gen = {c.seed, 0, gen.epoch + 1};
          break;
        case FrRngCall::Kind::kRandomOp:
          ++out_.random_ops;
          if (!random_op(rank, c, gen, ops_on_mesh[c.mesh_ranks]++)) return;
          break;
      }
    }
  }

  // Returns false when the rank's later draws cannot be placed.
  bool random_op(int64_t rank, const FrRngCall& c, Generator& gen, uint64_t ordinal) {
    if (c.tracker_created && !take_rank0_state(rank, c, gen)) return false;
    if (!c.coordinate) return true;  // DTensor runs nothing on ranks outside the mesh
    if (c.user_generator) {
      // The program's own generator draws; DTensor's stream does not move.
      note_unplaced(rank, c, "it draws from a generator the program passed");
      return true;
    }
    DTensorRngOffsets off;
    bool dim_sharded_twice = false;
    try {
      std::vector<Placement> placements;
      std::vector<int64_t> sharded;
      for (const std::string& p : c.placements) {
        placements.push_back(parse_placement(p));
        if (const int64_t dim = sharded_dim(placements.back()); dim >= 0) {
          dim_sharded_twice |= std::find(sharded.begin(), sharded.end(), dim) != sharded.end();
          sharded.push_back(dim);
        }
      }
      off = dtensor_rng_offsets(c.shape, c.mesh_shape, *c.coordinate, placements);
    } catch (const Error& e) {
      stop(rank, c, e.what());
      return false;
    }
    if (c.meta) return true;  // a meta shard draws nothing and moves nothing
    const std::optional<RandomOp> op = modelled_op(c);
    const std::optional<DType> dtype = parse_dtype(c.dtype);
    uint64_t words = 0;
    std::string unknown;
    if (!op) {
      unknown = "meshsim does not model where its kernel draws";
    } else if (!dtype) {
      unknown = fmt::format("the dtype {} is not one meshsim knows", printable(c.dtype, 40));
    } else {
      try {
        words = random_op_words(*op, c.local_numel, *dtype, gpu_);
      } catch (const Error& e) {
        unknown = e.what();
      }
    }
    Draw d;
    try {
      if (!unknown.empty()) {
        // In the distribute region every rank ends past the whole tensor, whatever its kernel
        // took: only this draw is unknown. A local op moves the stream by its own count.
        if (!c.region) {
          stop(rank, c, unknown);
          return false;
        }
        note_unplaced(rank, c, unknown);
        gen.offset = add_offset(gen.offset, off.post_op_increment);
        return true;
      }
      d.offset = c.region ? add_offset(gen.offset, off.pre_op_increment) : gen.offset;
      // A factory outside the region puts the generator's state back (PyTorch 2.9 and later).
      if (c.region || !c.factory)
        gen.offset =
            add_offset(gen.offset, c.region ? off.post_op_increment : static_cast<int64_t>(words));
    } catch (const Error& e) {
      stop(rank, c, e.what());
      return false;
    }
    d.seed = gen.seed;
    d.words = words;
    d.numel = c.local_numel;
    d.op = op->describe();
    d.shard_index = off.shard_linear_index;
    d.in_distribute_region = c.region;
    d.seed_epoch = gen.epoch;
    // Ranks that draw one parameter (by name) are replicas wherever their meshes are: data
    // parallel copies draw alike on purpose; pipeline stages hold parameters of other names.
    std::string tensor =
        fmt::format("{} as [{}], random op {} of its mesh",
                    c.parameter.empty() ? fmt::format("{}[{}]", c.dtype, fmt::join(c.shape, ", "))
                                        : printable(c.parameter, 120),
                    fmt::join(c.placements, ", "), ordinal);
    if (dim_sharded_twice) twice_sharded_.insert(tensor);
    if (c.region && c.local_numel > 0 && c.local_numel < 4) tiny_shards_.insert(tensor);
    const SourceLocation where = where_of(c);
    compare_replica(rank, c, ordinal, d, where);
    if (words == 0) return true;
    ++out_.draws;
    if (draws_.size() < ScenarioResult::kMaxCheckedDraws) {
      draws_.push_back({where, rank, tensor, std::move(d)});
    } else if (!draws_capped_) {
      draws_capped_ = true;
      out_.notes.push_back(fmt::format("only the first {} draws are checked for overlaps",
                                       ScenarioResult::kMaxCheckedDraws));
    }
    return true;
  }

  // An op that made DTensor's tracker: the rank takes rank 0's state as it stood at rank 0's op
  // of the same count (a program may make the tracker again after dropping it).
  bool take_rank0_state(int64_t rank, const FrRngCall& c, Generator& gen) {
    const size_t k = trackers_made_[rank]++;
    if (rank == 0) {
      rank0_states_.push_back(gen);
      return true;
    }
    if (k < rank0_states_.size()) {
      const Generator& rank0 = rank0_states_[k];
      if (rank0.seed != gen.seed || rank0.offset != gen.offset) synced_ranks_.insert(rank);
      gen.seed = rank0.seed;
      gen.offset = rank0.offset;
      return true;
    }
    stop(rank, c,
         fmt::format("the op made DTensor's tracker, which takes rank 0's state, and {}",
                     !rank0_recorded_ ? "rank 0 was not recorded"
                     : rank0_stopped_ ? "rank 0's draws could not be followed that far"
                                      : "rank 0 made the tracker fewer times"));
    return false;
  }

  void note_unplaced(int64_t rank, const FrRngCall& c, const std::string& why) {
    if (++out_.unplaced <= FrRngFindings::kMaxListed)
      out_.notes.push_back(fmt::format("rank {}: {} at {}: {}; this draw is not placed", rank,
                                       printable(c.op, 40), where_of(c).to_string(), why));
  }

  void compare_replica(int64_t rank, const FrRngCall& c, uint64_t ordinal, const Draw& d,
                       const SourceLocation& where) {
    const std::string op =
        fmt::format("{} of {} [{}]", d.op, fmt::join(c.shape, "x"), fmt::join(c.placements, ", "));
    const ShardDraw mine{rank, op, d.seed, d.offset, d.words, where};
    auto& shards = first_draws_[OpKey{c.mesh_ranks, ordinal}];
    const auto [it, fresh] = shards.try_emplace(*d.shard_index, mine);
    if (fresh) return;
    const ShardDraw& first = it->second;
    std::string why;
    if (first.op != mine.op)
      why = fmt::format("rank {} runs {} at {}, rank {} runs {} at {}", first.rank, first.op,
                        first.where.to_string(), rank, mine.op, where.to_string());
    else if (first.seed != mine.seed || first.offset != mine.offset || first.words != mine.words)
      why = fmt::format(
          "rank {} draws seed {} from offset {}, rank {} seed {} from offset {}: different "
          "numbers",
          first.rank, first.seed, first.offset, rank, mine.seed, mine.offset);
    // Each shard is said once, with the first two ranks that disagree.
    if (why.empty() || !differing_.emplace(OpKey{c.mesh_ranks, ordinal}, *d.shard_index).second)
      return;
    ++out_.replicas_differ_count;
    if (out_.replicas_differ.size() < FrRngFindings::kMaxListed)
      out_.replicas_differ.push_back(fmt::format("random op {} on mesh {} ({}), shard {}: {}",
                                                 ordinal, rank_ranges(c.mesh_ranks),
                                                 where.to_string(), *d.shard_index, why));
  }

  const GpuProfile& gpu_;
  FrRngFindings& out_;
  std::map<int64_t, size_t> trackers_made_;  // by rank
  std::vector<Generator> rank0_states_;      // rank 0's state at each tracker it made
  bool rank0_recorded_ = false, rank0_stopped_ = false;
  std::set<int64_t> synced_ranks_;
  std::set<std::pair<OpKey, int64_t>> differing_;  // shards of ops whose replicas differ
  std::vector<DrawRecord> draws_;
  bool draws_capped_ = false;
  std::set<std::string> twice_sharded_, tiny_shards_;  // tensors of draws, by the quirk they meet
  std::map<OpKey, std::map<int64_t, ShardDraw>> first_draws_;
};

}  // namespace

FrRngFindings check_recorded_rng(const std::vector<FrRankDump>& dumps, const GpuProfile& gpu) {
  FrRngFindings out;
  out.gpu = gpu.name;
  Checker(gpu, out).run(dumps);
  return out;
}

namespace {

// "  <heading>:" and the listed lines, then how many were left out; nothing when there are none.
std::string listed(uint64_t count, const std::vector<std::string>& lines,
                   const std::string& heading) {
  if (count == 0) return {};
  std::string out = "  " + heading + ":\n";
  for (const std::string& line : lines) out += "    " + line + "\n";
  if (count > lines.size()) out += fmt::format("    ... and {} more\n", count - lines.size());
  return out;
}

}  // namespace

std::string fr_rng_text(const FrRngFindings& f) {
  if (!f.recorded) return {};
  std::string out = fmt::format(
      "\nRNG: {} DTensor random ops on {} ranks, {} draws placed on the Philox stream as {}'s "
      "kernels draw:\n",
      f.random_ops, f.ranks, f.draws, f.gpu);
  if (f.clean())
    out += f.unplaced == 0 && f.stopped_ranks == 0
               ? "  no two draws overlap; ranks holding one shard draw alike\n"
               : "  no two placed draws overlap; ranks holding one shard draw alike where placed "
                 "(the notes say what is not)\n";
  const auto s = [](uint64_t n) { return n == 1 ? "" : "s"; };
  out += listed(f.overlap_count, f.overlaps,
                fmt::format("{} overlap{} (draws meant to be independent, same numbers)",
                            f.overlap_count, s(f.overlap_count)));
  out += listed(f.replicas_differ_count, f.replicas_differ,
                fmt::format("{} shard{} whose replicas draw different numbers",
                            f.replicas_differ_count, s(f.replicas_differ_count)));
  for (const std::string& n : f.notes) out += "  note: " + n + "\n";
  return out;
}

Json fr_rng_json(const FrRngFindings& f) {
  return Json{{"gpu", f.gpu},
              {"ranks", f.ranks},
              {"random_ops", f.random_ops},
              {"draws", f.draws},
              {"unplaced", f.unplaced},
              {"stopped_ranks", f.stopped_ranks},
              {"clean", f.clean()},
              {"overlap_count", f.overlap_count},
              {"overlaps", f.overlaps},
              {"replicas_differ_count", f.replicas_differ_count},
              {"replicas_differ", f.replicas_differ},
              {"notes", f.notes}};
}

}  // namespace meshsim::sim
