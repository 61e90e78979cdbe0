// Running the random kernel on CUDA device 0, for the device test and kernel_parity.
// Finds the device (or the one-line reason to skip), its GpuProfile, and copies a launch back.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/gpu/kernel/random_kernel.hpp"
#include "src/rng/gpu_profile.hpp"

namespace meshsim::testing {

// meson's exit status for a skipped test.
constexpr int kExitSkip = 77;

struct CudaDevice {
  std::string name;    // cudaDeviceProp::name, e.g. "NVIDIA H200"
  GpuProfile profile;  // SMs and threads per SM, as PyTorch caps the grid with them
  int compute_major = 0;
  int compute_minor = 0;
};

inline std::string cuda_error_text(cudaError_t e) {
  return fmt::format("error {}, {}", static_cast<int>(e), cudaGetErrorString(e));
}

// Device 0, or nullopt with `skip_reason` set ("no CUDA device (cudaGetDeviceCount: error 35,
// CUDA driver version is insufficient for CUDA runtime version)").
inline std::optional<CudaDevice> open_cuda_device(std::string& skip_reason) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    skip_reason = fmt::format("no CUDA device (cudaGetDeviceCount: {})", cuda_error_text(e));
    return std::nullopt;
  }
  if (count == 0) {
    skip_reason = "no CUDA device (cudaGetDeviceCount: 0 devices)";
    return std::nullopt;
  }
  cudaDeviceProp prop{};
  if (const cudaError_t p = cudaGetDeviceProperties(&prop, 0); p != cudaSuccess) {
    skip_reason =
        fmt::format("no usable CUDA device (cudaGetDeviceProperties: {})", cuda_error_text(p));
    return std::nullopt;
  }
  if (const cudaError_t s = cudaSetDevice(0); s != cudaSuccess) {
    skip_reason = fmt::format("no usable CUDA device (cudaSetDevice: {})", cuda_error_text(s));
    return std::nullopt;
  }
  CudaDevice d;
  d.name = prop.name;
  // Throws meshsim::Error for a GPU the model cannot describe (threads per SM not a multiple
  // of 256): that is a failure to report, not a reason to skip.
  d.profile = GpuProfile::custom(prop.multiProcessorCount, prop.maxThreadsPerMultiProcessor);
  d.profile.name = d.name;
  d.compute_major = prop.major;
  d.compute_minor = prop.minor;
  return d;
}

// For a program's main: device 0, or nullopt after printing why, with the exit status to return
// (kExitSkip without a usable device; 1 for a device the model cannot describe).
inline std::optional<CudaDevice> open_cuda_device_or_report(int& exit_status) {
  std::string skip_reason;
  try {
    std::optional<CudaDevice> cuda = open_cuda_device(skip_reason);
    if (!cuda) {
      std::printf("skipped: %s\n", skip_reason.c_str());
      exit_status = kExitSkip;
    }
    return cuda;
  } catch (const std::exception& e) {
    std::printf("FAIL: device 0: %s\n", e.what());
    exit_status = 1;
    return std::nullopt;
  }
}

// One device buffer reused across launches, with a guard after the tensor: every byte starts as
// 0xff (a NaN in every dtype), so elements the kernel skips show up as mismatches and writes past
// the end as a damaged guard.
class DeviceFill {
 public:
  static constexpr size_t kGuardBytes = 4096;

  DeviceFill() {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~DeviceFill() {
    if (buffer_ != nullptr) cudaFree(buffer_);
    cudaStreamDestroy(stream_);
  }
  DeviceFill(const DeviceFill&) = delete;
  DeviceFill& operator=(const DeviceFill&) = delete;

  // Runs `launch` on the stream and returns the tensor's bytes. Throws std::runtime_error with
  // CUDA's error text when a call fails, and when the kernel wrote into the guard.
  std::vector<std::byte> run(const sim::gpu::RandomFillLaunch& launch) {
    const size_t bytes = static_cast<size_t>(launch.numel > 0 ? launch.numel : 0) *
                         static_cast<size_t>(sim::gpu::random_dtype_size(launch.dtype));
    reserve(bytes + kGuardBytes);
    check(cudaMemsetAsync(buffer_, 0xff, bytes + kGuardBytes, stream_), "cudaMemsetAsync");
    const int launched = sim::gpu::launch_random_fill(stream_, buffer_, launch);
    check(static_cast<cudaError_t>(launched), "launch_random_fill");
    std::vector<std::byte> out(bytes + kGuardBytes);
    check(cudaMemcpyAsync(out.data(), buffer_, out.size(), cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (the kernel)");
    for (size_t i = bytes; i < out.size(); ++i) {
      if (out[i] != std::byte{0xff}) {
        throw std::runtime_error(
            fmt::format("the kernel wrote past the tensor's end (byte {} of "
                        "a {}-byte tensor)",
                        i, bytes));
      }
    }
    out.resize(bytes);
    return out;
  }

  void* stream() const { return stream_; }

 private:
  static void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(fmt::format("{}: {}", what, cuda_error_text(e)));
  }
  void reserve(size_t bytes) {
    if (bytes <= capacity_) return;
    if (buffer_ != nullptr) check(cudaFree(buffer_), "cudaFree");
    buffer_ = nullptr;
    check(cudaMalloc(&buffer_, bytes), "cudaMalloc");
    capacity_ = bytes;
  }

  cudaStream_t stream_ = nullptr;
  void* buffer_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace meshsim::testing
