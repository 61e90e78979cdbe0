#include "sim/run/query.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sim/runtime/comm_counts.hpp"
#include "sim/scenario/excerpt.hpp"

#include "src/dtensor/local_shard.hpp"

namespace meshsim::sim {

namespace {

// 'tp' as tp: a dim name as DeviceMesh's messages quote it.
std::string without_quotes(const std::string& name) {
  return name.size() >= 2 && name.front() == '\'' && name.back() == '\''
             ? name.substr(1, name.size() - 2)
             : name;
}

// Two tensors, or two DTensors, that PyTorch's seed test would call equal.
bool same_values(const Parameter& a, const Parameter& b) {
  if (a.index() != b.index()) return false;
  if (const auto* t = std::get_if<Tensor>(&a)) return t->same_as(std::get<Tensor>(b));
  return std::get<DTensor>(a) == std::get<DTensor>(b);
}

Json ranks_json(const RankTensor& t) {
  // Nest the row-major values by shape.
  std::function<Json(size_t, size_t&)> build = [&](size_t dim, size_t& next) -> Json {
    if (dim == t.shape.size()) return t.values[next++];
    Json list = Json::array();
    for (int64_t i = 0; i < t.shape[dim]; ++i) list.push_back(build(dim + 1, next));
    return list;
  };
  size_t next = 0;
  return build(0, next);
}

// Owned indices of one dim as half-open runs: [[0, 2], [5, 6]] holds 0, 1 and 5.
Json runs_json(const IndexRuns& held) {
  Json out = Json::array();
  for (const IndexRuns::Run& r : held.runs()) out.push_back(Json::array({r.start, r.stop}));
  return out;
}

// An expected dim given as plain indices ([0, 1, 5]) becomes runs; runs stay as they are.
Json indices_as_runs(const Json& dim) {
  if (!dim.is_array() || dim.empty() || !dim[0].is_number_integer()) return dim;
  std::vector<int64_t> indices;
  for (const Json& i : dim) {
    if (!i.is_number_integer()) return dim;  // a malformed expectation fails as written
    indices.push_back(i.get<int64_t>());
  }
  const std::optional<IndexRuns> runs = IndexRuns::from_indices(indices);
  return runs ? runs_json(*runs) : dim;  // an impossible index fails the comparison as written
}

// PyTorch's funcol names for what meshsim calls reduce_scatter and all_to_all.
std::string meshsim_op_name(const std::string& name) {
  if (name == "reduce_scatter_tensor") return "reduce_scatter";
  if (name == "all_to_all_single") return "all_to_all";
  return name;
}

// Expected counts may name ops as CommDebugMode does.
Json with_op_names(Json expected) {
  if (expected.is_string()) return meshsim_op_name(expected.get<std::string>());
  if (!expected.is_object()) return expected;
  Json out = Json::object();
  for (auto& [op, count] : expected.items()) out[meshsim_op_name(op)] = std::move(count);
  return out;
}

// Expected placements in any spelling ("S(0)", "Shard(dim=0)") as the report writes them.
Json with_placement_names(Json expected) {
  if (!expected.is_array()) return expected;
  for (Json& p : expected) {
    if (!p.is_string()) continue;
    try {
      p = placement_name(parse_placement(p.get<std::string>()));
    } catch (const Error&) {
      // Not a placement: it fails the comparison as written.
    }
  }
  return expected;
}

Json dtensor_metadata(const DTensor& t) {
  const DTensorSpec& spec = t.spec();
  Json placements = Json::array();
  for (const Placement& p : spec.placements) placements.push_back(placement_name(p));
  // As DTensorSpec derives it: the tensor dims that are cut, each with its mesh dims in cut order;
  // null when the _StridedShards encode no order.
  Json shard_order = nullptr;
  if (const std::optional<ShardOrder> order =
          decode_shard_order(spec.placements, spec.mesh.shape(), spec.shape.size())) {
    shard_order = Json::array();
    for (size_t d = 0; d < order->size(); ++d) {
      if (!(*order)[d].empty())
        shard_order.push_back(Json{{"tensor_dim", d}, {"mesh_dims", (*order)[d]}});
    }
  }
  return Json{{"shape", spec.shape},
              {"stride", spec.stride()},
              {"dtype", dtype_name(spec.dtype)},
              {"placements", std::move(placements)},
              {"shard_order", std::move(shard_order)},
              {"mesh_shape", spec.mesh.shape()},
              {"mesh_dims", spec.mesh.dim_names() ? Json(*spec.mesh.dim_names()) : Json(nullptr)},
              {"local_shape", t.local().shape()},
              {"requires_grad", t.requires_grad()}};
}

}  // namespace

const std::vector<std::string>& layout_fields() {
  static const std::vector<std::string> fields{"shape", "stride", "storage_offset", "is_contiguous",
                                               "dtype"};
  return fields;
}

const std::vector<std::string>& dtensor_fields() {
  static const std::vector<std::string> fields{"shape",      "stride",      "dtype",
                                               "placements", "shard_order", "mesh_shape",
                                               "mesh_dims",  "local_shape", "requires_grad"};
  return fields;
}

Query Query::parse_collectives(const toml::node& node, LoadContext& ctx) {
  // "counts" (per op), "total", or { op, mesh, dim }: one op's count and/or one group's.
  Query q;
  q.key_ = "collectives";
  const toml::table* t = node.as_table();
  if (t == nullptr) {
    q.generator_ = ctx.string_of(node, "collectives");
    if (q.generator_ != "counts" && q.generator_ != "total")
      ctx.fail(node, "collectives is \"counts\", \"total\" or { op, mesh, dim }");
    if (q.generator_ == "counts") q.generator_.clear();
    return q;
  }
  ctx.only_keys(*t, {"op", "mesh", "dim"}, "collectives query");
  if (const toml::node* op = t->get("op")) {
    q.generator_ = meshsim_op_name(ctx.string_of(*op, "op"));
    std::vector<std::string_view> known;
    for (int i = 0; i <= static_cast<int>(CollectiveOp::kAllGatherObject); ++i) {
      const auto kind = static_cast<CollectiveOp>(i);
      if (CommCounts::counts(kind)) known.push_back(collective_op_name(kind));
    }
    if (std::find(known.begin(), known.end(), q.generator_) == known.end())
      ctx.fail(*op, fmt::format("op is one of {} (CommDebugMode counts no send, recv or barrier)",
                                fmt::join(known, ", ")));
  }
  if (const toml::node* mesh = t->get("mesh")) {
    q.mesh_ = ctx.string_of(*mesh, "mesh");
    const LoadContext::MeshInfo& info = ctx.require_mesh(*mesh, q.mesh_);
    if (const toml::node* dim = t->get("dim")) {
      q.dim_ = ctx.dim_name(*dim, q.mesh_, info);
    } else if (info.ndim != 1) {
      ctx.fail(node, "collectives in a mesh of several dims needs a dim");
    }
  } else if (t->get("dim") != nullptr) {
    ctx.fail(*t->get("dim"), "dim needs a mesh");
  }
  if (q.generator_.empty() && q.mesh_.empty()) ctx.fail(node, "collectives needs op or mesh");
  return q;
}

Json Query::observe_collectives(const RankState& rank) const {
  std::optional<int64_t> group;
  if (!mesh_.empty()) {
    if (!rank.mesh(mesh_).coordinate()) return nullptr;  // no group of it here
    group = rank.group(mesh_, dim_).id;
  }
  Json counts = Json::object();
  int64_t total = 0;
  for (const auto& [key, n] : rank.activity().issued.by_group_and_op) {
    if (group && key.first != *group) continue;
    const std::string op(collective_op_name(key.second));
    if (!generator_.empty() && generator_ != "total" && op != generator_) continue;
    counts[op] = counts.value(op, int64_t{0}) + n;
    total += n;
  }
  return generator_.empty() ? counts : Json(total);
}

std::vector<Placement> placements_of(const toml::node& node, const LoadContext& ctx,
                                     const std::string& mesh, std::optional<size_t> tensor_ndim) {
  std::vector<Placement> out;
  const toml::array* array = node.as_array();
  if (array == nullptr) ctx.fail(node, "placements must be an array of strings like \"Shard(0)\"");
  for (const toml::node& item : *array) {
    try {
      out.push_back(parse_placement(ctx.string_of(item, "a placement")));
    } catch (const Error& e) {
      ctx.fail(item, e.what());
    }
    const Placement& p = out.back();
    if (!tensor_ndim || ctx.entry_raises() ||
        (!std::holds_alternative<Shard>(p) && !std::holds_alternative<StridedShard>(p)))
      continue;
    const int64_t d = sharded_dim(p);
    const auto ndim = static_cast<int64_t>(*tensor_ndim);
    if (d >= ndim || d < -ndim) {
      ctx.fail(item, fmt::format("{} shards dim {} of a {}-d tensor (dims: -{} to {})",
                                 placement_name(p), d, ndim, ndim, ndim - 1));
    }
  }
  const LoadContext::MeshInfo* info = ctx.mesh(mesh);
  if (info != nullptr && out.size() != info->ndim && !ctx.entry_raises()) {
    ctx.fail(node, fmt::format("{} placements for mesh \"{}\", which has {} dims", out.size(), mesh,
                               info->ndim));
  }
  return out;
}

std::vector<ShardOrderEntry> shard_order_of(const toml::node& node, const LoadContext& ctx) {
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    ctx.fail(node, "shard_order must be an array of { tensor_dim, mesh_dims } (ShardOrderEntry)");
  }
  std::vector<ShardOrderEntry> out;
  for (const toml::node& item : *array) {
    const toml::table* entry = item.as_table();
    if (entry == nullptr) ctx.fail(item, "a shard_order entry is { tensor_dim, mesh_dims }");
    ctx.only_keys(*entry, {"tensor_dim", "mesh_dims"}, "shard_order entry");
    ShardOrderEntry e;
    const toml::node& dim = ctx.require(*entry, "tensor_dim", "shard_order entry");
    e.tensor_dim = ctx.integer_of(dim, "tensor_dim");
    if (e.tensor_dim < 0 || e.tensor_dim >= static_cast<int64_t>(Tensor::kMaxDims))
      ctx.fail(dim, fmt::format("tensor_dim must be in [0, {})", Tensor::kMaxDims));
    const toml::node& dims = ctx.require(*entry, "mesh_dims", "shard_order entry");
    e.mesh_dims = ctx.integers_of(dims, "mesh_dims");
    // PyTorch's ShardOrderEntry guarantees a non-empty list.
    if (e.mesh_dims.empty()) ctx.fail(dims, "mesh_dims may not be empty");
    out.push_back(std::move(e));
  }
  return out;
}

