// `distinct` and `equal` expectations: each rank records what it holds when it reaches the
// entry; after the run the samples are compared across ranks.
//   distinct = { tensor = "w", across = ["pp", "tp"] }: ranks whose coordinates differ in any of
//     these dims drew other random numbers (no two shards read the same Philox counters);
//   equal = { module = "fc", across = ["dp"] }: ranks whose coordinates differ only in these dims
//     made the same draw (replicas agree).
// Values held as drawn are judged by their draw, others by value (sample_comparison.hpp).
// Coordinates are taken in the DTensor's own mesh, or in `mesh` when given (required for plain
// tensors); only ranks of one copy of that mesh are compared.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "sim/report/sample_comparison.hpp"
#include "sim/run/query.hpp"
#include "sim/run/rank_state.hpp"
#include "sim/runtime/group_label.hpp"
#include "sim/steps/step_kinds.hpp"
#include "src/io/tensor_digest.hpp"

namespace meshsim::sim {

namespace {

struct Target {
  std::string tensor;  // or
  std::string module;
  std::string mesh;  // empty: the DTensor's own
  std::vector<std::string> across;
  bool distinct = true;

  std::vector<std::string> names(const RankState& rank) const {
    if (!tensor.empty()) return {tensor};
    std::vector<std::string> out{module + ".weight"};
    if (rank.module(module).bias) out.push_back(module + ".bias");
    return out;
  }
  std::string describe() const {
    return fmt::format("{}({} across {})", distinct ? "distinct" : "equal",
                       tensor.empty() ? "module " + module : tensor, fmt::join(across, ", "));
  }
};

class RecordSamples final : public Step {
 public:
  void run(RankState& rank) const override {
    for (const std::string& name : target_.names(rank)) {
      const Parameter& v = rank.value(name);
      const DTensor* d = std::get_if<DTensor>(&v);
      if (d == nullptr && target_.mesh.empty()) {
        throw value_error(fmt::format(
            "{}: \"{}\" is a plain tensor; name the mesh to compare across (mesh = \"...\")",
            target_.describe(), name));
      }
      const DeviceMesh& m = target_.mesh.empty() ? d->spec().mesh : rank.mesh(target_.mesh);
      if (!m.coordinate()) continue;  // holds nothing of it
      std::vector<bool> is_across(m.ndim(), false);
      for (const std::string& dim : target_.across)
        is_across.at(m.dim_index(*rank.dim_of(dim))) = true;
      ShardSample s;
      s.tensor = name;
      s.replica = m.replica();
      for (size_t i = 0; i < m.ndim(); ++i)
        (is_across[i] ? s.across : s.others).push_back((*m.coordinate())[i]);
      const Tensor& t = rank.tensor(name);
      s.meta = t.is_meta();
      s.numel = t.numel();
      if (!s.meta) {
        s.digest = tensor_digest(t);
        s.preview = first_values(t, 4);
        if (const Draw* drawn = rank.draw_held(name, s.digest)) s.drawn = *drawn;
      }
      rank.record_sample(id_, std::move(s));
    }
  }
  int64_t id_ = 0;
  Target target_;
};

class CompareSamples final : public OutcomeExpectation {
 public:
  ExpectationRecord check(const ScenarioResult& result) const override {
    SampleVerdict verdict;
    const auto found = result.cross_rank_samples.find(id_);
    size_t samples = 0;
    if (found != result.cross_rank_samples.end()) {
      // Per tensor: which rank holds which sample.
      std::map<std::string, std::vector<HeldSample>> by_tensor;
      for (size_t r = 0; r < found->second.size(); ++r) {
        for (const ShardSample& s : found->second[r]) {
          by_tensor[s.tensor].emplace_back(static_cast<int64_t>(r), &s);
          ++samples;
        }
      }
      for (const auto& [tensor, held] : by_tensor) {
        std::vector<int64_t> meta_ranks;
        for (const auto& [r, s] : held) {
          if (s->meta) meta_ranks.push_back(r);
        }
        if (!meta_ranks.empty()) {
          verdict.problems.push_back(
              fmt::format("\"{}\" is meta on rank(s) {}: no values to compare", tensor,
                          rank_ranges(meta_ranks)));
        } else if (target_.distinct) {
          compare_distinct(tensor, held, verdict);
        } else {
          compare_equal(tensor, held, verdict);
        }
      }
    }
    if (samples == 0)
      verdict.problems.push_back("no rank reached this expectation holding the tensor");
    const bool passed = verdict.problems.empty();
    return {where,
            -1,
            target_.describe(),
            passed,
            passed ? Json(summary(samples, verdict)) : std::move(verdict.problems),
            target_.distinct ? "every pair differing in an across dim drew other random numbers"
                             : "every pair differing only in across dims made the same draw"};
  }
  bool declares_run_outcome() const override { return false; }

