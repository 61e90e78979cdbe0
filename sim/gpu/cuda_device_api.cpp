// DeviceApi over the CUDA runtime and NCCL: each call selects its device, checks the result and
// turns a failure into GpuError with the library's own error string.
#include <cstring>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <fmt/format.h>

#include "sim/gpu/device_api.hpp"

namespace meshsim::sim::gpu {

namespace {

void check_cuda(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so later calls report their own
  throw GpuError(call, fmt::format("{} (CUDA error {}, {})", cudaGetErrorString(status),
                                   static_cast<int>(status), cudaGetErrorName(status)));
}

void check_nccl(ncclResult_t status, const char* call, ncclComm_t comm = nullptr) {
  if (status == ncclSuccess || status == ncclInProgress) return;
  std::string message = ncclGetErrorString(status);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') message += fmt::format(" ({})", last);
  throw GpuError(call, message);
}

void select(int64_t device) {
  check_cuda(cudaSetDevice(static_cast<int>(device)), "cudaSetDevice");
}

ncclDataType_t to_nccl(NcclType type) {
  switch (type) {
    case NcclType::kFloat32:
      return ncclFloat32;
    case NcclType::kFloat64:
      return ncclFloat64;
    case NcclType::kFloat16:
      return ncclFloat16;
    case NcclType::kBFloat16:
      return ncclBfloat16;
    case NcclType::kInt64:
      return ncclInt64;
    case NcclType::kInt32:
      return ncclInt32;
    case NcclType::kUInt8:
      return ncclUint8;
  }
  return ncclUint8;
}

ncclRedOp_t to_nccl(NcclOp op) {
  switch (op) {
    case NcclOp::kSum:
      return ncclSum;
    case NcclOp::kProd:
      return ncclProd;
    case NcclOp::kMin:
      return ncclMin;
    case NcclOp::kMax:
      return ncclMax;
    case NcclOp::kAvg:
      return ncclAvg;
  }
  return ncclSum;
}

ncclComm_t comm_of(CommHandle comm) {
  return static_cast<ncclComm_t>(comm);
}
cudaStream_t stream_of(StreamHandle stream) {
  return static_cast<cudaStream_t>(stream);
}

class CudaDeviceApi final : public DeviceApi {
 public:
  int64_t device_count() override {
    int count = 0;
    check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    return count;
  }

  DeviceProperties properties(int64_t device) override {
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, static_cast<int>(device)), "cudaGetDeviceProperties");
    return {prop.name, prop.multiProcessorCount, prop.maxThreadsPerMultiProcessor, prop.major,
            prop.minor};
  }

  StreamHandle create_stream(int64_t device) override {
    select(device);
    cudaStream_t stream = nullptr;
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    return stream;
  }

  void destroy_stream(int64_t device, StreamHandle stream) override {
    select(device);
    check_cuda(cudaStreamDestroy(stream_of(stream)), "cudaStreamDestroy");
  }

  DevicePtr allocate(int64_t device, size_t bytes) override {
    select(device);
    void* ptr = nullptr;
    check_cuda(cudaMalloc(&ptr, bytes), "cudaMalloc");
    return ptr;
  }

  void release(int64_t device, DevicePtr ptr) override {
    select(device);
    check_cuda(cudaFree(ptr), "cudaFree");
  }

