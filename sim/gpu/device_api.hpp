// The thin interface between the NCCL backend and the CUDA runtime and NCCL: every call the
// backend makes, one virtual function each, so the launch plan can be tested on a machine without
// a GPU against a recording fake. The real implementation (cuda_device_api.cpp) is built only where
// nvcc, the CUDA runtime and NCCL are found.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "sim/gpu/kernel/random_kernel.hpp"
#include "src/error.hpp"

namespace meshsim::sim::gpu {

// Opaque handles: cudaStream_t, ncclComm_t and device pointers, as the implementation defines them.
using StreamHandle = void*;
using CommHandle = void*;
using DevicePtr = void*;

// ncclUniqueId (128 bytes in every NCCL release).
struct CommUniqueId {
  std::array<char, 128> bytes{};
};

// The element types and reductions meshsim's collectives use, as NCCL names them.
enum class NcclType { kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8 };
enum class NcclOp { kSum, kProd, kMin, kMax, kAvg };

struct DeviceProperties {
  std::string name;
  int64_t sms = 0;
  int64_t max_threads_per_sm = 0;
  int compute_major = 0;
  int compute_minor = 0;
};

// A CUDA or NCCL call that failed: `call` is the API function ("ncclAllReduce"), `message` its
// error string (and NCCL's last error, when it has one).
class GpuError : public Error {
 public:
  GpuError(std::string call, std::string message)
      : Error(PyErrorType::kRuntimeError, call + ": " + message),
        call_(std::move(call)),
        detail_(std::move(message)) {}
  const std::string& call() const { return call_; }
  const std::string& detail() const { return detail_; }

 private:
  std::string call_;
  std::string detail_;
};

// Every call throws GpuError when the runtime or NCCL reports an error. Calls that act on a
// device take it explicitly (the implementation selects it first), so no state leaks between
// ranks. Communication calls follow NCCL's contract: one thread drives every rank, so calls for
// several ranks of one communicator must sit between group_start and group_end.
class DeviceApi {
 public:
  virtual ~DeviceApi() = default;

  // CUDA runtime.
  virtual int64_t device_count() = 0;
  virtual DeviceProperties properties(int64_t device) = 0;
  virtual StreamHandle create_stream(int64_t device) = 0;
  virtual void destroy_stream(int64_t device, StreamHandle stream) = 0;
  virtual DevicePtr allocate(int64_t device, size_t bytes) = 0;
  virtual void release(int64_t device, DevicePtr ptr) = 0;
  virtual void copy_to_device(int64_t device, DevicePtr dst, const void* src, size_t bytes,
                              StreamHandle stream) = 0;
  virtual void copy_to_host(int64_t device, void* dst, DevicePtr src, size_t bytes,
                            StreamHandle stream) = 0;
  // cudaStreamQuery: true when everything queued on `stream` has finished.
  virtual bool stream_done(int64_t device, StreamHandle stream) = 0;
  // The CUDA random kernel (sim/gpu/kernel/random_kernel.hpp), queued on `stream`.
  virtual void fill_random(int64_t device, DevicePtr out, const RandomFillLaunch& launch,
                           StreamHandle stream) = 0;

  // NCCL.
  virtual CommUniqueId unique_id() = 0;
  virtual CommHandle comm_init_rank(int64_t device, int64_t nranks, const CommUniqueId& id,
                                    int64_t rank) = 0;
  // ncclCommSplit; null for a rank that passed no color (it joins no communicator).
  virtual CommHandle comm_split(CommHandle parent, std::optional<int64_t> color, int64_t key) = 0;
  // ncclCommFinalize (collective: between group_start/group_end for several ranks) and
  // ncclCommDestroy; ncclCommAbort for a communicator in error.
  virtual void comm_finalize(CommHandle comm) = 0;
  virtual void comm_destroy(CommHandle comm) = 0;
  virtual void comm_abort(CommHandle comm) = 0;
  // ncclCommGetAsyncError: the error string when the communicator has failed, nullopt otherwise.
  virtual std::optional<std::string> comm_async_error(CommHandle comm) = 0;
  virtual void group_start() = 0;
  virtual void group_end() = 0;
  virtual void all_reduce(const void* send, void* recv, size_t count, NcclType type, NcclOp op,
                          CommHandle comm, StreamHandle stream) = 0;
  virtual void all_gather(const void* send, void* recv, size_t send_count, NcclType type,
                          CommHandle comm, StreamHandle stream) = 0;
  virtual void reduce_scatter(const void* send, void* recv, size_t recv_count, NcclType type,
                              NcclOp op, CommHandle comm, StreamHandle stream) = 0;
  virtual void broadcast(const void* send, void* recv, size_t count, NcclType type, int64_t root,
                         CommHandle comm, StreamHandle stream) = 0;
  virtual void send(const void* data, size_t count, NcclType type, int64_t peer, CommHandle comm,
                    StreamHandle stream) = 0;
  virtual void recv(void* data, size_t count, NcclType type, int64_t peer, CommHandle comm,
                    StreamHandle stream) = 0;
};

// The CUDA runtime and NCCL this binary was built with. Throws meshsim::Error (RuntimeError)
// saying how to build it when meshsim was built without them.
std::shared_ptr<DeviceApi> make_cuda_device_api();

}  // namespace meshsim::sim::gpu
