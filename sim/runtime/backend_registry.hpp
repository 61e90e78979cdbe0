// The collective backends a world can run on, each registered under the name `meshsim run
// --backend` takes. A backend gives a world what completes its meetings; everything else (the
// rendezvous, hang analysis, faults, tracing) is shared by all of them.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/runtime/meeting.hpp"
#include "sim/runtime/store_group_creator.hpp"
#include "sim/runtime/virtual_time.hpp"
#include "src/rng/gpu_profile.hpp"
#include "src/rng/random_kernel_runner.hpp"

namespace meshsim::sim {

// One world's side of a backend.
class WorldBackend {
 public:
  virtual ~WorldBackend() = default;
  // Completes every collective and point-to-point meeting of the world.
  virtual Executor& executor() = 0;
  // Told of every group the world creates (null: nothing to set up per group).
  virtual GroupListener* group_listener() { return nullptr; }
  // Where rank `rank`'s random ops run (null: predicted on the CPU for the scenario's GPU).
  virtual std::shared_ptr<RandomKernelRunner> random_kernel(int64_t /*rank*/) { return nullptr; }
  // The GPU random ops are planned for (nullopt: the scenario's).
  virtual std::optional<GpuProfile> gpu_profile() const { return std::nullopt; }
};

// What a backend is made from.
struct BackendContext {
  int64_t world_size = 0;
  VirtualTime& time;
  // How long (wall clock) a collective launched on real devices may run.
  std::chrono::milliseconds device_timeout;
};

struct BackendEntry {
  std::string name;     // what --backend takes
  std::string summary;  // what --help says of it
  // A simulated backend is deterministic and cheap: a hang may be run again to probe it.
  bool simulated = false;
  // Throws meshsim::Error (RuntimeError, GpuError) when the world cannot run on it.
  std::function<std::unique_ptr<WorldBackend>(const BackendContext&)> make;
};

class BackendRegistry {
 public:
  // A second entry of the same name replaces the first (tests swap in fakes).
  void add(BackendEntry entry);
  // Null for a name nothing registered.
  const BackendEntry* find(std::string_view name) const;
  // In the order they were added (the order --help lists them).
  const std::vector<BackendEntry>& entries() const { return entries_; }

 private:
  std::vector<BackendEntry> entries_;
};

}  // namespace meshsim::sim