const std::vector<std::string_view>& Query::keys() {
  static const std::vector<std::string_view> k{
      "value",          "coordinate",        "mesh",       "shape",
      "groups",         "group_name",        "local_rank", "local_shard",
      "owned_indices",  "has_group_names",   "tensor",     "rng_state",
      "same",           "stale_group_names", "my_group",   "intra_node",
      "process_groups", "collectives",       "dtensor",    "layout"};
  return k;
}

Query Query::parse(std::string_view key, const toml::node& node, LoadContext& ctx) {
  Query q;
  q.key_ = key;
  if (key == "value") {
    q.expression_ = ctx.expression_of(node, "value");
    return q;
  }
  if (key == "tensor") {
    // "w", or { name = "w", first = 4 } for the first values only.
    const toml::node* name = &node;
    if (const toml::table* t = node.as_table()) {
      ctx.only_keys(*t, {"name", "first"}, "tensor query");
      name = &ctx.require(*t, "name", "tensor query");
      if (const toml::node* f = t->get("first")) {
        q.first_ = ctx.integer_of(*f, "first");
        if (*q.first_ < 1) ctx.fail(*f, "first must be at least 1");
      }
    }
    q.tensor_ = ctx.string_of(*name, "tensor");
    if (!ctx.has_tensor(q.tensor_))
      ctx.fail(*name, fmt::format("no tensor \"{}\" is set before this", q.tensor_));
    return q;
  }
  if (key == "same") {
    // ["x", "y"]: equal tensors, or DTensors with equal specs, shards and requires_grad; or two
    // meshes equal as DeviceMesh.__eq__ (and so __hash__) has them.
    const std::vector<std::string> names = ctx.strings_of(node, "same");
    if (names.size() != 2) ctx.fail(node, "same names two tensors or two meshes: [\"x\", \"y\"]");
    q.meshes_ = ctx.mesh(names[0]) != nullptr && !ctx.has_tensor(names[0]);
    for (const std::string& n : names) {
      if (q.meshes_ && ctx.mesh(n) == nullptr)
        ctx.fail(node, fmt::format("no mesh \"{}\" is defined before this", n));
      if (!q.meshes_ && !ctx.has_tensor(n))
        ctx.fail(node, fmt::format("no tensor \"{}\" is set before this", n));
    }
    q.tensor_ = names[0];
    q.other_tensor_ = names[1];
    return q;
  }
  if (key == "has_group_names" && node.as_table() && node.as_table()->get("tensor")) {
    // { tensor = "y" }: the mesh of a DTensor's spec.
    ctx.only_keys(*node.as_table(), {"tensor"}, "has_group_names query");
    const toml::node& name = *node.as_table()->get("tensor");
    q.tensor_ = ctx.string_of(name, "tensor");
    if (!ctx.has_tensor(q.tensor_))
      ctx.fail(name, fmt::format("no tensor \"{}\" is set before this", q.tensor_));
    return q;
  }
  if (key == "process_groups") {
    // "created": c10d's group counter (every rank creates every group, WORLD included);
    // "joined": the groups the rank is a member of (its communicators).
    q.generator_ = ctx.string_of(node, "process_groups");
    if (q.generator_ != "created" && q.generator_ != "joined") {
      ctx.fail(node,
               "process_groups is \"created\" (every group created, WORLD included) or "
               "\"joined\" (the groups this rank is a member of)");
    }
    return q;
  }
  if (key == "collectives") return parse_collectives(node, ctx);
  if (key == "dtensor" || key == "layout") {
    // "x" (every field), or { name = "x", field = "shape" }.
    const std::string what = fmt::format("{} query", key);
    const toml::node* name = &node;
    if (const toml::table* t = node.as_table()) {
      ctx.only_keys(*t, {"name", "field"}, what);
      name = &ctx.require(*t, "name", what);
      const toml::node& field = ctx.require(*t, "field", what);
      q.generator_ = ctx.string_of(field, "field");
      const auto& fields = key == "dtensor" ? dtensor_fields() : layout_fields();
      if (std::find(fields.begin(), fields.end(), q.generator_) == fields.end())
        ctx.fail(field, fmt::format("field is one of {}", fmt::join(fields, ", ")));
    }
    q.tensor_ = ctx.string_of(*name, key);
    if (!ctx.has_tensor(q.tensor_))
      ctx.fail(*name, fmt::format("no tensor \"{}\" is set before this", q.tensor_));
    return q;
  }
  if (key == "rng_state") {
    // [seed, offset] of the default generator, or of DTensor's 2.6 tracker.
    q.generator_ = ctx.string_of(node, "rng_state");
    if (q.generator_ != "default" && q.generator_ != "tracker")
      ctx.fail(node, "rng_state is \"default\" (the CUDA default generator) or \"tracker\"");
    return q;
  }
  // Either "mesh" or { mesh = "...", dim = ..., shape = [...], placements = [...] }.
  const toml::node* mesh_node = &node;
  const toml::table* table = node.as_table();
  if (table != nullptr) {
    ctx.only_keys(*table, {"mesh", "dim", "shape", "placements"}, fmt::format("{} query", key));
    mesh_node = &ctx.require(*table, "mesh", fmt::format("{} query", key));
  }
  q.mesh_ = ctx.string_of(*mesh_node, fmt::format("the mesh of {}", key));
  const LoadContext::MeshInfo* info = &ctx.require_mesh(*mesh_node, q.mesh_);
  if (key == "intra_node" && !ctx.gpus_per_node())
    ctx.fail(node, "intra_node needs gpus_per_node in [scenario] (how many ranks share a host)");
  const bool needs_dim = key == "groups" || key == "my_group" || key == "intra_node";
  const bool takes_dim = needs_dim || key == "group_name" || key == "local_rank";
  const bool takes_shard = key == "local_shard" || key == "owned_indices";
  if (table == nullptr) {
    if (needs_dim && info->ndim != 1) ctx.fail(node, fmt::format("{} needs a dim", key));
    if (takes_shard) ctx.fail(node, fmt::format("{} needs mesh, shape and placements", key));
    return q;
  }
  if (const toml::node* dim = table->get("dim")) {
    if (!takes_dim) ctx.fail(*dim, fmt::format("{} takes no dim", key));
    q.dim_ = ctx.dim_name(*dim, q.mesh_, *info);
  } else if (needs_dim && info->ndim != 1) {
    ctx.fail(node, fmt::format("{} needs a dim", key));
  }
  if (takes_shard) {
    q.global_shape_ = ctx.integers_of(ctx.require(*table, "shape", key), "shape");
    const toml::node& p = ctx.require(*table, "placements", key);
    q.placements_ = placements_of(p, ctx, q.mesh_, q.global_shape_.size());
  } else if (table->get("shape") || table->get("placements")) {
    ctx.fail(node, fmt::format("{} takes no shape or placements", key));
  }
  return q;
}

