#include "sim/scenario/load_context.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "sim/scenario/excerpt.hpp"
#include "src/enum_names.hpp"
#include "src/error.hpp"

namespace meshsim::sim {

const LoadContext::MeshInfo* LoadContext::mesh(const std::string& name) const {
  const auto it = meshes_.find(name);
  return it == meshes_.end() ? nullptr : &it->second;
}

void LoadContext::declare_flattened(const std::string& root, const std::string& name) {
  auto& names = flattened_[root];
  if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
}

std::vector<std::string> LoadContext::flattened_of(const std::string& root) const {
  const auto it = flattened_.find(root);
  return it == flattened_.end() ? std::vector<std::string>{} : it->second;
}

std::optional<std::vector<std::string>> LoadContext::mesh_dims(const std::string& mesh) const {
  const MeshInfo* info = this->mesh(mesh);
  if (info == nullptr) return std::nullopt;
  return info->dims;
}

const LoadContext::MeshInfo& LoadContext::require_mesh(const toml::node& node,
                                                       const std::string& name) const {
  const MeshInfo* info = mesh(name);
  if (info == nullptr) fail(node, fmt::format("unknown mesh \"{}\"", name));
  return *info;
}

std::string LoadContext::dim_name(const toml::node& node, const std::string& mesh_name,
                                  const MeshInfo& info) const {
  if (const auto* index = node.as_integer()) {
    const int64_t i = index->get();
    const auto ndim = static_cast<int64_t>(info.ndim);
    if (i < -ndim || i >= ndim) {
      fail(node, fmt::format(
                     "mesh dim {} is out of range for a {}-d mesh (dims 0 to {}, or -{} to -1{}{})",
                     i, ndim, ndim - 1, ndim,
                     info.dims.empty() ? "" : ", or a name: ", fmt::join(info.dims, ", ")));
    }
    // PyTorch indexes a list of the mesh's groups with it: -1 is the last dim.
    return std::to_string(i < 0 ? i + ndim : i);
  }
  const std::string name = string_of(node, "dim");
  std::vector<std::string> known = info.dims;
  for (const std::string& f : flattened_of(info.root)) known.push_back(f);
  if (std::find(known.begin(), known.end(), name) == known.end()) {
    fail(node, fmt::format("mesh \"{}\" has no dim \"{}\" (its dims: {})", mesh_name, name,
                           fmt::join(info.dims, ", ")));
  }
  return name;
}

namespace {

// Ranks only: a `when` that asks about a mesh cannot be known before the run.
class RankOnlyEnv final : public ExpressionEnv {
 public:
  RankOnlyEnv(int64_t rank, int64_t world) : rank_(rank), world_(world) {}
  int64_t rank() const override { return rank_; }
  int64_t world_size() const override { return world_; }
  int64_t coord(const std::string&, const std::string&) const override { throw AsksMesh{}; }
  int64_t local_rank(const std::string&, const std::string&) const override { throw AsksMesh{}; }
  int64_t mesh_size(const std::string&, const std::string&) const override { throw AsksMesh{}; }
  // A loop variable takes several values: as for a mesh query, assume at least one rank runs.
  int64_t variable(const std::string&) const override { throw AsksMesh{}; }
  struct AsksMesh {};

 private:
  int64_t rank_;
  int64_t world_;
};

}  // namespace

std::vector<std::string> LoadContext::variables() const {
  std::vector<std::string> out;
  for (const OpenLoop& l : loops_) out.push_back(l.var);
  return out;
}

int64_t LoadContext::ranks_running_entry() const {
  if (entry_when_ == nullptr) return world_size_;
  int64_t running = 0;
  for (int64_t r = 0; r < world_size_; ++r) {
    try {
      running += entry_when_->evaluate(RankOnlyEnv(r, world_size_)) != 0 ? 1 : 0;
    } catch (const RankOnlyEnv::AsksMesh&) {
      return 1;
    } catch (const Error&) {
      // This rank's `when` fails: the step does not run there.
    }
  }
  return running;
}

std::string LoadContext::tensor_name(const toml::table& args, std::string_view key,
                                     std::string_view what) const {
  const toml::node& node = require(args, key, what);
  std::string name = string_of(node, key);
  if (!has_tensor(name)) fail(node, fmt::format("no tensor \"{}\" is set before this", name));
  return name;
}

int64_t LoadContext::rank_of_key(const toml::key& key, std::string_view what) const {
  const std::string_view k = key.str();
  int64_t r = -1;
  const auto [end, ec] = std::from_chars(k.data(), k.data() + k.size(), r);
  if (ec != std::errc() || end != k.data() + k.size() || r < 0 || r >= world_size_ ||
      std::to_string(r) != k) {
    throw InputError(at(key.source()), fmt::format("{} keys are ranks from 0 to {}, not \"{}\"",
                                                   what, world_size_ - 1, k));
  }
  return r;
}

const toml::table& LoadContext::table_of(const toml::node& value, std::string_view what) const {
  const toml::table* t = value.as_table();
  if (t == nullptr) fail(value, fmt::format("{} must be a table of arguments", what));
  return *t;
}

void LoadContext::declare_tensor(const std::string& name, TensorFacts facts) {
  const auto [it, inserted] = tensors_.try_emplace(name, facts);
  if (inserted) return;
  if (it->second.ndim != facts.ndim) it->second.ndim.reset();
  if (it->second.mesh != facts.mesh) it->second.mesh.clear();
}

LoadContext::TensorFacts LoadContext::tensor_facts(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? TensorFacts{} : it->second;
}

bool LoadContext::has_tensor(const std::string& name) const {
  if (tensors_.count(name) != 0) return true;
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || per_rank_tensors_.count(name.substr(0, dot)) == 0) return false;
  int64_t index = -1;
  const char* first = name.data() + dot + 1;
  const char* last = name.data() + name.size();
  const auto [end, ec] = std::from_chars(first, last, index);
  return ec == std::errc() && end == last && index >= 0 && index < world_size_ &&
         std::to_string(index) == std::string_view(first, static_cast<size_t>(last - first));
}

