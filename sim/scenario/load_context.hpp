// What the loader knows while it reads a scenario file: its location, the declared meshes, and
// typed access to TOML values that fails with file:line:col.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "sim/base/source_location.hpp"
#include "sim/runtime/call_site.hpp"
#include "sim/scenario/expression.hpp"

namespace meshsim::sim {

class LoadContext : public ExpressionSchema {
 public:
  LoadContext(std::string file, int64_t world_size, std::string device_type)
      : file_(std::move(file)), world_size_(world_size), device_type_(std::move(device_type)) {}

  const std::string& file() const { return file_; }
  int64_t world_size() const { return world_size_; }
  const std::string& device_type() const { return device_type_; }
  // [scenario]'s gpus_per_node, when given.
  void set_gpus_per_node(std::optional<int64_t> n) { gpus_per_node_ = n; }
  std::optional<int64_t> gpus_per_node() const { return gpus_per_node_; }

  // --- Meshes declared so far (statically, in file order) ---
  struct MeshInfo {
    size_t ndim = 0;
    std::vector<std::string> dims;  // empty for a mesh without dim names
    std::string root;               // name of the root mesh of its family (itself for a root)
  };
  void declare_mesh(const std::string& name, MeshInfo info) { meshes_[name] = std::move(info); }
  const MeshInfo* mesh(const std::string& name) const;
  void declare_flattened(const std::string& root, const std::string& name);
  std::vector<std::string> flattened_of(const std::string& root) const;
  std::optional<std::vector<std::string>> mesh_dims(const std::string& mesh) const override;
  // The declared mesh `name`, spelled at `node`; InputError "unknown mesh" otherwise.
  const MeshInfo& require_mesh(const toml::node& node, const std::string& name) const;
  // A dim of `mesh` given at `node`: an index in [0, ndim) (as decimal text) or a name among its
  // dims or the flattened dims of its root; InputError otherwise.
  std::string dim_name(const toml::node& node, const std::string& mesh, const MeshInfo& info) const;
  // The `when` of the entry being read (null: none), for ranks_running_entry().
  void set_entry_when(const Expression* when) { entry_when_ = when; }
  // Whether the entry being read has `raises`: checks that stand for an error PyTorch raises when
  // run (a placement that does not fit its tensor or mesh) leave it to the run then.
  void set_entry_raises(bool raises) { entry_raises_ = raises; }
  bool entry_raises() const { return entry_raises_; }
  // How many ranks run the entry being read: the world without `when`; with one that asks only
  // about the rank, the ranks where it holds; with one that asks a mesh, at least one.
  int64_t ranks_running_entry() const;
  // What the loader can tell of a named tensor before anything runs: its number of dims and, for
  // a DTensor, its mesh. A fact is unknown when no step states it or when steps setting the name
  // disagree (under different `when`s, say), so a check built on it never refuses a valid file.
  struct TensorFacts {
    std::optional<size_t> ndim;
    std::string mesh;  // empty: a plain tensor, or not known
  };
  // Named tensors set so far.
  void declare_tensor(const std::string& name, TensorFacts facts = {});
  TensorFacts tensor_facts(const std::string& name) const;
  // `name.0`, `name.1`, ... up to the world size (all_gather's results), without listing them.
  void declare_tensor_per_rank(const std::string& name) { per_rank_tensors_.insert(name); }
  bool has_tensor(const std::string& name) const;
  // The name of a tensor set before this entry, at `key` of `args`; InputError otherwise.
  std::string tensor_name(const toml::table& args, std::string_view key,
                          std::string_view what) const;
  // A table key that names a rank ("0" to world_size - 1, written plainly: "00" is refused, since
  // it would name rank 0 a second time); InputError at the key otherwise.
  int64_t rank_of_key(const toml::key& key, std::string_view what) const;
  // A step's table of arguments; InputError "`what` must be a table of arguments" otherwise.
  const toml::table& table_of(const toml::node& value, std::string_view what) const;
  // nn.Linear modules created so far (their parameters are declared as tensors).
  void declare_module(const std::string& name) { modules_.insert(name); }
  bool has_module(const std::string& name) const { return modules_.count(name) > 0; }
  // Files save steps write, by path pattern, and what they hold: a load knows what it gets.
  struct SavedFile {
    enum class Kind { kTensor, kMesh, kRng } kind = Kind::kTensor;
    MeshInfo mesh;  // the saved mesh's (kMesh)
  };
  void declare_saved_file(const std::string& path, SavedFile file) { saved_files_[path] = file; }
  const SavedFile* saved_file(const std::string& path) const {
    const auto it = saved_files_.find(path);
    return it == saved_files_.end() ? nullptr : &it->second;
  }