Json Query::canonical_expected(Json expected) const {
  if (key_ == "collectives") return with_op_names(std::move(expected));
  if (key_ == "dtensor") {
    if (generator_ == "placements") return with_placement_names(std::move(expected));
    if (generator_.empty() && expected.is_object() && expected.contains("placements"))
      expected["placements"] = with_placement_names(std::move(expected["placements"]));
    return expected;
  }
  if (!expected.is_array()) return expected;
  if (key_ == "owned_indices") {
    for (Json& dim : expected) dim = indices_as_runs(dim);
  } else if (key_ == "stale_group_names") {
    // Dim names were once given with Python's quotes ("'tp'"); both spellings mean the dim.
    for (Json& dim : expected) {
      if (dim.is_string()) dim = without_quotes(dim.get<std::string>());
    }
  }
  return expected;
}

bool Query::yields_integers() const {
  if (key_ == "layout")
    return generator_ == "shape" || generator_ == "stride" || generator_ == "storage_offset";
  if (key_ == "dtensor")
    return generator_ == "shape" || generator_ == "stride" || generator_ == "local_shape" ||
           generator_ == "mesh_shape";
  return key_ != "group_name" && key_ != "has_group_names" && key_ != "same" &&
         key_ != "stale_group_names" && key_ != "intra_node";
}

