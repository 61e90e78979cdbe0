// One rank's view while it runs a scenario: its meshes, its process groups and what it records.
#pragma once

#include <map>
#include <string>

#include "sim/report/results.hpp"
#include "sim/run/backend_factory.hpp"
#include "sim/run/checkpoint_dir.hpp"
#include "sim/run/checkpoint_exchange.hpp"
#include "sim/runtime/rank_activity.hpp"
#include "sim/scenario/expression.hpp"
#include "sim/scenario/scenario.hpp"
#include "src/dtensor/dtensor.hpp"
#include "src/mesh/device_mesh.hpp"
#include "src/nn/parallelize.hpp"
#include "src/rng/rank_rng.hpp"
#include "src/tensor/strided_view.hpp"
#include "src/tensor/tensor.hpp"

namespace meshsim::sim {

class RankState final : public ExpressionEnv {
 public:
  // `checkpoints`: the run's checkpoint directory; `warnings`: this rank's warnings, which the
  // runner merges in rank order so the report does not depend on the schedule.
  RankState(const Scenario& scenario, int64_t rank, ScenarioResult& result,
            BackendFactory& backends, RankActivity& activity, CheckpointDir& checkpoints,
            CheckpointExchange& exchange, std::vector<Warning>& warnings);

  int64_t rank() const override { return rank_; }
  int64_t world_size() const override { return scenario_.world_size; }
  const std::string& device_type() const { return scenario_.device_type; }
  std::optional<int64_t> gpus_per_node() const { return scenario_.gpus_per_node; }
  // Dims are names, or indices spelled as decimal numbers; "" means "the only dim".
  int64_t coord(const std::string& mesh, const std::string& dim) const override;
  int64_t local_rank(const std::string& mesh, const std::string& dim) const override;
  int64_t mesh_size(const std::string& mesh, const std::string& dim) const override;
  int64_t variable(const std::string& name) const override;
  // Repeat loops running on this rank, outermost first, with each variable's current value.
  std::vector<std::pair<std::string, int64_t>>& loops() { return loops_; }

  GroupCreator& groups() { return *groups_; }
  const GroupCreator& groups() const { return *groups_; }
  // The collective backend this rank talks through.
  Backend& backend() { return *backend_; }
  RankActivity& activity() { return activity_; }
  const RankActivity& activity() const { return activity_; }
  // "WORLD", or the group of one dim of a mesh (or a flattened dim of its root) on this rank.
  Group group(const std::string& mesh, const std::string& dim) const;
  // The group of mesh dim `dim` (an index) of a mesh this rank holds, such as a DTensor's.
  Group mesh_dim_group(const DeviceMesh& mesh, size_t dim) const;

  // Named tensors and DTensors (one namespace; a DTensor's tensor is its local shard). Throws
  // meshsim::Error (RuntimeError) for a name this rank never set, or that is not a DTensor.
  const Tensor& tensor(const std::string& name) const;
  void set_tensor(const std::string& name, Tensor value);
  const Parameter& value(const std::string& name) const;
  // The value `name`, or nullptr when this rank never set it.
  const Parameter* find_value(const std::string& name) const;
  DTensor& dtensor(const std::string& name);
  void set_dtensor(const std::string& name, DTensor value);

  // Views share the storage of the tensor they were made from, as in PyTorch: a view's value is
  // its elements gathered from that storage, and a write in place into any of them is seen by
  // all. Setting a name anew (set_tensor, set_dtensor) ends its sharing.
  // Where the tensor `name` lies in its storage: a view's layout, or the whole of a contiguous
  // storage for a plain tensor. RuntimeError for a DTensor.
  ViewLayout layout(const std::string& name) const;
  bool is_view(const std::string& name) const { return aliases_.contains(name); }
  // Makes `name` the view `layout` (a layout within the storage of `of`, as layout(of) is) of
  // the plain tensor `of`. Throws what gather_view throws.
  void set_view(const std::string& name, const std::string& of, const ViewLayout& layout);
  // The numel elements of storage from where `name` starts, in storage order (in its shape):
  // what NCCL and Gloo move for a tensor, whatever its strides.
  Tensor memory_run(const std::string& name) const;
  // Writes `values` (the shape of `name`) into its elements, or into its memory run.
  enum class Places { kElements, kMemoryRun };
  void write_in_place(const std::string& name, const Tensor& values,
                      Places places = Places::kElements);