  // Whole-world checkpoints saved so far, by name, with the tensors each holds.
  void declare_checkpoint(const std::string& name, std::vector<std::string> tensors) {
    checkpoints_[name] = std::move(tensors);
  }
  const std::vector<std::string>* checkpoint(const std::string& name) const {
    const auto it = checkpoints_.find(name);
    return it == checkpoints_.end() ? nullptr : &it->second;
  }

  // --- repeat loops open at the entry being read (outermost first) ---
  struct OpenLoop {
    std::string var;
    SourceLocation where;
    size_t step;         // index of its repeat step in the program
    int64_t passes = 1;  // of its body, as far as constant counts tell (outer loops' included)
    const LoopScope* scope = nullptr;  // names its iterations in call sites
  };
  const std::vector<OpenLoop>& open_loops() const { return loops_; }
  void open_loop(OpenLoop loop) { loops_.push_back(std::move(loop)); }
  OpenLoop close_loop() {
    OpenLoop out = std::move(loops_.back());
    loops_.pop_back();
    return out;
  }
  std::vector<std::string> variables() const override;

  // Ids of cross-rank expectations, in file order.
  int64_t next_cross_rank_id() { return next_cross_rank_id_++; }

  // --- Typed TOML access; every failure is an InputError at the node ---
  SourceLocation at(const toml::node& node) const;
  SourceLocation at(const toml::source_region& region) const;
  [[noreturn]] void fail(const toml::node& node, const std::string& message) const;
  // Refuses keys outside `allowed`, naming the key and listing the accepted ones.
  void only_keys(const toml::table& table, std::initializer_list<std::string_view> allowed,
                 std::string_view what) const;
  const toml::node& require(const toml::table& table, std::string_view key,
                            std::string_view what) const;
  std::string string_of(const toml::node& node, std::string_view what) const;
  int64_t integer_of(const toml::node& node, std::string_view what) const;
  bool boolean_of(const toml::node& node, std::string_view what) const;
  // An integer or a float, finite.
  double number_of(const toml::node& node, std::string_view what) const;
  // A duration or cost-model value: an integer or a float, finite, not negative, at most
  // kMaxSeconds (so virtual clocks stay finite); when zero is refused, at least kMinPositive.
  enum class Zero { kAllowed, kRefused };
  static constexpr double kMaxSeconds = 1e9;
  static constexpr double kMinPositive = 1e-9;
  double seconds_of(const toml::node& node, std::string_view what, Zero zero) const;
  std::vector<int64_t> integers_of(const toml::node& node, std::string_view what) const;
  std::vector<std::string> strings_of(const toml::node& node, std::string_view what) const;
  // An integer, or a string holding an expression; checked against the declared meshes.
  Expression expression_of(const toml::node& node, std::string_view what) const;

 private:
  std::string file_;
  int64_t world_size_;
  std::string device_type_;
  std::optional<int64_t> gpus_per_node_;
  std::map<std::string, MeshInfo> meshes_;
  std::map<std::string, std::vector<std::string>> flattened_;
  std::map<std::string, TensorFacts> tensors_;
  std::set<std::string> per_rank_tensors_;
  std::set<std::string> modules_;
  std::map<std::string, SavedFile> saved_files_;
  std::map<std::string, std::vector<std::string>> checkpoints_;
  int64_t next_cross_rank_id_ = 0;
  std::vector<OpenLoop> loops_;
  const Expression* entry_when_ = nullptr;
  bool entry_raises_ = false;
};

// "an integer", "a string", "a table", ... for messages.
std::string describe_type(const toml::node& node);

}  // namespace meshsim::sim
