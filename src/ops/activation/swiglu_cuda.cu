// The swiglu CUDA kernel: Note [SwiGLU on CUDA] in swiglu_cuda_core.hpp. It reads its block from
// device memory only, the grid from the host copy (Note [Decode-op CUDA kernels read the device
// block] in rms_norm_cuda.cu). Compiled and host-emulation-tested; not yet run on a GPU.
//
// Note [SwiGLU launch]
// 256 threads a block, one output element a thread (grid-stride), the grid from the host copy's
// rows * H, at most 4096 blocks; the kernel's count and strides come from the device block.
#include <cuda_runtime.h>

#include "ops/activation/swiglu_cuda_core.hpp"

namespace npugraph::ops::swiglu_impl {
namespace {

namespace cc = cuda_core;

__global__ void swiglu_kernel(const SwigluParams* pp) {
  const SwigluParams& p = *pp;
  const std::int64_t n = p.rows * p.H;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride)
    cc::element(p, k);
}

}  // namespace

void swiglu_cuda(const void* params, std::size_t, const void* device_params, void* stream) {
  const auto& p = *static_cast<const SwigluParams*>(params);
  swiglu_kernel<<<cc::blocks_for(p.rows * p.H), cc::kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const SwigluParams*>(device_params));
}

}  // namespace npugraph::ops::swiglu_impl
