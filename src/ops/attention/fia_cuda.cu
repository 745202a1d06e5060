// FIA's CUDA kernels (Note [FIA CUDA kernels] in fia_cuda_core.hpp, where their math lives as
// __host__ __device__ code that tests/ops/test_fia_cuda_emulation.cpp runs on the host). Built with
// the CUDA backend only (cmake/Cuda.cmake). What the CUDA backend refuses is decided on the host
// before a launch (fia_cuda_check.cpp). Compiled and host-emulation-tested; NOT YET RUN ON A GPU.
#include <cuda_runtime.h>

#include <cstring>

#include "ops/attention/fia_cuda_core.hpp"

namespace npugraph::ops::attention {
namespace {

namespace cc = cuda_core;

// The GPU's Exec (attention_block): each thread runs its part of a phase, then the block syncs.
struct DeviceExec {
  float* acc;
  template <class F>
  __host__ __device__ void phase(F&& f) {
#if defined(__CUDA_ARCH__)
    f(static_cast<int>(threadIdx.x), acc);
    __syncthreads();
#else
    (void)f;
#endif
  }
};

// Every argument comes from the device copy of the block (Note [CUDA kernels read the device
// block]): an update that rewrites it reaches a captured node unchanged.
__global__ void __launch_bounds__(cc::kThreads) fia_attention_kernel(const void* block) {
  __shared__ cc::Shared sh;
  float acc[cc::kAcc];
  DeviceExec ex{acc};
  cc::attention_block(block, cc::Coord{blockIdx.x, blockIdx.y, blockIdx.z}, sh, ex);
}

__global__ void __launch_bounds__(cc::kThreads) fia_combine_kernel(const void* block) {
  cc::combine_row(block, blockIdx.x, static_cast<int>(threadIdx.x));
}

}  // namespace

// The launcher reads the host copy for the grid only: geometry() is a function of the FiaShapeKey
// and the workspace plan, which fia_check_update keeps fixed. Launch errors are the backend's to
// report (it checks cudaGetLastError after each launcher).
void fia_cuda(const void* params, std::size_t, const void* device_params, void* stream) {
  FiaShapeKey key;  // copied out: the host copy need not be aligned
  FiaWorkspacePlan plan;
  std::memcpy(&key, static_cast<const std::byte*>(params) + offsetof(FiaParams, key), sizeof key);
  std::memcpy(&plan, static_cast<const std::byte*>(params) + offsetof(FiaParams, plan), sizeof plan);
  const cc::Geometry g = cc::geometry(key, plan);
  const auto s = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(g.grid_x()), static_cast<unsigned>(g.splits),
                  static_cast<unsigned>(g.batch));
  fia_attention_kernel<<<grid, cc::kThreads, 0, s>>>(device_params);
  if (g.split)
    fia_combine_kernel<<<static_cast<unsigned>(g.batch * g.heads * g.q_seq), cc::kThreads, 0, s>>>(
        device_params);
}

}  // namespace npugraph::ops::attention