  // nn.Linear modules by name: (in_features, out_features, bias); their parameters are the
  // values "<name>.weight" and "<name>.bias".
  struct LinearModule {
    int64_t in = 0;
    int64_t out = 0;
    bool bias = true;
  };
  const LinearModule& module(const std::string& name) const;
  void set_module(const std::string& name, LinearModule m) { modules_[name] = m; }

  // This rank's default CUDA generator and DTensor tracker.
  RankRng& rng() { return rng_; }
  const RankRng& rng() const { return rng_; }
  // The lazy tracker's WORLD broadcast of rank 0's generator state, as a real collective.
  PhiloxState broadcast_rng_state(const PhiloxState& mine);
  RankRng::BroadcastFromRank0 rng_state_broadcast() {
    return [this](const PhiloxState& mine) { return broadcast_rng_state(mine); };
  }
  // A random op in place on the tensor or DTensor `name`, its draw logged for `step`.
  void random_in_place(const Step& step, const std::string& name, const RandomOp& op);
  // Logs what a random op drew into the value `name`, which holds its result (and a state
  // replaced by rank 0's).
  void record_draw(const Step& step, const std::string& name, const RankRng::OpResult& result);
  // The draw whose output `name` still holds: nullptr once a value was set under that name since,
  // or when what it holds now has another digest (changed in place).
  const Draw* draw_held(const std::string& name, uint64_t digest) const;
  // Keeps what this rank holds for cross-rank expectation `id`.
  void record_sample(int64_t id, ShardSample sample);
  // Throws meshsim::Error (RuntimeError) when this rank has not created `name`.
  const DeviceMesh& mesh(const std::string& name) const;
  void set_mesh(const std::string& name, DeviceMesh mesh);
  std::optional<MeshDim> dim_of(const std::string& dim) const;

  // Where save and load steps put files (one directory per run), and the process-wide
  // decouple_backend_at_save switch (off by default, as in PyTorch).
  // The directory is made when first asked for (RuntimeError when it cannot be).
  const std::string& checkpoint_dir() const { return checkpoints_.path(); }
  // "" until a step has asked for the directory.
  const std::string& checkpoint_dir_made() const { return checkpoints_.made_path(); }
  bool checkpoints_kept() const { return checkpoints_.kept(); }
  // Where the ranks of a whole-world save or load leave what the coordinator merges.
  CheckpointExchange& checkpoint_exchange() { return exchange_; }
  bool decouple_backend_at_save() const { return decouple_backend_at_save_; }
  void set_decouple_backend_at_save(bool on) { decouple_backend_at_save_ = on; }
  // A suspicious but not fatal finding of this rank (a saved group name that means another
  // group here), reported once per distinct text.
  void warn(std::string text);

  // Records keep their values while the scenario's report stays under kMaxReportValueBytes.
  void record_dump(const Step& step, std::string what, Json value);
  void record_expectation(const Step& step, std::string what, bool passed, Json observed,
                          Json expected);

 private:
  Json within_report_budget(Json value);
  Group group_named(const std::string& name) const;

  const Scenario& scenario_;
  int64_t rank_;
  ScenarioResult& result_;
  RankActivity& activity_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<GroupCreator> groups_;
  std::map<std::string, DeviceMesh> meshes_;
  // The mesh last looked up: `when` conditions ask for the same one (coord(world, pp)) at nearly
  // every step of every rank. Map nodes stay put, and meshes are never erased.
  mutable const std::pair<const std::string, DeviceMesh>* last_mesh_ = nullptr;
  std::map<std::string, Parameter> values_;
  // The names that share a storage with others (views, and the tensors views were made of).
  struct Alias {
    std::shared_ptr<Tensor> storage;
    ViewLayout layout;
  };
  std::map<std::string, Alias> aliases_;
  // Regathers every name sharing `storage` after a write into it.
  void refresh_aliases(const std::shared_ptr<Tensor>& storage);
  std::map<std::string, LinearModule> modules_;
  // Per value, the last draw into it and the digest of its values right after.
  struct DrawnValue {
    Draw draw;
    uint64_t digest = 0;
  };
  std::map<std::string, DrawnValue> drawn_;
  RankRng rng_;
  CheckpointDir& checkpoints_;
  CheckpointExchange& exchange_;
  bool decouple_backend_at_save_ = false;
  std::vector<Warning>& warnings_;
  std::vector<std::pair<std::string, int64_t>> loops_;
};

}  // namespace meshsim::sim
