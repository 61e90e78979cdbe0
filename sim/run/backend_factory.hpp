// Where a rank's communication comes from: one world's shared pieces (the rendezvous every backend
// meets in, the store that new_group waits in, the group table) and the chosen backend's side of
// the world. Each rank gets its Backend, wrapped for faults and tracing when asked, and its
// GroupCreator.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/runtime/backend_registry.hpp"
#include "sim/runtime/faults.hpp"
#include "sim/runtime/payload_hashes.hpp"
#include "sim/runtime/rank_activity.hpp"
#include "sim/runtime/rendezvous.hpp"
#include "sim/runtime/store_group_creator.hpp"
#include "sim/runtime/trace.hpp"
#include "sim/runtime/virtual_time.hpp"
#include "sim/runtime/world.hpp"
#include "src/comm/collective.hpp"
#include "src/comm/group_creator.hpp"

namespace meshsim::sim {

// Every backend this build has: "sim" (the default), then "nccl".
const BackendRegistry& builtin_backends();

// What a user chooses about the backend (`meshsim run --backend`, --payload-hashes).
struct BackendChoice {
  std::string name = "sim";
  const BackendRegistry* registry = nullptr;  // where `name` is looked up (null: builtin_backends)
  bool payload_hashes = false;                // hash what every member of every collective receives
  // Real devices: how long a launched collective may run (wall clock).
  std::chrono::milliseconds device_timeout = std::chrono::minutes(5);

  // The entry `name` names; throws RuntimeError listing the names when none does.
  const BackendEntry& entry() const;
};

struct BackendOptions {
  BackendChoice choice;
  CostModel cost;                // the simulated executor's virtual time
  std::vector<Fault> faults;     // injected at a rank's k-th collective
  Trace* trace = nullptr;        // records every collective when set
  Trace* setup_trace = nullptr;  // records new_group's store barriers when set
};

class BackendFactory {
 public:
  // Makes the backend's side of the world first (nccl: a stream and WORLD's communicator for
  // every rank); throws what the backend throws when the world cannot run on it.
  BackendFactory(World& world, std::vector<RankActivity>& activity, BackendOptions options);

  // Rank `rank`'s backend and group creator; they live as long as the rank runs.
  std::unique_ptr<Backend> backend(int64_t rank);
  std::unique_ptr<GroupCreator> group_creator(int64_t rank);
  // The chosen backend's side of the world (random kernels, the GPU in use).
  WorldBackend& world_backend() { return *backend_; }

  // What hang reports need.
  const Rendezvous& rendezvous() const { return rendezvous_; }
  const std::optional<TimeoutRecord>& timeout() const { return time_.timeout(); }
  // The world's process groups (Flight Recorder dumps list each rank's).
  const GroupTable& groups() const { return *groups_; }
  // Groups created with different members on different ranks, in the order they happened.
  const std::vector<std::string>& warnings() const { return store_.warnings(); }
  // With BackendChoice::payload_hashes: one line per member of every completed collective.
  std::vector<std::string> payload_hashes() const {
    return hashing_ ? hashing_->lines() : std::vector<std::string>{};
  }

 private:
  std::vector<RankActivity>& activity_;
  BackendOptions options_;
  Rendezvous rendezvous_;
  VirtualTime time_;
  std::shared_ptr<GroupTable> groups_;
  std::unique_ptr<WorldBackend> backend_;
  std::unique_ptr<PayloadHashingExecutor> hashing_;
  Executor* collectives_;  // what the ranks' backends meet with
  StoreBarrier store_;
};

}  // namespace meshsim::sim
