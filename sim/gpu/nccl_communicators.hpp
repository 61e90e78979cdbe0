// The NCCL side of one world: a device and a stream for every rank, WORLD's communicators and one
// communicator per process group (split from WORLD's when the scenario creates the group), all
// released on every path.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sim/gpu/device_api.hpp"
#include "sim/runtime/store_group_creator.hpp"
#include "src/rng/gpu_profile.hpp"

namespace meshsim::sim::gpu {

class NcclCommunicators final : public GroupListener {
 public:
  // Rank r drives device r. Throws RuntimeError when the world needs more devices than are
  // visible (or there is no usable device), GpuError when creating a stream or WORLD's
  // communicators fails; what was created before is released.
  NcclCommunicators(std::shared_ptr<DeviceApi> api, int64_t world_size);
  // Finalizes and destroys every healthy communicator, aborts the failed ones, destroys the
  // streams. Errors here are swallowed: nothing is left to report them to.
  ~NcclCommunicators() override;
  NcclCommunicators(const NcclCommunicators&) = delete;
  NcclCommunicators& operator=(const NcclCommunicators&) = delete;

  DeviceApi& api() { return *api_; }
  int64_t world_size() const { return static_cast<int64_t>(streams_.size()); }
  int64_t device_of(int64_t rank) const { return rank; }
  StreamHandle stream(int64_t rank) const { return streams_.at(static_cast<size_t>(rank)); }
  // Device 0's properties (the GPU profile the random kernel's launches are planned for).
  const DeviceProperties& properties() const { return properties_; }
  // The random kernel's launch shape on device 0 (docs/rng.md 2.3), named after the device.
  GpuProfile gpu_profile() const;

  // The communicator `rank` uses for group `group_id` (0 is WORLD). Throws RuntimeError when
  // the group's communicators were aborted after an error, or the rank has none for it.
  CommHandle comm(int64_t rank, int64_t group_id) const;
  // The position of global rank `peer` in the group `rank` knows as `group_id` (its rank in
  // that group's communicator).
  int64_t peer_index(int64_t rank, int64_t group_id, int64_t peer) const;
  // Splits WORLD's communicators: one color per group of every request, no color for a rank in
  // none of its request's groups.
  void groups_defined(int64_t first_id, const std::vector<GroupRequest>& requests) override;
  // Aborts every rank's communicator for `group_id`; later collectives on it fail with `reason`.
  void abort_group(int64_t group_id, const std::string& reason);

 private:
  struct Comm {
    CommHandle handle = nullptr;
    RankList members;  // sorted: the communicator's ranks
  };
  const Comm& entry(int64_t rank, int64_t group_id) const;
  void release_all() noexcept;

  std::shared_ptr<DeviceApi> api_;
  DeviceProperties properties_;
  std::vector<StreamHandle> streams_;       // by rank
  std::vector<std::vector<Comm>> comms_;    // by rank, then group id (null handle: none)
  std::map<int64_t, std::string> aborted_;  // group id → why
};

}  // namespace meshsim::sim::gpu
