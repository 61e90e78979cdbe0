// [[mesh]]: init_device_mesh, an explicit rank table, DeviceMesh.from_group, or a mesh derived by
// slice/flatten/unflatten or taken as the root of another.
#include <fmt/format.h>

#include "sim/run/rank_state.hpp"
#include "sim/runtime/fiber_stack.hpp"
#include "sim/steps/step_kinds.hpp"
#include "src/checked_math.hpp"

namespace meshsim::sim {

namespace {

// PyTorch sets no limit; meshes in practice have up to 5 dims. A bound keeps every per-dim
// structure (and the recursion that prints nested rank lists) small.
constexpr size_t kMaxMeshDims = 16;

// A nested array of rank expressions: its shape and the entries in row-major order.
struct RankTable {
  std::vector<int64_t> shape;
  std::vector<Expression> entries;
};

void read_rank_table(const toml::node& node, LoadContext& ctx, size_t depth, RankTable& out) {
  if (const toml::array* array = node.as_array()) {
    if (depth >= kMaxMeshDims) {
      ctx.fail(node, fmt::format("a mesh has at most {} dims", kMaxMeshDims));
    }
    if (array->empty()) ctx.fail(node, "ranks may not contain an empty array");
    if (out.shape.size() == depth) out.shape.push_back(static_cast<int64_t>(array->size()));
    if (out.shape[depth] != static_cast<int64_t>(array->size())) {
      ctx.fail(node, fmt::format("ranks is ragged: expected {} entries at depth {}, found {}",
                                 out.shape[depth], depth + 1, array->size()));
    }
    for (const toml::node& item : *array) read_rank_table(item, ctx, depth + 1, out);
    return;
  }
  if (depth != out.shape.size()) ctx.fail(node, "ranks is ragged: a number where an array belongs");
  out.entries.push_back(ctx.expression_of(node, "a rank"));
}

// Dim names: non-empty strings ("" stands for "no dim" in queries and expressions).
std::vector<std::string> dim_names_of(const toml::node& node, LoadContext& ctx,
                                      std::string_view what) {
  std::vector<std::string> names = ctx.strings_of(node, what);
  if (std::find(names.begin(), names.end(), "") != names.end()) {
    ctx.fail(node, fmt::format("{} may not contain an empty name", what));
  }
  return names;
}

struct Unflatten {
  std::string dim;
  std::vector<int64_t> sizes;
  std::vector<std::string> names;
};

// A process group as a program reaches it: mesh.get_group(dim), or WORLD (mesh "").
struct GroupRef {
  std::string mesh;
  std::string dim;  // "" = the mesh's only dim

