#include "sim/run/rank_state.hpp"

#include <charconv>
#include <cstring>
#include <functional>

#include <fmt/format.h>

#include "src/fnv1a.hpp"
#include "src/io/tensor_digest.hpp"

namespace meshsim::sim {

RankState::RankState(const Scenario& scenario, int64_t rank, ScenarioResult& result,
                     BackendFactory& backends, RankActivity& activity, CheckpointDir& checkpoints,
                     CheckpointExchange& exchange, std::vector<Warning>& warnings)
    : scenario_(scenario),
      rank_(rank),
      result_(result),
      activity_(activity),
      backend_(backends.backend(rank)),
      groups_(backends.group_creator(rank)),
      rng_(scenario.rng_profile, backends.world_backend().gpu_profile().value_or(scenario.gpu)),
      checkpoints_(checkpoints),
      exchange_(exchange),
      warnings_(warnings) {
  if (std::shared_ptr<RandomKernelRunner> kernel = backends.world_backend().random_kernel(rank)) {
    // On real GPUs, random ops run the CUDA kernel, launched as PyTorch launches it there.
    rng_.set_kernel_runner(std::move(kernel));
    if (rng_.gpu().max_blocks() != scenario.gpu.max_blocks()) {
      warn(fmt::format(
          "this scenario models {} (grid cap {}) but runs on {} (grid cap {}): random values past "
          "one wave follow the GPU in use",
          scenario.gpu.name, scenario.gpu.max_blocks(), rng_.gpu().name, rng_.gpu().max_blocks()));
    }
  }
}

void RankState::warn(std::string text) {
  // At the step being run, named by its kind. Once per text, as Python's default warning filter
  // shows a warning once per place in torch: a step in a loop, or several saves, warn once.
  Warning w{activity_.step.substr(0, activity_.step.find(',')), std::move(text), activity_.where};
  if (w.kind.empty()) w.kind = "setup";
  const bool known = std::any_of(warnings_.begin(), warnings_.end(),
                                 [&](const Warning& o) { return o.text == w.text; });
  if (warnings_.size() < 64 && !known) warnings_.push_back(std::move(w));
}

Group RankState::group(const std::string& mesh_name, const std::string& dim) const {
  if (mesh_name.empty()) return Group{groups_->world_group_name(), groups_->world_ranks(), rank_};
  const DeviceMesh& m = mesh(mesh_name);
  return group_named(m.group_name(dim_of(dim)));
}

Group RankState::mesh_dim_group(const DeviceMesh& mesh, size_t dim) const {
  return group_named(mesh.group_name(MeshDim{static_cast<int64_t>(dim)}));
}

Group RankState::group_named(const std::string& name) const {
  RankList ranks = groups_->group_ranks(name);
  if (!ranks) {
    throw runtime_error(fmt::format("process group {} does not exist on rank {}", name, rank_));
  }
  return Group{name, std::move(ranks), rank_};
}

const Parameter& RankState::value(const std::string& name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) {
    throw runtime_error(fmt::format("tensor \"{}\" was not set on rank {}", name, rank_));
  }
  return it->second;
}

