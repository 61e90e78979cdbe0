// Where a rank's communication comes from: one world's shared pieces (the rendezvous every backend
// meets in, the store that new_group waits in, the group table) and the executor of the chosen
// backend. Each rank gets its Backend, wrapped for faults and tracing when asked, and its
// GroupCreator.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "sim/gpu/device_api.hpp"
#include "sim/gpu/nccl_communicators.hpp"
#include "sim/gpu/nccl_executor.hpp"
#include "sim/runtime/faults.hpp"
#include "sim/runtime/payload_hashes.hpp"
#include "sim/runtime/rank_activity.hpp"
#include "sim/runtime/rendezvous.hpp"
#include "sim/runtime/sim_executor.hpp"
#include "sim/runtime/store_group_creator.hpp"
#include "sim/runtime/trace.hpp"
#include "sim/runtime/virtual_time.hpp"
#include "sim/runtime/world.hpp"
#include "src/comm/collective.hpp"
#include "src/comm/group_creator.hpp"

namespace meshsim::sim {

// The collective backends meshsim can run a scenario on (`meshsim run --backend`): simulated
// collectives, or real ones through NCCL on one GPU per rank.
enum class BackendKind { kSim, kNccl };
std::string_view backend_kind_name(BackendKind kind);
// nullopt for a name that is not a backend.
std::optional<BackendKind> parse_backend_kind(std::string_view name);
// Every kind, in the order --help lists them.
const std::vector<BackendKind>& backend_kinds();

struct BackendOptions {
  BackendKind kind = BackendKind::kSim;
  CostModel cost;               // the simulated executor's virtual time
  std::vector<Fault> faults;    // injected at a rank's k-th collective
  Trace* trace = nullptr;       // records every collective when set
  bool trace_setup = false;     // ... and new_group's store barriers too
  bool payload_hashes = false;  // hash what every member of every collective receives
  // nccl: the CUDA runtime and NCCL (null: this build's own; tests pass a recording fake), and
  // how long a launched collective may run on the devices.
  std::shared_ptr<gpu::DeviceApi> device_api;
  std::chrono::milliseconds device_timeout = std::chrono::minutes(5);
};

class BackendFactory {
 public:
  // nccl: creates a stream and WORLD's communicator for every rank first; throws RuntimeError
  // (or GpuError) when that is impossible (no GPU, fewer GPUs than ranks, a build without NCCL).
  BackendFactory(World& world, std::vector<RankActivity>& activity, BackendOptions options);

  // Rank `rank`'s backend and group creator; they live as long as the rank runs.
  std::unique_ptr<Backend> backend(int64_t rank);
  std::unique_ptr<GroupCreator> group_creator(int64_t rank);

  // What hang reports need.
  const Rendezvous& rendezvous() const { return rendezvous_; }
  const std::optional<TimeoutRecord>& timeout() const { return time_.timeout(); }
  // Groups created with different members on different ranks, in the order they happened.
  const std::vector<std::string>& warnings() const { return store_.warnings(); }
  // With BackendOptions::payload_hashes: one line per member of every completed collective.
  std::vector<std::string> payload_hashes() const {
    return hashing_ ? hashing_->lines() : std::vector<std::string>{};
  }
  // The NCCL side (nccl backend only; null otherwise).
  gpu::NcclCommunicators* nccl() { return nccl_.get(); }
  std::chrono::milliseconds device_timeout() const { return options_.device_timeout; }

 private:
  std::vector<RankActivity>& activity_;
  BackendOptions options_;
  Rendezvous rendezvous_;
  VirtualTime time_;
  std::shared_ptr<GroupTable> groups_;
  SimExecutor executor_;
  std::unique_ptr<gpu::NcclCommunicators> nccl_;
  std::unique_ptr<gpu::NcclExecutor> nccl_executor_;
  std::unique_ptr<PayloadHashingExecutor> hashing_;
  Executor* collectives_;  // what the ranks' backends meet with
  StoreBarrier store_;
};

}  // namespace meshsim::sim
