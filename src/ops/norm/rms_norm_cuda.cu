// The rms_norm / add_rms_norm CUDA kernel: Note [RMSNorm on CUDA] in rms_norm_cuda_core.hpp.
//
// Note [Decode-op CUDA kernels read the device block]
// As the elementwise kernels (Note [CUDA kernels read the device block] in elementwise_cuda.cu):
// the kernel's one argument is the device copy of its parameter block, and it reads everything
// from there — pointers, sizes, epsilon, dtypes (uniform branches) — so a task update that
// rewrites the block reaches a captured node. The launcher reads the host copy for the grid only
// (the row count); the kernel strides over the rows the device block holds, so the grid never
// decides what is computed. Compiled and host-emulation-tested; it has not run on a GPU yet.
//
// Note [RMSNorm launch]
// One 256-thread block per row (grid-stride over the device block's rows), the grid from the host
// copy's rows, at most 4096 blocks; shared memory: the four float64 lanes.
#include <cuda_runtime.h>

#include "ops/norm/rms_norm_cuda_core.hpp"

namespace npugraph::ops::norm_impl {
namespace {

namespace cc = cuda_core;

template <bool kAdd>
__global__ void rms_norm_kernel(const RmsNormParams* pp) {
  const RmsNormParams& p = *pp;
  __shared__ double lanes[4];
  for (std::int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    if (kAdd) {
      for (std::int64_t i = threadIdx.x; i < p.H; i += blockDim.x) cc::add_element(p, r, i);
      __syncthreads();
    }
    if (threadIdx.x < 4) lanes[threadIdx.x] = cc::lane_sum(p, kAdd, r, static_cast<int>(threadIdx.x));
    __syncthreads();
    const float rstd = cc::rstd_of(p, lanes);
    if (threadIdx.x == 0 && p.rstd) p.rstd[r] = rstd;
    for (std::int64_t i = threadIdx.x; i < p.H; i += blockDim.x) cc::out_element(p, kAdd, r, i, rstd);
    __syncthreads();  // lanes and x_out are reused by the next row
  }
}

template <bool kAdd>
void launch(const void* params, const void* device_params, void* stream) {
  const auto& p = *static_cast<const RmsNormParams*>(params);
  rms_norm_kernel<kAdd><<<cc::blocks_for(p.rows, 1), cc::kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const RmsNormParams*>(device_params));
}

}  // namespace

void rms_norm_cuda(const void* params, std::size_t, const void* device_params, void* stream) {
  launch<false>(params, device_params, stream);
}

void add_rms_norm_cuda(const void* params, std::size_t, const void* device_params, void* stream) {
  launch<true>(params, device_params, stream);
}

}  // namespace npugraph::ops::norm_impl
