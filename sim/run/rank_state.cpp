#include "sim/run/rank_state.hpp"

#include <charconv>

#include <fmt/format.h>

namespace meshsim::sim {

RankState::RankState(const Scenario& scenario, int64_t rank, ScenarioResult& result,
                     BackendFactory& backends, RankActivity& activity)
    : scenario_(scenario),
      rank_(rank),
      result_(result),
      activity_(activity),
      backend_(backends.backend(rank)),
      groups_(backends.group_creator(rank)) {}

Group RankState::group(const std::string& mesh_name, const std::string& dim) const {
  if (mesh_name.empty()) return Group{groups_->world_group_name(), groups_->world_ranks(), rank_};
  const DeviceMesh& m = mesh(mesh_name);
  const std::string name = m.group_name(dim_of(dim));
  RankList ranks = groups_->group_ranks(name);
  if (!ranks) {
    throw runtime_error(fmt::format("process group {} does not exist on rank {}", name, rank_));
  }
  return Group{name, std::move(ranks), rank_};
}

const Tensor& RankState::tensor(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    throw runtime_error(fmt::format("tensor \"{}\" was not set on rank {}", name, rank_));
  }
  return it->second;
}

void RankState::set_tensor(const std::string& name, Tensor value) {
  tensors_.insert_or_assign(name, std::move(value));
}

const DeviceMesh& RankState::mesh(const std::string& name) const {
  const auto it = meshes_.find(name);
  if (it == meshes_.end()) {
    throw runtime_error(fmt::format("mesh \"{}\" was not created on rank {}", name, rank_));
  }
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
  result_.dumps.push_back(
      {step.where, rank_, std::move(what), within_report_budget(std::move(value))});
}

void RankState::record_expectation(const Step& step, std::string what, bool passed, Json observed,
                                   Json expected) {
  result_.expectations.push_back({step.where, rank_, std::move(what), passed,
                                  within_report_budget(std::move(observed)),
                                  within_report_budget(std::move(expected))});
}

}  // namespace meshsim::sim
