// The rotary_embedding CUDA kernel: Note [RoPE on CUDA] in rope_cuda_core.hpp. It reads its block
// from device memory only, the grid from the host copy (Note [Decode-op CUDA kernels read the
// device block] in rms_norm_cuda.cu). Compiled and host-emulation-tested; not yet run on a GPU.
//
// Note [RoPE launch]
// 256 threads a block, one work item a thread (grid-stride), the grid sized from the host copy's
// T * heads * (rot / 2 + D - rot), at most 4096 blocks. The kernel recomputes the count from the
// device block, so an update with other counts is still covered; the angle's pow / cos / sin run
// per item (no table in shared memory: a decode step rotates a few thousand pairs).
#include <cuda_runtime.h>

#include "ops/rope/rope_cuda_core.hpp"

namespace npugraph::ops::rope_impl {
namespace {

namespace cc = cuda_core;

__global__ void rope_kernel(const RopeParams* pp) {
  const RopeParams& p = *pp;
  const std::int64_t n = cc::item_count(p);
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride)
    cc::item(p, k);
}

}  // namespace

void rope_cuda(const void* params, std::size_t, const void* device_params, void* stream) {
  const auto& p = *static_cast<const RopeParams*>(params);
  rope_kernel<<<cc::blocks_for(cc::item_count(p)), cc::kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const RopeParams*>(device_params));
}

}  // namespace npugraph::ops::rope_impl
