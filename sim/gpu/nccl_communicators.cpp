#include "sim/gpu/nccl_communicators.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "sim/gpu/device_ops.hpp"
#include "src/error.hpp"

namespace meshsim::sim::gpu {

namespace {

// Aborts `comm` (if any) and forgets it. Its own error is dropped: the caller is already on a
// failure or teardown path with an error of its own, or none to report.
void abort_quietly(DeviceApi& api, CommHandle& comm) noexcept {
  if (comm == nullptr) return;
  try {
    api.comm_abort(comm);
  } catch (...) {  // NOLINT(bugprone-empty-catch)
  }
  comm = nullptr;
}

// Aborts what a failed creation left behind, then lets the error go on.
void abort_all(DeviceApi& api, std::vector<CommHandle>& made) noexcept {
  for (CommHandle& comm : made) abort_quietly(api, comm);
}

}  // namespace

NcclCommunicators::NcclCommunicators(std::shared_ptr<DeviceApi> api, int64_t world_size)
    : api_(std::move(api)) {
  int64_t devices = 0;
  try {
    devices = api_->device_count();
  } catch (const GpuError& e) {
    throw runtime_error(fmt::format(
        "--backend nccl needs one CUDA device per rank, and none is usable here ({}); run on a "
        "machine with GPUs, or use --backend sim",
        e.what()));
  }
  if (devices < world_size) {
    throw runtime_error(fmt::format(
        "--backend nccl runs one rank per GPU: this scenario's world has {} ranks and {} CUDA "
        "device(s) are visible{}; shrink the world or use --backend sim",
        world_size, devices, devices == 0 ? "" : " (CUDA_VISIBLE_DEVICES may hide others)"));
  }
  try {
    properties_ = api_->properties(0);
    streams_.reserve(static_cast<size_t>(world_size));
    for (int64_t r = 0; r < world_size; ++r) streams_.push_back(api_->create_stream(r));
    // WORLD: one unique id, every rank's ncclCommInitRank in one group (one thread drives all).
    const CommUniqueId id = api_->unique_id();
    std::vector<CommHandle> world(static_cast<size_t>(world_size), nullptr);
    try {
      GroupCall group(*api_);
      for (int64_t r = 0; r < world_size; ++r) {
        world[static_cast<size_t>(r)] = api_->comm_init_rank(r, world_size, id, r);
      }
      group.end();
    } catch (...) {
      abort_all(*api_, world);
      throw;
    }
    std::vector<int64_t> everyone(static_cast<size_t>(world_size));
    for (int64_t r = 0; r < world_size; ++r) everyone[static_cast<size_t>(r)] = r;
    const RankList all = std::make_shared<const std::vector<int64_t>>(std::move(everyone));
    comms_.resize(static_cast<size_t>(world_size));
    for (size_t r = 0; r < world.size(); ++r) comms_[r] = {Comm{world[r], all}};
  } catch (...) {
    release_all();
    throw;
  }
}

NcclCommunicators::~NcclCommunicators() {
  release_all();
}

GpuProfile NcclCommunicators::gpu_profile() const {
  GpuProfile profile = GpuProfile::custom(properties_.sms, properties_.max_threads_per_sm);
  profile.name = properties_.name;
  return profile;
}

void NcclCommunicators::release_all() noexcept {
  // Healthy communicators are finalized together (one thread drives every rank), then destroyed;
  // if finalizing fails they are aborted instead.
  std::vector<CommHandle> healthy;
  for (const std::vector<Comm>& by_group : comms_) {
    for (const Comm& comm : by_group) {
      if (comm.handle != nullptr) healthy.push_back(comm.handle);
    }
  }
  bool finalized = !healthy.empty();
  if (finalized) {
    try {
      GroupCall group(*api_);
      for (CommHandle comm : healthy) api_->comm_finalize(comm);
      group.end();
    } catch (...) {
      finalized = false;
    }
  }
  if (!finalized) abort_all(*api_, healthy);
  for (CommHandle comm : healthy) {
    if (comm == nullptr) continue;
    try {
      api_->comm_destroy(comm);
    } catch (...) {  // NOLINT(bugprone-empty-catch): teardown goes on for the others
    }
  }
  comms_.clear();
  for (size_t r = 0; r < streams_.size(); ++r) {
    try {
      api_->destroy_stream(static_cast<int64_t>(r), streams_[r]);
    } catch (...) {  // NOLINT(bugprone-empty-catch)
    }
  }
  streams_.clear();
}

CommHandle NcclCommunicators::comm(int64_t rank, int64_t group_id) const {
  if (const auto it = aborted_.find(group_id); it != aborted_.end()) {
    throw runtime_error(
        fmt::format("group {}'s NCCL communicators were aborted after an earlier error ({})",
                    group_id, it->second));
  }
  return entry(rank, group_id).handle;
}

const NcclCommunicators::Comm& NcclCommunicators::entry(int64_t rank, int64_t group_id) const {
  const std::vector<Comm>& mine = comms_.at(static_cast<size_t>(rank));
  if (group_id < 0 || static_cast<size_t>(group_id) >= mine.size() ||
      mine[static_cast<size_t>(group_id)].handle == nullptr) {
    throw runtime_error(
        fmt::format("rank {} has no NCCL communicator for group {}", rank, group_id));
  }
  return mine[static_cast<size_t>(group_id)];
}

int64_t NcclCommunicators::peer_index(int64_t rank, int64_t group_id, int64_t peer) const {
  const std::vector<int64_t>& members = *entry(rank, group_id).members;
  const auto at = std::lower_bound(members.begin(), members.end(), peer);
  MESHSIM_ASSERT(at != members.end() && *at == peer,
                 fmt::format("rank {} is not in rank {}'s group {}", peer, rank, group_id));
  return at - members.begin();
}

void NcclCommunicators::groups_defined(int64_t first_id,
                                       const std::vector<GroupRequest>& requests) {
  const auto n = static_cast<size_t>(world_size());
  // Ranks that asked for the same groups share a color per group; ranks that asked for other
  // members (a warning, not an error, at the store) get communicators of their own.
  std::vector<std::optional<int64_t>> color(n);
  std::vector<int64_t> group_index(n, -1);
  std::vector<size_t> request_of(n, 0);
  std::map<std::pair<size_t, int64_t>, int64_t> colors;
  for (size_t q = 0; q < requests.size(); ++q) {
    for (int64_t rank : requests[q].ranks) {
      const int64_t g = requests[q].batch->group_of(rank);
      if (g < 0) continue;
      const auto [it, added] = colors.emplace(std::pair{q, g}, static_cast<int64_t>(colors.size()));
      color[static_cast<size_t>(rank)] = it->second;
      group_index[static_cast<size_t>(rank)] = g;
      request_of[static_cast<size_t>(rank)] = q;
    }
  }
  if (const auto it = aborted_.find(0); it != aborted_.end()) {
    throw runtime_error(fmt::format(
        "creating NCCL communicators for group(s) from {} needs WORLD's, which were aborted "
        "after an earlier error ({})",
        first_id, it->second));
  }
  std::vector<CommHandle> made(n, nullptr);
  try {
    GroupCall group(*api_);
    for (size_t r = 0; r < n; ++r) {
      made[r] = api_->comm_split(comms_[r].at(0).handle, color[r], static_cast<int64_t>(r));
    }
    group.end();
  } catch (const GpuError& e) {
    abort_all(*api_, made);
    throw runtime_error(fmt::format("creating NCCL communicators for group(s) from {} failed: {}",
                                    first_id, e.what()));
  } catch (...) {
    abort_all(*api_, made);
    throw;
  }
  for (size_t r = 0; r < n; ++r) {
    if (made[r] == nullptr) continue;
    const auto id = static_cast<size_t>(first_id + group_index[r]);
    if (comms_[r].size() <= id) comms_[r].resize(id + 1);
    comms_[r][id] =
        Comm{made[r], requests[request_of[r]].batch->members(static_cast<size_t>(group_index[r]))};
  }
}

void NcclCommunicators::abort_group(int64_t group_id, const std::string& reason) {
  aborted_.emplace(group_id, reason);
  for (std::vector<Comm>& mine : comms_) {
    if (group_id < 0 || static_cast<size_t>(group_id) >= mine.size()) continue;
    abort_quietly(*api_, mine[static_cast<size_t>(group_id)].handle);
  }
}

}  // namespace meshsim::sim::gpu