  std::string group_name(const RankState& rank) const {
    if (mesh.empty()) return rank.groups().world_group_name();
    const DeviceMesh& m = rank.mesh(mesh);
    return dim.empty() ? m.group_name() : m.group_name(rank.dim_of(dim).value());
  }
  std::string python() const {
    if (mesh.empty()) return "dist.group.WORLD";
    return dim.empty() ? fmt::format("{}.get_group()", mesh)
                       : fmt::format("{}.get_group(\"{}\")", mesh, dim);
  }
};

// Items as Python lists them: "pp", "dp" (quoted) or 2, 4.
template <typename T>
std::string python_items(const std::vector<T>& items, bool quoted) {
  std::vector<std::string> parts;
  for (const T& item : items)
    parts.push_back(quoted ? fmt::format("\"{}\"", item) : fmt::format("{}", item));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// ("pp", "dp") as Python writes a tuple: ("dp",) for one.
template <typename T>
std::string python_tuple(const std::vector<T>& items, bool quoted) {
  return fmt::format("({}{})", python_items(items, quoted), items.size() == 1 ? "," : "");
}

class MeshStep final : public Step {
 public:
  // The mesh's groups are labelled with its name while it is built. No RAII guard: a destructor
  // run while an exception unwinds a fiber stack trips ASan (fiber_stack.hpp); the catch site
  // forgets the unwound frames first.
  void run(RankState& rank) const override {
    rank.groups().set_label_prefix(name_, operation_);
    try {
      build(rank);
    } catch (...) {
      forget_unwound_frames();
      rank.groups().clear_label_prefix();
      throw;
    }
    rank.groups().clear_label_prefix();
  }

  void build(RankState& rank) const {
    if (from_group_) {
      rank.set_mesh(name_, from_groups(rank));
      return;
    }
    if (from_.empty()) {
      rank.set_mesh(name_, table_ ? from_table(rank)
                                  : DeviceMesh::init(rank.groups(), device(rank), shape_, dims_));
      return;
    }
    DeviceMesh m = rank.mesh(from_);
    if (slice_) m = m.slice(*slice_);
    if (flatten_) m = m.flatten(rank.groups(), flatten_->empty() ? std::nullopt : flatten_);
    if (unflatten_) {
      m = m.unflatten(rank.groups(), rank.dim_of(unflatten_->dim).value(), unflatten_->sizes,
                      unflatten_->names);
    }
    if (root_) m = m.root();
    rank.set_mesh(name_, std::move(m));
  }

  std::string name_;
  std::string device_;
  std::vector<int64_t> shape_;
  DimNames dims_;
  std::optional<RankTable> table_;
  std::string from_;
  std::optional<std::vector<std::string>> slice_;
  std::optional<std::string> flatten_;  // "" = default name
  std::optional<Unflatten> unflatten_;
  bool root_ = false;
  std::optional<std::vector<GroupRef>> from_group_;
  bool group_list_ = false;  // from_group is a list (the n-d form), even of one group
  std::string operation_;    // the PyTorch call, for reports of a hung new_group

 private:
  std::string device(const RankState& rank) const {
    return device_.empty() ? rank.device_type() : device_;
  }
  RankTensor evaluate_table(const RankState& rank) const {
    RankTensor t{table_->shape, {}};
    for (const Expression& e : table_->entries) t.values.push_back(e.evaluate(rank));
    return t;
  }
  DeviceMesh from_table(RankState& rank) const {
    return DeviceMesh::from_rank_table(rank.groups(), device(rank), evaluate_table(rank), dims_);
  }
  DeviceMesh from_groups(RankState& rank) const {
    std::vector<std::string> names;
    for (const GroupRef& g : *from_group_) names.push_back(g.group_name(rank));
    if (!group_list_) {
      // One group: the mesh is its ranks (a given table must list them).
      const RankList members = rank.groups().group_ranks(names[0]);
      MESHSIM_ASSERT(members != nullptr, "a group the rank reached has no ranks");
      RankTensor t = table_ ? evaluate_table(rank)
                            : RankTensor{{static_cast<int64_t>(members->size())},
                                         std::vector<int64_t>(members->begin(), members->end())};
      return DeviceMesh::from_groups(rank.groups(), device(rank), t, dims_, names);
    }
    if (!table_) throw value_error("Must pass mesh if passing multiple ProcessGroups");
    if (!dims_) throw value_error("Must pass mesh_dim_names if passing multiple ProcessGroups");
    return DeviceMesh::from_groups(rank.groups(), device(rank), evaluate_table(rank), dims_, names);
  }
};

// What the step does, as the PyTorch call: init_device_mesh("cuda", (2, 4), mesh_dim_names=
// ("dp", "tp")), DeviceMesh("cuda", <2x4 rank table>), world["dp", "tp"]._flatten("dp_tp"),
// w._unflatten("tp", (2, 2), ("a", "b")).
std::string python_call(const MeshStep& step, const std::string& default_device) {
  const std::string device = step.device_.empty() ? default_device : step.device_;
  const std::string names =
      step.dims_ ? fmt::format(", mesh_dim_names={}", python_tuple(*step.dims_, true)) : "";
  if (step.from_group_) {
    std::vector<std::string> groups;
    for (const GroupRef& g : *step.from_group_) groups.push_back(g.python());
    const std::string group =
        step.group_list_ ? fmt::format("[{}]", fmt::join(groups, ", ")) : groups[0];
    return fmt::format("DeviceMesh.from_group({}, \"{}\"{}{})", group, device,
                       step.table_
                           ? fmt::format(", <{} rank table>", fmt::join(step.table_->shape, "x"))
                           : std::string(),
                       names);
  }
  if (step.from_.empty() && !step.table_) {
    return fmt::format("init_device_mesh(\"{}\", {}{})", device, python_tuple(step.shape_, false),
                       names);
  }
  if (step.table_) {
    return fmt::format("DeviceMesh(\"{}\", <{} rank table>{})", device,
                       fmt::join(step.table_->shape, "x"), names);
  }
  std::string call = step.from_;
  if (step.slice_) call += fmt::format("[{}]", python_items(*step.slice_, true));
  if (step.flatten_) {
    call +=
        step.flatten_->empty() ? "._flatten()" : fmt::format("._flatten(\"{}\")", *step.flatten_);
  }
  if (step.unflatten_) {
    const Unflatten& u = *step.unflatten_;
    call += fmt::format("._unflatten(\"{}\", {}, {})", u.dim, python_tuple(u.sizes, false),
                        python_tuple(u.names, true));
  }
  if (step.root_) call += "._get_root_mesh()";
  return call;
}

// from_group = "WORLD", { mesh, dim }, or a list of { mesh, dim } (one per mesh dim).
std::vector<GroupRef> group_refs_of(const toml::node& node, LoadContext& ctx, bool& is_list) {
  const std::string kForms =
      "from_group is \"WORLD\", { mesh, dim } (mesh.get_group(dim)) or a list of { mesh, dim }";
  const auto one = [&](const toml::node& n) {
    if (const auto* text = n.as_string()) {
      if (text->get() != "WORLD") ctx.fail(n, kForms);
      return GroupRef{};
    }
    const toml::table* t = n.as_table();
    if (t == nullptr) ctx.fail(n, kForms);
    ctx.only_keys(*t, {"mesh", "dim"}, "from_group");
    const toml::node& mesh = ctx.require(*t, "mesh", "from_group");
    GroupRef ref{ctx.string_of(mesh, "mesh"), {}};
    const LoadContext::MeshInfo& info = ctx.require_mesh(mesh, ref.mesh);
    if (const toml::node* dim = t->get("dim")) ref.dim = ctx.dim_name(*dim, ref.mesh, info);
    return ref;
  };
  std::vector<GroupRef> refs;
  is_list = node.is_array();
  if (!is_list) {
    refs.push_back(one(node));
    return refs;
  }
  const toml::array& array = *node.as_array();
  if (array.empty()) ctx.fail(node, "Expects at least one ProcessGroup to be passed");
  if (array.size() > kMaxMeshDims) {
    ctx.fail(node, fmt::format("a mesh has at most {} dims", kMaxMeshDims));
  }
  for (const toml::node& item : array) refs.push_back(one(item));
  return refs;
}

}  // namespace

std::unique_ptr<Step> parse_mesh_definition(const toml::table& table, LoadContext& ctx,
                                            Raises raises) {
  const bool expects_error = raises == Raises::kYes;
  ctx.only_keys(table,
                {"name", "shape", "dims", "ranks", "from", "slice", "flatten", "unflatten", "root",
                 "from_group", "device", "when", "raises"},
                "a mesh definition");
  auto step = std::make_unique<MeshStep>();
  step->name_ = ctx.string_of(ctx.require(table, "name", "a mesh definition"), "name");
  // from_group may take a rank table (its `mesh` argument) too.
  const bool grouped = table.contains("from_group");
  const int sources = table.contains("shape") + (table.contains("ranks") && !grouped) +
                      table.contains("from") + grouped;
  if (sources != 1) {
    ctx.fail(table, fmt::format("mesh \"{}\" needs exactly one of shape, ranks, from or from_group",
                                step->name_));
  }
  if (const toml::node* d = table.get("device")) step->device_ = ctx.string_of(*d, "device");
  if (const toml::node* d = table.get("dims")) step->dims_ = dim_names_of(*d, ctx, "dims");
  const bool derived = table.contains("from");
  for (std::string_view key : {"slice", "flatten", "unflatten", "root"}) {
    if (table.contains(key) && !derived)
      ctx.fail(*table.get(key), fmt::format("{} needs from", key));
  }
  if (derived && table.contains("dims"))
    ctx.fail(*table.get("dims"), "a derived mesh takes its dims from slice, flatten or unflatten");

  LoadContext::MeshInfo info{0, step->dims_.value_or(std::vector<std::string>{}), step->name_};
  if (const toml::node* shape = table.get("shape")) {
    step->shape_ = ctx.integers_of(*shape, "shape");
    info.ndim = step->shape_.size();
    if (info.ndim > kMaxMeshDims) {
      ctx.fail(*shape, fmt::format("a mesh has at most {} dims", kMaxMeshDims));
    }
    for (int64_t s : step->shape_) {
      if (s < 1) ctx.fail(*shape, "mesh sizes must be >= 1");
    }
    const std::optional<int64_t> numel = checked_product(step->shape_);
    if (!numel) ctx.fail(*shape, "the mesh shape's product does not fit in int64");
    if (!expects_error) {
      if (*numel > ctx.world_size()) {
        ctx.fail(*shape, fmt::format("mesh \"{}\" has {} ranks, more than the world size {}",
                                     step->name_, *numel, ctx.world_size()));
      }
      if (step->dims_ && step->dims_->size() != step->shape_.size()) {
        ctx.fail(*table.get("dims"), fmt::format("{} dims named for a {}-d shape",
                                                 step->dims_->size(), step->shape_.size()));
      }
    }
  } else if (const toml::node* group = table.get("from_group")) {
    step->from_group_ = group_refs_of(*group, ctx, step->group_list_);
    info.ndim = step->from_group_->size();
    if (const toml::node* ranks = table.get("ranks")) {
      step->table_.emplace();
      if (!ranks->is_array())
        ctx.fail(*ranks, "ranks must be a (nested) array of ranks or expressions");
      read_rank_table(*ranks, ctx, 0, *step->table_);
    }
    if (!expects_error && step->dims_ && step->dims_->size() != info.ndim) {
      ctx.fail(*table.get("dims"),
               fmt::format("{} dims named for {} groups", step->dims_->size(), info.ndim));
    }
  } else if (const toml::node* ranks = table.get("ranks")) {
    step->table_.emplace();
    if (!ranks->is_array())
      ctx.fail(*ranks, "ranks must be a (nested) array of ranks or expressions");
    read_rank_table(*ranks, ctx, 0, *step->table_);
    info.ndim = step->table_->shape.size();
    if (!expects_error && step->dims_ && step->dims_->size() != step->table_->shape.size()) {
      ctx.fail(*table.get("dims"), fmt::format("{} dims named for a {}-d rank table",
                                               step->dims_->size(), step->table_->shape.size()));
    }
  } else {
    const toml::node& from = *table.get("from");
    step->from_ = ctx.string_of(from, "from");
    const LoadContext::MeshInfo* parent = &ctx.require_mesh(from, step->from_);
    info = *parent;
    if (const toml::node* slice = table.get("slice")) {
      step->slice_ = ctx.strings_of(*slice, "slice");
      std::vector<std::string> valid = parent->dims;
      if (parent->root == step->from_) {
        for (const std::string& f : ctx.flattened_of(parent->root)) valid.push_back(f);
      }
      for (const std::string& n : *step->slice_) {
        if (!expects_error && std::find(valid.begin(), valid.end(), n) == valid.end()) {
          ctx.fail(*slice, fmt::format("mesh \"{}\" has no dim \"{}\" to slice (valid: {})",
                                       step->from_, n, fmt::join(valid, ", ")));
        }
      }
      info.dims = *step->slice_;
      info.ndim = info.dims.size();
    }
    if (const toml::node* flatten = table.get("flatten")) {
      if (const auto* b = flatten->as_boolean()) {
        if (!b->get()) ctx.fail(*flatten, "flatten = false does nothing; remove it");
        step->flatten_ = "";
      } else {
        step->flatten_ = ctx.string_of(*flatten, "flatten (a name, or true for the default)");
      }
      std::string flat_name = *step->flatten_;
      if (flat_name.empty()) flat_name = fmt::format("{}", fmt::join(info.dims, "_"));
      ctx.declare_flattened(info.root, flat_name);
      info.dims = {flat_name};
      info.ndim = 1;
    }
    if (const toml::node* unflatten = table.get("unflatten")) {
      const toml::table* u = unflatten->as_table();
      if (u == nullptr) ctx.fail(*unflatten, "unflatten must be a table { dim, sizes, names }");
      ctx.only_keys(*u, {"dim", "sizes", "names"}, "unflatten");
      Unflatten spec;
      const toml::node& dim = ctx.require(*u, "dim", "unflatten");
      spec.dim =
          dim.is_integer() ? std::to_string(ctx.integer_of(dim, "dim")) : ctx.string_of(dim, "dim");
      spec.sizes = ctx.integers_of(ctx.require(*u, "sizes", "unflatten"), "sizes");
      spec.names = dim_names_of(ctx.require(*u, "names", "unflatten"), ctx, "names");
      if (spec.dim.empty()) ctx.fail(dim, "unflatten needs a dim name or index");
      const auto it = std::find(info.dims.begin(), info.dims.end(), spec.dim);
      if (!expects_error && !dim.is_integer() && it == info.dims.end()) {
        ctx.fail(dim, fmt::format("no dim \"{}\" to unflatten (dims: {})", spec.dim,
                                  fmt::join(info.dims, ", ")));
      }
      if (it != info.dims.end()) {
        const auto at = it - info.dims.begin();
        info.dims.erase(it);
        info.dims.insert(info.dims.begin() + at, spec.names.begin(), spec.names.end());
      }
      info.ndim += spec.sizes.size() - 1;
      if (spec.sizes.empty() || info.ndim > kMaxMeshDims) {
        ctx.fail(*unflatten, fmt::format("unflatten needs 1 to {} sizes in all", kMaxMeshDims));
      }
      step->unflatten_ = std::move(spec);
    }
    if (const toml::node* root = table.get("root")) {
      if (!ctx.boolean_of(*root, "root")) ctx.fail(*root, "root = false does nothing; remove it");
      step->root_ = true;
      info = *ctx.mesh(info.root);
    }
  }
  ctx.declare_mesh(step->name_, std::move(info));
  step->operation_ = python_call(*step, ctx.device_type());
  return step;
}

}  // namespace meshsim::sim
