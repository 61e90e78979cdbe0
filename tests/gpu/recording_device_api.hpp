// A DeviceApi that runs on the CPU for tests: it records every call as one line, keeps "device"
// memory in host buffers, carries out NCCL's group semantics (communicators from unique ids and
// splits, collectives and point-to-point calls matched across the ranks of one group call), and
// can fail any call on request. It also counts what is still allocated, so tests can check that
// every path releases streams, buffers and communicators.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/gpu/device_api.hpp"

namespace meshsim::test {

using namespace meshsim::sim::gpu;

class RecordingDeviceApi final : public DeviceApi {
 public:
  // `devices` < 0: device_count fails as it does on a machine without a driver (CUDA error 35).
  explicit RecordingDeviceApi(int64_t devices) : devices_(devices) {}

  // Every call, in order: "all_reduce(b3 -> b3, 4 x float32, sum, c2, s1)" and the like.
  std::vector<std::string> calls;
  // The next calls named `call` ("all_reduce", "comm_split", "group_end", ...) after `skip`
  // successful ones throw GpuError(`nccl_name`, `message`).
  void fail(std::string call, std::string nccl_name, std::string message, int skip = 0);
  // After the next group_end, comm_async_error reports `message` for that group's communicators.
  void fail_async(std::string message) { async_failure_ = std::move(message); }
  // stream_done answers "not yet" forever (a collective that never finishes on the device).
  bool streams_never_finish = false;

  size_t live_streams() const { return streams_.size(); }
  int open_groups() const { return group_depth_; }
  size_t live_buffers() const { return buffers_.size(); }
  size_t live_comms() const;
  // Lines of `calls` that start with one of `prefixes`.
  std::vector<std::string> calls_of(const std::vector<std::string>& prefixes) const;

  int64_t device_count() override;
  DeviceProperties properties(int64_t device) override;
  StreamHandle create_stream(int64_t device) override;
  void destroy_stream(int64_t device, StreamHandle stream) override;
  DevicePtr allocate(int64_t device, size_t bytes) override;
  void release(int64_t device, DevicePtr ptr) override;
  void copy_to_device(int64_t device, DevicePtr dst, const void* src, size_t bytes,
                      StreamHandle stream) override;
  void copy_to_host(int64_t device, void* dst, DevicePtr src, size_t bytes,
                    StreamHandle stream) override;
  bool stream_done(int64_t device, StreamHandle stream) override;
  void fill_random(int64_t device, DevicePtr out, const RandomFillLaunch& launch,
                   StreamHandle stream) override;
  CommUniqueId unique_id() override;
  CommHandle comm_init_rank(int64_t device, int64_t nranks, const CommUniqueId& id,
                            int64_t rank) override;
  CommHandle comm_split(CommHandle parent, std::optional<int64_t> color, int64_t key) override;
  void comm_finalize(CommHandle comm) override;
  void comm_destroy(CommHandle comm) override;
  void comm_abort(CommHandle comm) override;
  std::optional<std::string> comm_async_error(CommHandle comm) override;
  void group_start() override;
  void group_end() override;
  void all_reduce(const void* send, void* recv, size_t count, NcclType type, NcclOp op,
                  CommHandle comm, StreamHandle stream) override;
  void all_gather(const void* send, void* recv, size_t send_count, NcclType type, CommHandle comm,
                  StreamHandle stream) override;
  void reduce_scatter(const void* send, void* recv, size_t recv_count, NcclType type, NcclOp op,
                      CommHandle comm, StreamHandle stream) override;
  void broadcast(const void* send, void* recv, size_t count, NcclType type, int64_t root,
                 CommHandle comm, StreamHandle stream) override;
  void send(const void* data, size_t count, NcclType type, int64_t peer, CommHandle comm,
            StreamHandle stream) override;
  void recv(void* data, size_t count, NcclType type, int64_t peer, CommHandle comm,
            StreamHandle stream) override;

 private:
  struct Comm {
    int64_t clique = 0;  // communicators of one clique talk to each other
    int64_t rank = 0;
    int64_t nranks = 0;
    int64_t device = 0;
    bool alive = true;
    std::optional<std::string> async_error;
  };
  // A queued call of one group: collectives and point-to-point alike.
  struct Op {
    std::string kind;  // all_reduce, all_gather, reduce_scatter, broadcast, send, recv
    int64_t comm = 0;
    const std::byte* send = nullptr;
    std::byte* recv = nullptr;
    size_t count = 0;
    NcclType type = NcclType::kFloat32;
    NcclOp op = NcclOp::kSum;
    int64_t peer = 0;  // root, or the peer's rank in the communicator
  };
  struct Split {
    int64_t parent;
    std::optional<int64_t> color;
    int64_t key;
    int64_t child;  // the handle comm_split returned (0 until group_end names a clique)
  };
  struct Init {
    std::string id;
    int64_t comm;
  };

  void record(std::string line);
  void maybe_fail(const std::string& call);
  Comm& comm_of(CommHandle handle);
  std::byte* buffer_of(const void* ptr, size_t bytes);
  void enqueue(Op op);
  void complete_group();
  void run_ops(std::vector<Op> ops);
  std::map<const std::byte*, std::vector<std::byte>>::iterator allocation_of(const void* ptr);
  std::string name_of_buffer(const void* ptr);

  int64_t devices_;
  struct Failure {
    std::string call, nccl_name, message;
    int skip;
  };
  std::vector<Failure> failures_;
  std::optional<std::string> async_failure_;
  std::map<int64_t, int64_t> streams_;  // handle → device
  std::map<const std::byte*, std::vector<std::byte>> buffers_;
  std::map<const std::byte*, int64_t> buffer_names_;
  std::map<int64_t, Comm> comms_;  // handle → communicator
  int64_t next_handle_ = 1;
  int64_t next_clique_ = 1;
  int64_t next_id_ = 1;
  int group_depth_ = 0;
  int aborted_ = 0;  // communicators aborted so far
  std::vector<Op> pending_;
  std::vector<Split> splits_;
  std::vector<Init> inits_;
  std::vector<int64_t> grouped_comms_;  // communicators used in the open group
};

}  // namespace meshsim::test