SourceLocation LoadContext::at(const toml::source_region& region) const {
  return SourceLocation{file_, static_cast<int64_t>(region.begin.line),
                        static_cast<int64_t>(region.begin.column)};
}

SourceLocation LoadContext::at(const toml::node& node) const {
  return at(node.source());
}

void LoadContext::fail(const toml::node& node, const std::string& message) const {
  throw InputError(at(node), message);
}

constexpr EnumName<toml::node_type> kNodeTypeNames[] = {
    {toml::node_type::table, "a table"},          {toml::node_type::array, "an array"},
    {toml::node_type::string, "a string"},        {toml::node_type::integer, "an integer"},
    {toml::node_type::floating_point, "a float"}, {toml::node_type::boolean, "a boolean"},
};

std::string describe_type(const toml::node& node) {
  return std::string(name_in(kNodeTypeNames, node.type(), "a date or time"));
}

void LoadContext::only_keys(const toml::table& table,
                            std::initializer_list<std::string_view> allowed,
                            std::string_view what) const {
  for (const auto& [key, value] : table) {
    if (std::find(allowed.begin(), allowed.end(), key.str()) == allowed.end()) {
      throw InputError(at(key.source()),
                       fmt::format("unknown key \"{}\" in {} (expected one of: {})", key.str(),
                                   what, fmt::join(allowed, ", ")));
    }
  }
}

const toml::node& LoadContext::require(const toml::table& table, std::string_view key,
                                       std::string_view what) const {
  const toml::node* node = table.get(key);
  if (node == nullptr) fail(table, fmt::format("{} needs the key \"{}\"", what, key));
  return *node;
}

std::string LoadContext::string_of(const toml::node& node, std::string_view what) const {
  if (const auto* s = node.as_string()) return s->get();
  fail(node, fmt::format("{} must be a string, not {}", what, describe_type(node)));
}

int64_t LoadContext::integer_of(const toml::node& node, std::string_view what) const {
  if (const auto* i = node.as_integer()) return i->get();
  fail(node, fmt::format("{} must be an integer, not {}", what, describe_type(node)));
}

bool LoadContext::boolean_of(const toml::node& node, std::string_view what) const {
  if (const auto* b = node.as_boolean()) return b->get();
  fail(node, fmt::format("{} must be true or false, not {}", what, describe_type(node)));
}

double LoadContext::number_of(const toml::node& node, std::string_view what) const {
  double v = 0;
  if (const auto* f = node.as_floating_point()) {
    v = f->get();
  } else if (const auto* i = node.as_integer()) {
    v = static_cast<double>(i->get());
  } else {
    fail(node, fmt::format("{} must be a number, not {}", what, describe_type(node)));
  }
  if (!std::isfinite(v)) fail(node, fmt::format("{} must be a finite number, not {}", what, v));
  return v;
}

double LoadContext::seconds_of(const toml::node& node, std::string_view what, Zero zero) const {
  const double v = number_of(node, what);
  if (v < 0 || (zero == Zero::kRefused && v < kMinPositive)) {
    fail(node,
         fmt::format("{} must be {}, got {:g}", what,
                     zero == Zero::kRefused ? "positive (at least 1e-9)" : "zero or positive", v));
  }
  if (v > kMaxSeconds)
    fail(node, fmt::format("{} must be at most {:g}, got {:g}", what, kMaxSeconds, v));
  return v;
}

std::vector<int64_t> LoadContext::integers_of(const toml::node& node, std::string_view what) const {
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    fail(node, fmt::format("{} must be an array of integers, not {}", what, describe_type(node)));
  }
  std::vector<int64_t> out;
  for (const toml::node& item : *array)
    out.push_back(integer_of(item, fmt::format("each entry of {}", what)));
  return out;
}

std::vector<std::string> LoadContext::strings_of(const toml::node& node,
                                                 std::string_view what) const {
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    fail(node, fmt::format("{} must be an array of strings, not {}", what, describe_type(node)));
  }
  std::vector<std::string> out;
  for (const toml::node& item : *array)
    out.push_back(string_of(item, fmt::format("each entry of {}", what)));
  return out;
}

Expression LoadContext::expression_of(const toml::node& node, std::string_view what) const {
  if (const auto* i = node.as_integer()) return Expression::constant(i->get());
  if (const auto* b = node.as_boolean()) return Expression::constant(b->get() ? 1 : 0);
  const std::string text = string_of(node, what);
  try {
    Expression e = Expression::parse(text);
    e.check(*this);
    return e;
  } catch (const ExpressionError& e) {
    SourceLocation where = at(node);
    where.column += 1 + static_cast<int64_t>(e.offset());  // past the opening quote
    throw InputError(
        where, fmt::format("bad expression in {}: {} in \"{}\"", what, e.what(), excerpt(text)));
  }
}

}  // namespace meshsim::sim