const Parameter* RankState::find_value(const std::string& name) const {
  const auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

const Tensor& RankState::tensor(const std::string& name) const {
  return local_tensor(value(name));
}

// Whatever writes a value ends what it holds of a draw; record_draw, after a random op, says
// again that it holds one.
void RankState::set_tensor(const std::string& name, Tensor value) {
  drawn_.erase(name);
  aliases_.erase(name);
  values_.insert_or_assign(name, std::move(value));
}

ViewLayout RankState::layout(const std::string& name) const {
  const auto it = aliases_.find(name);
  if (it != aliases_.end()) return it->second.layout;
  if (!std::holds_alternative<Tensor>(value(name))) {
    throw runtime_error(
        fmt::format("meshsim makes views of plain tensors only, and \"{}\" is a DTensor (take its "
                    "to_local() first)",
                    name));
  }
  return ViewLayout::contiguous(tensor(name).shape());
}

void RankState::set_view(const std::string& name, const std::string& of, const ViewLayout& layout) {
  auto it = aliases_.find(of);
  if (it == aliases_.end()) {
    // A plain tensor starts sharing its storage, as the whole of it (layout throws for a DTensor).
    ViewLayout whole = this->layout(of);
    it =
        aliases_.insert_or_assign(of, Alias{std::make_shared<Tensor>(tensor(of)), std::move(whole)})
            .first;
  }
  const std::shared_ptr<Tensor> storage = it->second.storage;
  Tensor values = gather_view(*storage, layout);
  drawn_.erase(name);
  values_.insert_or_assign(name, std::move(values));
  aliases_.insert_or_assign(name, Alias{storage, layout});
}

void RankState::refresh_aliases(const std::shared_ptr<Tensor>& storage) {
  for (const auto& [alias, a] : aliases_) {
    if (a.storage != storage) continue;
    // The whole storage is shared rather than copied; the next write copies it then.
    const bool whole = a.layout.storage_offset == 0 && a.layout.numel() == storage->numel() &&
                       a.layout.is_contiguous();
    values_.insert_or_assign(
        alias, whole ? storage->reshaped(a.layout.shape) : gather_view(*storage, a.layout));
  }
}

Tensor RankState::memory_run(const std::string& name) const {
  const auto it = aliases_.find(name);
  if (it == aliases_.end()) return tensor(name);
  return gather_view(*it->second.storage, it->second.layout.memory_run())
      .reshaped(it->second.layout.shape);
}

void RankState::write_in_place(const std::string& name, const Tensor& values, Places places) {
  drawn_.erase(name);
  const auto it = aliases_.find(name);
  if (it == aliases_.end()) {
    values_.insert_or_assign(name, values);
    return;
  }
  const std::shared_ptr<Tensor> storage = it->second.storage;
  if (places == Places::kElements) {
    scatter_view(*storage, it->second.layout, values);
  } else {
    scatter_view(*storage, it->second.layout.memory_run(), values.reshaped({values.numel()}));
  }
  refresh_aliases(storage);
}

DTensor& RankState::dtensor(const std::string& name) {
  value(name);  // throws for an unknown name
  DTensor* d = std::get_if<DTensor>(&values_.at(name));
  if (d == nullptr) {
    throw runtime_error(
        fmt::format("\"{}\" is a plain tensor on rank {}, not a DTensor", name, rank_));
  }
  return *d;
}

void RankState::set_dtensor(const std::string& name, DTensor value) {
  drawn_.erase(name);
  aliases_.erase(name);
  values_.insert_or_assign(name, std::move(value));
}

const RankState::LinearModule& RankState::module(const std::string& name) const {
  const auto it = modules_.find(name);
  if (it == modules_.end()) {
    throw runtime_error(fmt::format("module \"{}\" was not created on rank {}", name, rank_));
  }
  return it->second;
}

PhiloxState RankState::broadcast_rng_state(const PhiloxState& mine) {
  Tensor state({16}, DType::kUInt8);
  const std::vector<uint8_t> bytes = mine.to_bytes();
  std::memcpy(state.mutable_bytes().data(), bytes.data(), bytes.size());
  backend_->broadcast(state, 0, group("", ""));
  const std::span<const std::byte> got = state.bytes();
  return PhiloxState::from_bytes({reinterpret_cast<const uint8_t*>(got.data()), got.size()});
}

void RankState::random_in_place(const Step& step, const std::string& name, const RandomOp& op) {
  if (std::holds_alternative<Tensor>(value(name))) {
    if (!layout(name).is_contiguous()) {
      // CUDA's kernels draw in the order TensorIterator walks memory, which meshsim does not
      // model for strided tensors.
      throw runtime_error(fmt::format(
          "meshsim draws random numbers in place only into contiguous tensors, and \"{}\" is a "
          "non-contiguous view (draw into its base, or a .contiguous() copy)",
          name));
    }
    Tensor t = tensor(name);
    const RankRng::OpResult drawn = rng_.random_(t, op);
    write_in_place(name, t);
    record_draw(step, name, drawn);
  } else {
    record_draw(step, name, rng_.random_(dtensor(name), op, rng_state_broadcast()));
  }
}

void RankState::record_draw(const Step& step, const std::string& name, const RankRng::OpResult& r) {
  if (r.state_overwritten_by_rank0) result_.rng_state_synced.push_back(rank_);
  if (!r.draw) {
    drawn_.erase(name);
    return;
  }
  drawn_.insert_or_assign(name, DrawnValue{*r.draw, tensor_digest(tensor(name))});
  ++result_.draws_total;
  if (result_.draws.size() < ScenarioResult::kMaxCheckedDraws)
    result_.draws.push_back({step.where, rank_, name, *r.draw});
}

const Draw* RankState::draw_held(const std::string& name, uint64_t digest) const {
  const auto it = drawn_.find(name);
  return it != drawn_.end() && it->second.digest == digest ? &it->second.draw : nullptr;
}

void RankState::record_sample(int64_t id, ShardSample sample) {
  auto& per_rank = result_.cross_rank_samples[id];
  if (per_rank.empty()) per_rank.resize(static_cast<size_t>(scenario_.world_size));
  per_rank[static_cast<size_t>(rank_)].push_back(std::move(sample));
}

const DeviceMesh& RankState::mesh(const std::string& name) const {
  if (last_mesh_ != nullptr && last_mesh_->first == name) return last_mesh_->second;
  const auto it = meshes_.find(name);
  if (it == meshes_.end()) {
    throw runtime_error(fmt::format("mesh \"{}\" was not created on rank {}", name, rank_));
  }
  last_mesh_ = &*it;
  return it->second;
}

void RankState::set_mesh(const std::string& name, DeviceMesh mesh) {
  meshes_.insert_or_assign(name, std::move(mesh));
}

std::optional<MeshDim> RankState::dim_of(const std::string& dim) const {
  if (dim.empty()) return std::nullopt;
  int64_t index = 0;
  const auto [end, ec] = std::from_chars(dim.data(), dim.data() + dim.size(), index);
  if (ec == std::errc() && end == dim.data() + dim.size()) return MeshDim{index};
  return MeshDim{dim};
}

int64_t RankState::variable(const std::string& name) const {
  for (auto it = loops_.rbegin(); it != loops_.rend(); ++it) {
    if (it->first == name) return it->second;
  }
  return ExpressionEnv::variable(name);
}

int64_t RankState::coord(const std::string& mesh_name, const std::string& dim) const {
  const DeviceMesh& m = mesh(mesh_name);
  const std::optional<MeshDim> d = dim_of(dim);
  if (!d) throw value_error(fmt::format("coord({}, ...) needs a dim", mesh_name));
  const size_t index = m.dim_index(*d);
  if (!m.coordinate()) {
    throw runtime_error(fmt::format("coord({}, {}): rank {} is not in mesh \"{}\"", mesh_name, dim,
                                    rank_, mesh_name));
  }
  return (*m.coordinate())[index];
}

int64_t RankState::local_rank(const std::string& mesh_name, const std::string& dim) const {
  return mesh(mesh_name).local_rank(*groups_, dim_of(dim));
}

int64_t RankState::mesh_size(const std::string& mesh_name, const std::string& dim) const {
  const DeviceMesh& m = mesh(mesh_name);
  const std::optional<MeshDim> d = dim_of(dim);
  return d ? m.size(m.dim_index(*d)) : m.size();
}

Json RankState::within_report_budget(Json value) {
  const uint64_t weight = json_weight(value);
  if (result_.value_bytes + weight <= kMaxReportValueBytes) {
    result_.value_bytes += weight;
    return value;
  }
  ++result_.omitted_values;
  return "(omitted: this scenario's report already holds its limit of values)";
}

void RankState::record_dump(const Step& step, std::string what, Json value) {
  if (result_.dumps.size() + result_.expectations.size() >= ScenarioResult::kMaxListedRecords) {
    ++result_.omitted_values;
    return;
  }
  result_.dumps.push_back(
      {step.where, rank_, std::move(what), within_report_budget(std::move(value))});
}

void RankState::record_expectation(const Step& step, std::string what, bool passed, Json observed,
                                   Json expected) {
  // A check that passed the way an earlier one did joins its record.
  uint64_t key = 0;
  if (passed) {
    const std::hash<Json> hash;
    key = fnv1a(kFnv1aOffset, what);
    for (const uint64_t part :
         {static_cast<uint64_t>(step.where.line), static_cast<uint64_t>(step.where.column),
          uint64_t{hash(observed)}, uint64_t{hash(expected)}})
      key = (key ^ part) * kFnv1aPrime;
    const auto [first, end] = result_.passed_index.equal_range(key);
    for (auto it = first; it != end; ++it) {
      ExpectationRecord& r = result_.expectations[it->second];
      if (r.where == step.where && r.what == what && r.observed == observed &&
          r.expected == expected) {
        if (r.ranks.empty()) r.ranks = RankRanges(r.rank);
        r.ranks.add(rank_);
        r.rank = r.ranks.lowest();
        ++r.checks;
        return;
      }
    }
  }
  if (result_.dumps.size() + result_.expectations.size() >= ScenarioResult::kMaxListedRecords) {
    ++(passed ? result_.unlisted_passed : result_.unlisted_failed);
    return;
  }
  if (passed) result_.passed_index.emplace(key, result_.expectations.size());
  result_.expectations.push_back({step.where, rank_, std::move(what), passed,
                                  within_report_budget(std::move(observed)),
                                  within_report_budget(std::move(expected))});
}

}  // namespace meshsim::sim
