// The embedding CUDA kernel: Note [Embedding on CUDA] in embedding_cuda_core.hpp. It reads its
// block from device memory only, the grid from the host copy (Note [Decode-op CUDA kernels read
// the device block] in rms_norm_cuda.cu). Compiled and host-emulation-tested; not yet run on a GPU.
//
// Note [Embedding launch]
// 256 threads a block, one output element a thread (grid-stride over T * H from the device
// block); the grid from the host copy's T * H, at most 4096 blocks. A quantised element reads its
// block's scale itself (no shared staging): the rows of a decode step are a few KiB.
#include <cuda_runtime.h>

#include "ops/embedding/embedding_cuda_core.hpp"

namespace npugraph::ops::embedding_impl {
namespace {

namespace cc = cuda_core;

__global__ void embedding_kernel(const EmbeddingParams* pp) {
  const EmbeddingParams& p = *pp;
  const std::int64_t n = p.T * p.H;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride)
    cc::element(p, k);
}

}  // namespace

void embedding_cuda(const void* params, std::size_t, const void* device_params, void* stream) {
  const auto& p = *static_cast<const EmbeddingParams*>(params);
  embedding_kernel<<<cc::blocks_for(p.T * p.H), cc::kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const EmbeddingParams*>(device_params));
}

}  // namespace npugraph::ops::embedding_impl
