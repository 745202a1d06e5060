// The linear / weight_quant_linear CUDA kernel: Note [Linear on CUDA] in linear_cuda_core.hpp. It
// reads its block from device memory only, the grid from the host copy (Note [Decode-op CUDA
// kernels read the device block] in rms_norm_cuda.cu). No cuBLAS: one kernel for every weight
// format keeps the link (static cudart only) and the wheel as they were. Compiled and
// host-emulation-tested; not yet run on a GPU.
//
// Note [Linear launch]
// 128 threads a block = 4 warps, a warp per weight row (grid-stride over the device block's N),
// the grid from the host copy's N / 4, at most 4096 blocks; the butterfly is __shfl_xor_sync over
// the full warp (every lane of a warp has the same row, so all 32 take part).
#include <cuda_runtime.h>

#include "ops/linear/linear_cuda_core.hpp"

namespace npugraph::ops::linear_impl {
namespace {

namespace cc = cuda_core;

__global__ void linear_kernel(const LinearParams* pp) {
  const LinearParams& p = *pp;
  const int lane = static_cast<int>(threadIdx.x) % cc::kWarp;
  const std::int64_t warp = static_cast<std::int64_t>(blockIdx.x) * cc::kWarpsPerBlock + threadIdx.x / cc::kWarp;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * cc::kWarpsPerBlock;
  for (std::int64_t n = warp; n < p.N; n += warps)
    for (std::int64_t t0 = 0; t0 < p.T; t0 += cc::kRowsPerPass) {
      const int rows = static_cast<int>(p.T - t0 < cc::kRowsPerPass ? p.T - t0 : cc::kRowsPerPass);
      float acc[cc::kRowsPerPass];
      cc::lane_chains(p, t0, rows, n, lane, acc);
      for (int r = 0; r < cc::kRowsPerPass; ++r)
        for (int off = cc::kWarp / 2; off > 0; off /= 2)
          acc[r] = cc::butterfly(acc[r], __shfl_xor_sync(0xffffffffu, acc[r], off));
      if (lane == 0)
        for (int r = 0; r < rows; ++r) cc::finish(p, t0 + r, n, acc[r]);
    }
}

}  // namespace

void linear_cuda(const void* params, std::size_t, const void* device_params, void* stream) {
  const auto& p = *static_cast<const LinearParams*>(params);
  linear_kernel<<<cc::blocks_for(p.N, cc::kWarpsPerBlock), cc::kWarp * cc::kWarpsPerBlock, 0,
                  static_cast<cudaStream_t>(stream)>>>(static_cast<const LinearParams*>(device_params));
}

}  // namespace npugraph::ops::linear_impl