std::string Query::describe() const {
  if (expression_) return fmt::format("value({})", excerpt(expression_->text()));
  if (key_ == "rng_state") return fmt::format("rng_state({})", generator_);
  if (key_ == "process_groups") return fmt::format("process_groups({})", generator_);
  if (key_ == "same") return fmt::format("same({}, {})", tensor_, other_tensor_);
  if (key_ == "dtensor" || key_ == "layout")
    return generator_.empty() ? fmt::format("{}({})", key_, tensor_)
                              : fmt::format("{}({}, {})", key_, tensor_, generator_);
  if (key_ == "collectives") {
    std::string args = generator_.empty() ? std::string("counts") : generator_;
    if (!mesh_.empty())
      args += dim_.empty() ? " in " + mesh_ : fmt::format(" in {}, {}", mesh_, dim_);
    return fmt::format("collectives({})", args);
  }
  if (key_ == "has_group_names" && !tensor_.empty())
    return fmt::format("has_group_names(tensor {})", tensor_);
  if (key_ == "tensor")
    return first_ ? fmt::format("tensor({}, first {})", tensor_, *first_)
                  : fmt::format("tensor({})", tensor_);
  std::string args = mesh_;
  if (!dim_.empty()) args += ", " + dim_;
  if (!global_shape_.empty() || !placements_.empty()) {
    std::vector<std::string> names;
    for (const Placement& p : placements_) names.push_back(placement_name(p));
    args += fmt::format(", [{}], [{}]", fmt::join(global_shape_, ", "), fmt::join(names, ", "));
  }
  return fmt::format("{}({})", key_, args);
}