  int64_t id_ = 0;
  Target target_;

 private:
  // "64 samples compared by the Philox counters they drew; 2 pairs of values equal by chance
  // (disjoint counters): ranks 3,9 ([0.25])".
  static std::string summary(size_t samples, const SampleVerdict& verdict) {
    std::string out =
        fmt::format("{} samples compared {}", samples,
                    verdict.by_draws ? "by the Philox counters they drew" : "by value");
    if (verdict.coincidence_count > 0) {
      out += fmt::format(
          "; {} group{} of ranks hold equal values by chance (drawn from other counters): {}",
          verdict.coincidence_count, verdict.coincidence_count == 1 ? "" : "s",
          fmt::join(verdict.coincidences, "; "));
      if (verdict.coincidence_count > verdict.coincidences.size()) out += "; ...";
    }
    return out;
  }
};

}  // namespace

std::optional<CrossRankExpectation> parse_cross_rank_expectation(const toml::table& entry,
                                                                 LoadContext& ctx) {
  const toml::node* node = entry.get("distinct");
  const bool distinct = node != nullptr;
  if (node == nullptr) node = entry.get("equal");
  if (node == nullptr) return std::nullopt;
  const std::string_view key = distinct ? "distinct" : "equal";
  ctx.only_keys(entry, {key, "when"}, fmt::format("an [[expect]] with {}", key));
  const toml::table* args = node->as_table();
  if (args == nullptr)
    ctx.fail(*node, fmt::format("{} must be a table {{ tensor or module, across }}", key));
  ctx.only_keys(*args, {"tensor", "module", "across", "mesh"}, key);
  Target t;
  t.distinct = distinct;
  const toml::node* tensor = args->get("tensor");
  const toml::node* module = args->get("module");
  if ((tensor == nullptr) == (module == nullptr))
    ctx.fail(*node, fmt::format("{} needs one of tensor or module", key));
  if (tensor != nullptr) {
    t.tensor = ctx.string_of(*tensor, "tensor");
    if (!ctx.has_tensor(t.tensor))
      ctx.fail(*tensor, fmt::format("no tensor \"{}\" is set before this", t.tensor));
  } else {
    t.module = ctx.string_of(*module, "module");
    if (!ctx.has_module(t.module))
      ctx.fail(*module, fmt::format("no module \"{}\" is created before this", t.module));
  }
  const toml::node& across = ctx.require(*args, "across", key);
  t.across = ctx.strings_of(across, "across");
  if (t.across.empty()) ctx.fail(across, "across needs at least one mesh dim name");
  if (std::find(t.across.begin(), t.across.end(), "") != t.across.end())
    ctx.fail(across, "across may not contain an empty dim name");
  if (const toml::node* m = args->get("mesh")) {
    t.mesh = ctx.string_of(*m, "mesh");
    const LoadContext::MeshInfo& info = ctx.require_mesh(*m, t.mesh);
    for (const std::string& dim : t.across) {
      if (std::find(info.dims.begin(), info.dims.end(), dim) == info.dims.end())
        ctx.fail(across, fmt::format("mesh \"{}\" has no dim \"{}\"", t.mesh, dim));
    }
  }
  const int64_t id = ctx.next_cross_rank_id();
  auto record = std::make_unique<RecordSamples>();
  record->id_ = id;
  record->target_ = t;
  auto compare = std::make_unique<CompareSamples>();
  compare->id_ = id;
  compare->target_ = std::move(t);
  compare->where = ctx.at(entry);
  return CrossRankExpectation{std::move(record), std::move(compare)};
}

}  // namespace meshsim::sim
