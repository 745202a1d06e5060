// The argmax / sample CUDA kernels: Note [Sampling on CUDA] in sampling_cuda_core.hpp. They read
// their blocks from device memory only, the grid from the host copy (Note [Decode-op CUDA kernels
// read the device block] in rms_norm_cuda.cu). Compiled and host-emulation-tested; not yet run on
// a GPU.
//
// Note [Sampling launch]
// One 256-thread block per row (grid-stride over the device block's B), the grid from the host
// copy's B, at most 4096 blocks; shared memory: 256 (value, index) pairs, 256 floats and 256
// doubles (about 7 KiB) for the reductions and the chunk masses.
#include <cuda_runtime.h>

#include "ops/sampling/sampling_cuda_core.hpp"

namespace npugraph::ops::sampling_impl {
namespace {

namespace cc = cuda_core;

constexpr int kThreads = cc::kThreads;

// The block's best pair of row x (every thread returns it).
__device__ cc::Best block_argmax(const float* x, std::int64_t V, cc::Best* red) {
  red[threadIdx.x] = cc::argmax_share(x, V, threadIdx.x, kThreads);
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) red[threadIdx.x] = cc::better(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  const cc::Best b = red[0];
  __syncthreads();
  return b;
}

__global__ void argmax_kernel(const ArgmaxParams* pp) {
  const ArgmaxParams& p = *pp;
  __shared__ cc::Best red[kThreads];
  for (std::int64_t r = blockIdx.x; r < p.B; r += gridDim.x) {
    const cc::Best b = block_argmax(p.logits + r * p.V, p.V, red);
    if (threadIdx.x == 0) p.out[r] = static_cast<std::int32_t>(b.i < p.V ? b.i : 0);
  }
}

__global__ void sample_kernel(const SampleParams* pp) {
  const SampleParams& p = *pp;
  __shared__ cc::Best red[kThreads];
  __shared__ float maxes[kThreads];
  __shared__ double mass[kThreads];
  for (std::int64_t r = blockIdx.x; r < p.B; r += gridDim.x) {
    const float* x = p.logits + r * p.V;
    std::int32_t token = 0;
    bool drawn = false;
    if (row_sampling(p, r).temperature != 0) {
      maxes[threadIdx.x] = cc::max_share(x, p.V, threadIdx.x, kThreads);
      __syncthreads();
      for (int s = kThreads / 2; s > 0; s /= 2) {
        if (static_cast<int>(threadIdx.x) < s && maxes[threadIdx.x + s] > maxes[threadIdx.x])
          maxes[threadIdx.x] = maxes[threadIdx.x + s];
        __syncthreads();
      }
      const float m = maxes[0];
      if (cc::is_finite(m)) {
        const float inv_t = cc::inv_temperature(p, r);
        mass[threadIdx.x] = cc::chunk_mass(x, p.V, m, inv_t, threadIdx.x, kThreads);
        __syncthreads();
        if (threadIdx.x == 0) token = cc::draw(x, p.V, m, inv_t, mass, kThreads, cc::row_uniform(p, r));
        drawn = true;
      }
      __syncthreads();
    }
    if (!drawn) {
      const cc::Best b = block_argmax(x, p.V, red);
      token = static_cast<std::int32_t>(b.i < p.V ? b.i : 0);
    }
    if (threadIdx.x == 0) {
      p.out[r] = token;
      if (p.advance_steps) p.steps[r] += 1;
    }
    __syncthreads();
  }
}

}  // namespace

void argmax_cuda(const void* params, std::size_t, const void* device_params, void* stream) {
  const auto& p = *static_cast<const ArgmaxParams*>(params);
  argmax_kernel<<<cc::blocks_for(p.B, 1), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const ArgmaxParams*>(device_params));
}

void sample_cuda(const void* params, std::size_t, const void* device_params, void* stream) {
  const auto& p = *static_cast<const SampleParams*>(params);
  sample_kernel<<<cc::blocks_for(p.B, 1), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const SampleParams*>(device_params));
}

}  // namespace npugraph::ops::sampling_impl