  void copy_to_device(int64_t device, DevicePtr dst, const void* src, size_t bytes,
                      StreamHandle stream) override {
    select(device);
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_of(stream)),
               "cudaMemcpyAsync (host to device)");
  }

  void copy_to_host(int64_t device, void* dst, DevicePtr src, size_t bytes,
                    StreamHandle stream) override {
    select(device);
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_of(stream)),
               "cudaMemcpyAsync (device to host)");
  }

  bool stream_done(int64_t device, StreamHandle stream) override {
    select(device);
    const cudaError_t status = cudaStreamQuery(stream_of(stream));
    if (status == cudaErrorNotReady) return false;
    check_cuda(status, "cudaStreamQuery");
    return true;
  }

  void fill_random(int64_t device, DevicePtr out, const RandomFillLaunch& launch,
                   StreamHandle stream) override {
    select(device);
    check_cuda(static_cast<cudaError_t>(launch_random_fill(stream, out, launch)),
               "random kernel launch");
  }

  CommUniqueId unique_id() override {
    ncclUniqueId id;
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    static_assert(sizeof(id.internal) == sizeof(CommUniqueId::bytes));
    CommUniqueId out;
    std::memcpy(out.bytes.data(), id.internal, sizeof(id.internal));
    return out;
  }

  CommHandle comm_init_rank(int64_t device, int64_t nranks, const CommUniqueId& id,
                            int64_t rank) override {
    select(device);
    ncclUniqueId nccl_id;
    std::memcpy(nccl_id.internal, id.bytes.data(), sizeof(nccl_id.internal));
    ncclComm_t comm = nullptr;
    check_nccl(ncclCommInitRank(&comm, static_cast<int>(nranks), nccl_id, static_cast<int>(rank)),
               "ncclCommInitRank");
    return comm;
  }

  CommHandle comm_split(CommHandle parent, std::optional<int64_t> color, int64_t key) override {
    ncclComm_t comm = nullptr;
    check_nccl(ncclCommSplit(comm_of(parent), color ? static_cast<int>(*color) : NCCL_SPLIT_NOCOLOR,
                             static_cast<int>(key), &comm, nullptr),
               "ncclCommSplit", comm_of(parent));
    return comm;
  }

  void comm_finalize(CommHandle comm) override {
    check_nccl(ncclCommFinalize(comm_of(comm)), "ncclCommFinalize", comm_of(comm));
  }
  void comm_destroy(CommHandle comm) override {
    check_nccl(ncclCommDestroy(comm_of(comm)), "ncclCommDestroy");
  }
  void comm_abort(CommHandle comm) override {
    check_nccl(ncclCommAbort(comm_of(comm)), "ncclCommAbort");
  }

  std::optional<std::string> comm_async_error(CommHandle comm) override {
    ncclResult_t async = ncclSuccess;
    check_nccl(ncclCommGetAsyncError(comm_of(comm), &async), "ncclCommGetAsyncError",
               comm_of(comm));
    if (async == ncclSuccess || async == ncclInProgress) return std::nullopt;
    return std::string(ncclGetErrorString(async));
  }

  void group_start() override { check_nccl(ncclGroupStart(), "ncclGroupStart"); }
  void group_end() override { check_nccl(ncclGroupEnd(), "ncclGroupEnd"); }

  void all_reduce(const void* send, void* recv, size_t count, NcclType type, NcclOp op,
                  CommHandle comm, StreamHandle stream) override {
    check_nccl(ncclAllReduce(send, recv, count, to_nccl(type), to_nccl(op), comm_of(comm),
                             stream_of(stream)),
               "ncclAllReduce", comm_of(comm));
  }
  void all_gather(const void* send, void* recv, size_t send_count, NcclType type, CommHandle comm,
                  StreamHandle stream) override {
    check_nccl(
        ncclAllGather(send, recv, send_count, to_nccl(type), comm_of(comm), stream_of(stream)),
        "ncclAllGather", comm_of(comm));
  }
  void reduce_scatter(const void* send, void* recv, size_t recv_count, NcclType type, NcclOp op,
                      CommHandle comm, StreamHandle stream) override {
    check_nccl(ncclReduceScatter(send, recv, recv_count, to_nccl(type), to_nccl(op), comm_of(comm),
                                 stream_of(stream)),
               "ncclReduceScatter", comm_of(comm));
  }
  void broadcast(const void* send, void* recv, size_t count, NcclType type, int64_t root,
                 CommHandle comm, StreamHandle stream) override {
    check_nccl(ncclBroadcast(send, recv, count, to_nccl(type), static_cast<int>(root),
                             comm_of(comm), stream_of(stream)),
               "ncclBroadcast", comm_of(comm));
  }
  void send(const void* data, size_t count, NcclType type, int64_t peer, CommHandle comm,
            StreamHandle stream) override {
    check_nccl(ncclSend(data, count, to_nccl(type), static_cast<int>(peer), comm_of(comm),
                        stream_of(stream)),
               "ncclSend", comm_of(comm));
  }
  void recv(void* data, size_t count, NcclType type, int64_t peer, CommHandle comm,
            StreamHandle stream) override {
    check_nccl(ncclRecv(data, count, to_nccl(type), static_cast<int>(peer), comm_of(comm),
                        stream_of(stream)),
               "ncclRecv", comm_of(comm));
  }
};

}  // namespace

std::shared_ptr<DeviceApi> make_cuda_device_api() {
  return std::make_shared<CudaDeviceApi>();
}

}  // namespace meshsim::sim::gpu