Json Query::observe(const RankState& rank) const {
  if (expression_) return expression_->evaluate(rank);
  if (key_ == "rng_state") {
    const std::optional<PhiloxState> s = generator_ == "default"
                                             ? std::optional(rank.rng().default_generator())
                                             : rank.rng().tracker_state();
    if (!s) return nullptr;
    return Json::array({s->seed, s->offset});
  }
  if (key_ == "tensor") {
    const Tensor& t = rank.tensor(tensor_);
    if (t.is_meta()) return Json{{"meta", t.describe()}};
    // Reports stay proportional to what a person can read and compare.
    constexpr int64_t kMaxValues = int64_t{1} << 20;
    if (t.numel() > kMaxValues && !(first_ && *first_ <= kMaxValues)) {
      throw value_error(
          fmt::format("tensor \"{}\" ({}) has {} elements; a tensor query lists at "
                      "most {} values",
                      tensor_, t.describe(), t.numel(), kMaxValues));
    }
    return first_values(t, first_ ? std::min(*first_, t.numel()) : t.numel());
  }
  if (key_ == "same" && meshes_) return rank.mesh(tensor_) == rank.mesh(other_tensor_);
  if (key_ == "same") return same_values(rank.value(tensor_), rank.value(other_tensor_));
  if (key_ == "collectives") return observe_collectives(rank);
  if (key_ == "dtensor") {
    const auto* t = std::get_if<DTensor>(&rank.value(tensor_));
    if (t == nullptr) throw runtime_error(fmt::format("\"{}\" is not a DTensor", tensor_));
    Json fields = dtensor_metadata(*t);
    return generator_.empty() ? fields : fields.at(generator_);
  }
  if (key_ == "layout") {
    // A DTensor's local tensor is its own contiguous allocation.
    const ViewLayout layout = std::holds_alternative<DTensor>(rank.value(tensor_))
                                  ? ViewLayout::contiguous(rank.tensor(tensor_).shape())
                                  : rank.layout(tensor_);
    Json fields{{"shape", layout.shape},
                {"stride", layout.stride},
                {"storage_offset", layout.storage_offset},
                {"is_contiguous", layout.is_contiguous()},
                {"dtype", dtype_name(rank.tensor(tensor_).dtype())}};
    return generator_.empty() ? fields : fields.at(generator_);
  }
  if (key_ == "process_groups") {
    const GroupCreator& groups = rank.groups();
    if (generator_ == "created") return groups.groups_created();
    int64_t joined = 0;
    for (size_t id = 0; id < groups.groups_created(); ++id) {
      const RankList members = groups.group_ranks(std::to_string(id));
      joined += members && std::binary_search(members->begin(), members->end(), rank.rank());
    }
    return joined;
  }
  if (key_ == "has_group_names" && !tensor_.empty()) {
    const auto* t = std::get_if<DTensor>(&rank.value(tensor_));
    if (t == nullptr) throw runtime_error(fmt::format("\"{}\" is not a DTensor", tensor_));
    return t->spec().mesh.has_group_names();
  }
  const DeviceMesh& m = rank.mesh(mesh_);
  const std::optional<MeshDim> dim = rank.dim_of(dim_);
  if (key_ == "stale_group_names") {
    // The dims whose saved names mean other groups here.
    Json dims = Json::array();
    for (const DeviceMesh::StaleGroupName& s : m.stale_group_names(rank.groups()))
      dims.push_back(without_quotes(s.dim));
    return dims;
  }
  if (key_ == "coordinate") return m.coordinate() ? Json(*m.coordinate()) : Json(nullptr);
  if (key_ == "mesh") return ranks_json(m.mesh());
  if (key_ == "shape") return m.shape();
  if (key_ == "groups") return m.groups(dim ? m.dim_index(*dim) : 0);
  if (key_ == "my_group" || key_ == "intra_node") {
    if (!m.coordinate()) return nullptr;  // a rank outside the mesh has no group of it
    const Group g = rank.group(mesh_, dim_);
    // A report stays proportional to what a person reads (as the tensor query).
    constexpr size_t kMaxListed = size_t{1} << 20;
    if (key_ == "my_group" && g.ranks->size() > kMaxListed) {
      throw value_error(
          fmt::format("my_group lists at most {} ranks; this group has {} (ask "
                      "local_rank or the mesh's shape instead)",
                      kMaxListed, g.ranks->size()));
    }
    if (key_ == "my_group") return *g.ranks;
    // One host when the first and last members do (members are sorted).
    const int64_t n = *rank.gpus_per_node();
    return g.ranks->front() / n == g.ranks->back() / n;
  }
  if (key_ == "group_name") return m.group_name(dim);
  if (key_ == "local_rank") return m.local_rank(rank.groups(), dim);
  if (key_ == "has_group_names") return m.has_group_names();
  if (key_ == "owned_indices") {
    if (!m.coordinate()) return Json::array();
    Json dims = Json::array();
    for (const IndexRuns& held :
         owned_indices(global_shape_, m.shape(), *m.coordinate(), placements_))
      dims.push_back(runs_json(held));
    return dims;
  }
  const LocalShard s =
      compute_local_shape_and_global_offset(global_shape_, m.shape(), m.coordinate(), placements_);
  return Json{{"shape", s.shape}, {"offset", s.offset}};
}

