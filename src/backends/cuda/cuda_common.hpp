// The CUDA backend's private helpers: error checks and the current-device guard. Included only by
// the backend's own .cpp files (it needs cuda_runtime.h, which this build has only with the toolkit).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "npugraph/error.hpp"

namespace npugraph::detail::cuda {

// Throws when a CUDA call failed, naming the device, the call and CUDA's error: ResourceError for
// out of memory, StateError otherwise (a CUDA error is the device's state: a faulted context stays
// faulted, docs/backends.md).
inline void check(cudaError_t err, int device, const char* call) {
  if (err == cudaSuccess) return;
  (void)cudaGetLastError();  // clear a non-sticky error so the next call does not see it
  if (err == cudaErrorMemoryAllocation)
    NG_THROW(ResourceError, "cuda:", device, ": ", call, " failed: out of device memory (",
             cudaGetErrorName(err), ")");
  NG_THROW(StateError, "cuda:", device, ": ", call, " failed: ", cudaGetErrorName(err), ": ",
           cudaGetErrorString(err));
}

// Makes `device` current on this thread for the guard's lifetime (host calls may come from any
// thread; the previous device is restored so that code beside us, torch say, is not disturbed).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) noexcept {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) (void)cudaSetDevice(device);
    device_ = device;
  }
  ~DeviceGuard() {
    if (previous_ >= 0 && previous_ != device_) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  int device_ = 0;
};

// Fills count elements of elem_size bytes (1, 2, 4 or 8) with `pattern` on `stream`
// (cuda_builtins.cu): a fill whose bytes are not all equal, which cudaMemsetAsync cannot do.
cudaError_t fill_pattern(void* dst, std::size_t count, std::size_t elem_size, std::uint64_t pattern,
                         cudaStream_t stream);

}  // namespace npugraph::detail::cuda
