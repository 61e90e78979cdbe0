// `distinct` and `equal` expectations: each rank records what it holds when it reaches the
// entry; after the run the samples are compared across ranks.
//   distinct = { tensor = "w", across = ["pp", "tp"] }: ranks whose coordinates differ in any of
//     these dims hold different values (no two shards drew the same numbers);
//   equal = { module = "fc", across = ["dp"] }: ranks whose coordinates differ only in these dims
//     hold the same values (replicas agree).
// Coordinates are taken in the DTensor's own mesh, or in `mesh` when given (required for plain
// tensors).
#include <algorithm>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "sim/run/query.hpp"
#include "sim/run/rank_state.hpp"
#include "sim/runtime/hang_report.hpp"
#include "sim/scenario/step_registry.hpp"

namespace meshsim::sim {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xbf58476d1ce4e5b9ull;
}

// Of dtype, shape and every byte: equal tensors give equal digests; different ones collide
// with probability about 2^-64.
uint64_t digest_of(const Tensor& t) {
  uint64_t h = mix(0, static_cast<uint64_t>(t.dtype()));
  for (int64_t s : t.shape()) h = mix(h, static_cast<uint64_t>(s));
  const std::span<const std::byte> bytes = t.bytes();
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w = 0;
    std::memcpy(&w, bytes.data() + i, 8);
    h = mix(h, w);
  }
  for (; i < bytes.size(); ++i) h = mix(h, static_cast<uint64_t>(bytes[i]));
  return h;
}

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
        s.digest = digest_of(t);
        s.preview = first_values(t, 4);
      }
      rank.record_sample(id_, std::move(s));
    }
  }
  int64_t id_ = 0;
  Target target_;
};

// A list of ranks and what the first of them holds, for the report.
Json ranks_holding(const std::vector<int64_t>& ranks, const ShardSample& sample) {
  return Json{{"ranks", rank_ranges(ranks)}, {"first_values", sample.preview}};
}

class CompareSamples final : public OutcomeExpectation {
 public:
  ExpectationRecord check(const ScenarioResult& result) const override {
    Json problems = Json::array();
    const auto found = result.cross_rank_samples.find(id_);
    size_t samples = 0;
    if (found != result.cross_rank_samples.end()) {
      // Per tensor: which rank holds which sample.
      std::map<std::string, std::vector<std::pair<int64_t, const ShardSample*>>> by_tensor;
      for (size_t r = 0; r < found->second.size(); ++r) {
        for (const ShardSample& s : found->second[r]) {
          by_tensor[s.tensor].emplace_back(static_cast<int64_t>(r), &s);
          ++samples;
        }
      }
      for (const auto& [tensor, held] : by_tensor) compare(tensor, held, problems);
    }
    if (samples == 0) problems.push_back("no rank reached this expectation holding the tensor");
    const bool passed = problems.empty();
    return {where,
            -1,
            target_.describe(),
            passed,
            passed ? Json(fmt::format("{} samples compared", samples)) : std::move(problems),
            target_.distinct ? "every pair differing in an across dim differs"
                             : "every pair differing only in across dims agrees"};
  }
  bool declares_run_outcome() const override { return false; }

  int64_t id_ = 0;
  Target target_;

 private:
  static constexpr size_t kMaxListed = 8;

  void compare(const std::string& tensor,
               const std::vector<std::pair<int64_t, const ShardSample*>>& held,
               Json& problems) const {
    std::vector<int64_t> meta;
    for (const auto& [r, s] : held) {
      if (s->meta) meta.push_back(r);
    }
    if (!meta.empty()) {
      problems.push_back(fmt::format("\"{}\" is meta on rank(s) {}: no values to compare", tensor,
                                     rank_ranges(meta)));
      return;
    }
    if (target_.distinct) {
      // Ranks holding equal values must agree on every across dim. Empty shards (uneven
      // sharding) hold no values to repeat.
      std::map<std::pair<int64_t, uint64_t>, std::map<std::vector<int64_t>, std::vector<int64_t>>>
          by_digest;
      for (const auto& [r, s] : held) {
        if (s->numel > 0) by_digest[{s->replica, s->digest}][s->across].push_back(r);
      }
      for (const auto& [digest, groups] : by_digest) {
        if (groups.size() < 2 || problems.size() >= kMaxListed) continue;
        std::vector<int64_t> ranks;
        for (const auto& [coord, in_group] : groups)
          ranks.insert(ranks.end(), in_group.begin(), in_group.end());
        std::sort(ranks.begin(), ranks.end());
        problems.push_back({{"tensor", tensor},
                            {"same_values_on_ranks", rank_ranges(ranks)},
                            {"first_values", held_sample(held, ranks[0])->preview}});
      }
    } else {
      // Ranks that differ only in across dims must hold one value.
      std::map<std::pair<int64_t, std::vector<int64_t>>, std::map<uint64_t, std::vector<int64_t>>>
          by_others;
      for (const auto& [r, s] : held) by_others[{s->replica, s->others}][s->digest].push_back(r);
      for (const auto& [others, values] : by_others) {
        if (values.size() < 2 || problems.size() >= kMaxListed) continue;
        Json differing = Json::array();
        for (const auto& [digest, ranks] : values)
          differing.push_back(ranks_holding(ranks, *held_sample(held, ranks[0])));
        problems.push_back({{"tensor", tensor}, {"replicas_that_differ", differing}});
      }
    }
  }

  static const ShardSample* held_sample(
      const std::vector<std::pair<int64_t, const ShardSample*>>& held, int64_t rank) {
    for (const auto& [r, s] : held) {
      if (r == rank) return s;
    }
    return nullptr;
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