Json first_values(const Tensor& t, int64_t n) {
  Json values = Json::array();
  for (int64_t i = 0; i < t.numel() && i < n; ++i) {
    if (is_floating(t.dtype())) {
      values.push_back(t.get(i));
    } else {
      values.push_back(t.get_int(i));  // exact, int64 included
    }
  }
  return values;
}

Json describe_value(const RankState& rank, const std::string& name) {
  constexpr int64_t kShownValues = 16;
  const Parameter& v = rank.value(name);
  const Tensor& local = rank.tensor(name);
  Json out;
  if (const DTensor* d = std::get_if<DTensor>(&v)) {
    const DTensorSpec& spec = d->spec();
    out["dtensor"] = spec.describe();
    out["stride"] = spec.stride();
    const LocalShard s = compute_local_shape_and_global_offset(
        spec.shape, spec.mesh.shape(), spec.mesh.coordinate(), spec.placements);
    out["local_offset"] = s.offset;
  }
  out["local"] = local.describe();
  if (!local.is_meta()) out["first_values"] = first_values(local, kShownValues);
  return out;
}

Json describe_rng(const RankRng& rng) {
  auto state = [](const PhiloxState& s) { return Json{{"seed", s.seed}, {"offset", s.offset}}; };
  Json out{{"profile", rng_profile_name(rng.profile())},
           {"gpu", rng.gpu().name},
           {"default_generator", state(rng.default_generator())},
           {"tracker", rng.has_tracker()},
           {"distribute_region_enabled", rng.distribute_region_enabled()}};
  if (const std::optional<PhiloxState> t = rng.tracker_state()) out["tracker_state"] = state(*t);
  return out;
}

Json describe_mesh(const RankState& rank, const std::string& name) {
  const DeviceMesh& m = rank.mesh(name);
  Json out;
  out["shape"] = m.shape();
  out["dim_names"] = m.dim_names() ? Json(*m.dim_names()) : Json(nullptr);
  out["layout"] = m.layout().to_string();
  out["coordinate"] = m.coordinate() ? Json(*m.coordinate()) : Json(nullptr);
  out["is_root"] = m.is_root();
  Json groups = Json::array();
  for (size_t d = 0; d < m.ndim(); ++d) groups.push_back(m.groups(d));
  out["groups"] = groups;
  if (m.has_group_names() && m.coordinate()) {
    Json names = Json::array();
    Json local = Json::array();
    for (size_t d = 0; d < m.ndim(); ++d) {
      names.push_back(m.group_name(MeshDim{static_cast<int64_t>(d)}));
      local.push_back(m.local_rank(rank.groups(), MeshDim{static_cast<int64_t>(d)}));
    }
    out["group_names"] = names;
    out["local_ranks"] = local;
  } else {
    out["group_names"] = nullptr;
    out["local_ranks"] = nullptr;
  }
  return out;
}

}  // namespace meshsim::sim
