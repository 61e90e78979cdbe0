#include "sim/runtime/backend_factory.hpp"

#include "sim/runtime/backend_decorators.hpp"
#include "sim/runtime/sim_backend.hpp"

namespace meshsim::sim {

std::string_view backend_kind_name(BackendKind kind) {
  switch (kind) {
    case BackendKind::kSim:
      return "sim";
  }
  return "?";
}

const std::vector<BackendKind>& backend_kinds() {
  static const std::vector<BackendKind> kinds{BackendKind::kSim};
  return kinds;
}

std::optional<BackendKind> parse_backend_kind(std::string_view name) {
  for (BackendKind kind : backend_kinds()) {
    if (backend_kind_name(kind) == name) return kind;
  }
  return std::nullopt;
}

BackendFactory::BackendFactory(World& world, std::vector<RankActivity>& activity,
                               BackendOptions options)
    : activity_(activity),
      options_(std::move(options)),
      rendezvous_(world, activity),
      time_(activity, options_.cost),
      groups_(std::make_shared<GroupTable>(world.size())),
      executor_(time_),
      store_(*groups_, time_) {}

std::unique_ptr<Backend> BackendFactory::backend(int64_t rank) {
  RankActivity& activity = activity_[static_cast<size_t>(rank)];
  std::unique_ptr<Backend> out;
  switch (options_.kind) {
    case BackendKind::kSim:
      out = std::make_unique<SimBackend>(rank, rendezvous_, executor_);
      break;
  }
  // Tracing inside faults: a stall happens before the collective's slice starts.
  if (options_.trace != nullptr) {
    out = std::make_unique<TracingBackend>(std::move(out), rank, *options_.trace, activity);
  }
  std::vector<Fault> mine;
  for (const Fault& f : options_.faults) {
    if (f.rank == rank && f.trigger == Fault::Trigger::kCollective) mine.push_back(f);
  }
  if (!mine.empty()) {
    out = std::make_unique<FaultInjectingBackend>(std::move(out), rank, std::move(mine), activity);
  }
  return out;
}

std::unique_ptr<GroupCreator> BackendFactory::group_creator(int64_t rank) {
  return std::make_unique<StoreGroupCreator>(rank, groups_, rendezvous_, store_,
                                             activity_[static_cast<size_t>(rank)], options_.trace);
}

}  // namespace meshsim::sim
