// The reshape_and_cache CUDA kernel: Note [KV cache write on CUDA] in cache_cuda_core.hpp. It
// reads its block from device memory only, the grid from the host copy (Note [Decode-op CUDA
// kernels read the device block] in rms_norm_cuda.cu). Compiled and host-emulation-tested; not
// yet run on a GPU.
//
// Note [KV cache launch]
// One 256-thread block per token (grid-stride over the device block's T), the grid from the
// host copy's T, at most 4096 blocks; __syncthreads_or joins phase 1's verdicts.
#include <cuda_runtime.h>

#include "ops/kv_cache/cache_cuda_core.hpp"

namespace npugraph::ops::cache_impl {
namespace {

namespace cc = cuda_core;

__global__ void cache_kernel(const CacheParams* pp) {
  const CacheParams& p = *pp;
  for (std::int64_t t = blockIdx.x; t < p.T; t += gridDim.x) {
    const int skip = __syncthreads_or(cc::skip_share(p, t, threadIdx.x, blockDim.x) ? 1 : 0);
    if (!skip && p.slots[t] >= 0)
      for (std::int64_t i = threadIdx.x; i < p.H; i += blockDim.x) cc::copy_element(p, t, i);
  }
}

}  // namespace

void cache_cuda(const void* params, std::size_t, const void* device_params, void* stream) {
  const auto& p = *static_cast<const CacheParams*>(params);
  cache_kernel<<<cc::blocks_for(p.T, 1), cc::kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const CacheParams*>(device_params));
}

}  // namespace npugraph::ops::cache_impl
