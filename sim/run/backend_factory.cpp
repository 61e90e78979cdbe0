#include "sim/run/backend_factory.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/gpu/nccl_backend.hpp"
#include "sim/runtime/backend_decorators.hpp"
#include "sim/runtime/rendezvous_backend.hpp"
#include "sim/runtime/sim_executor.hpp"
#include "src/error.hpp"

namespace meshsim::sim {

const BackendRegistry& builtin_backends() {
  static const BackendRegistry registry = [] {
    BackendRegistry r;
    register_sim_backend(r);
    gpu::register_nccl_backend(r);
    return r;
  }();
  return registry;
}

const BackendEntry& BackendChoice::entry() const {
  const BackendRegistry& from = registry != nullptr ? *registry : builtin_backends();
  if (const BackendEntry* e = from.find(name)) return *e;
  std::vector<std::string_view> names;
  for (const BackendEntry& e : from.entries()) names.push_back(e.name);
  throw runtime_error(
      fmt::format("no backend named \"{}\" (there are {})", name, fmt::join(names, ", ")));
}

BackendFactory::BackendFactory(World& world, std::vector<RankActivity>& activity,
                               BackendOptions options)
    : activity_(activity),
      options_(std::move(options)),
      rendezvous_(world, activity),
      time_(options_.cost),
      groups_(std::make_shared<GroupTable>(world.size())),
      backend_(options_.choice.entry().make({.world_size = world.size(),
                                             .time = time_,
                                             .device_timeout = options_.choice.device_timeout})),
      collectives_(&backend_->executor()),
      store_(*groups_, time_, backend_->group_listener()) {
  rendezvous_.set_group_table(groups_.get());
  if (options_.choice.payload_hashes) {
    hashing_ = std::make_unique<PayloadHashingExecutor>(*collectives_);
    collectives_ = hashing_.get();
  }
}

std::unique_ptr<Backend> BackendFactory::backend(int64_t rank) {
  RankActivity& activity = activity_[static_cast<size_t>(rank)];
  std::unique_ptr<Backend> out =
      std::make_unique<RendezvousBackend>(rank, rendezvous_, *collectives_);
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
                                             activity_[static_cast<size_t>(rank)],
                                             options_.setup_trace);
}

}  // namespace meshsim::sim
