#include "sim/run/backend_factory.hpp"

#include "sim/runtime/backend_decorators.hpp"
#include "sim/runtime/rendezvous_backend.hpp"

namespace meshsim::sim {

std::string_view backend_kind_name(BackendKind kind) {
  switch (kind) {
    case BackendKind::kSim:
      return "sim";
    case BackendKind::kNccl:
      return "nccl";
  }
  return "?";
}

const std::vector<BackendKind>& backend_kinds() {
  static const std::vector<BackendKind> kinds{BackendKind::kSim, BackendKind::kNccl};
  return kinds;
}

std::optional<BackendKind> parse_backend_kind(std::string_view name) {
  for (BackendKind kind : backend_kinds()) {
    if (backend_kind_name(kind) == name) return kind;
  }
  return std::nullopt;
}

namespace {

std::unique_ptr<gpu::NcclCommunicators> make_communicators(const BackendOptions& options,
                                                           int64_t world_size) {
  if (options.kind != BackendKind::kNccl) return nullptr;
  std::shared_ptr<gpu::DeviceApi> api =
      options.device_api ? options.device_api : gpu::make_cuda_device_api();
  return std::make_unique<gpu::NcclCommunicators>(std::move(api), world_size);
}

}  // namespace

BackendFactory::BackendFactory(World& world, std::vector<RankActivity>& activity,
                               BackendOptions options)
    : activity_(activity),
      options_(std::move(options)),
      rendezvous_(world, activity),
      time_(activity, options_.cost),
      groups_(std::make_shared<GroupTable>(world.size())),
      executor_(time_),
      nccl_(make_communicators(options_, world.size())),
      nccl_executor_(
          nccl_ ? std::make_unique<gpu::NcclExecutor>(*nccl_, time_, options_.device_timeout)
                : nullptr),
      store_(*groups_, time_, nccl_.get()) {
  rendezvous_.set_group_table(groups_.get());
  collectives_ = nccl_executor_ ? static_cast<Executor*>(nccl_executor_.get()) : &executor_;
  if (options_.payload_hashes) {
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
                                             options_.trace_setup ? options_.trace : nullptr);
}

}  // namespace meshsim::sim
