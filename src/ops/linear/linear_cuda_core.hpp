// The math of the linear / weight_quant_linear CUDA kernel (linear_cuda.cu) as __host__ __device__
// code.
//
// Note [Linear on CUDA]
// A straightforward kernel, correct first: a warp per weight row n (grid-stride over N by warps),
// for all T rows of x, kRowsPerPass rows of x at a time (each weight element, dequantised once
// per pass, feeds that many accumulators). Lane l takes k = l, l + 32, ... — for the block
// formats element l of every block, so a warp reads whole blocks and its lanes share the scale —
// and keeps one float32 fused multiply-add chain per row of x over its k in ascending order;
// then the warp sums its 32 lanes by a butterfly (xor 16, 8, 4, 2, 1), adds the bias and rounds
// once to y's dtype. The weight values are ggml's dequantised values exactly (quant_cuda_core.hpp).
// The emulation runs the same chain and the same butterfly (fmaf on both sides, Note
// [Uncontracted device arithmetic]), so it computes the GPU's bits; the CPU kernel sums in
// another order (Note [Linear kernels]), so CPU and CUDA agree to float32 rounding only
// (tests: within K * 2^-24 * sum |x w| of the float64 reference, the bound of any summation
// order, plus y's rounding). Not tuned: the GEMV reads the
// weights once per pass of kRowsPerPass rows, the GEMM re-reads them from cache T / 4 times,
// and nothing uses tensor cores or cuBLAS.
#pragma once

#include "ops/activation/cuda_io.hpp"
#include "ops/linear/linear_params.hpp"
#include "ops/linear/quant_cuda_core.hpp"

namespace npugraph::ops::linear_impl::cuda_core {

using namespace cuda_io;

inline constexpr int kWarp = 32;
inline constexpr int kWarpsPerBlock = 4;
inline constexpr int kRowsPerPass = 4;

NG_HD inline float weight_at(const LinearParams& p, std::int64_t n, std::int64_t k) {
  const std::byte* row = p.w + n * p.w_row_bytes;
  switch (p.type) {  // the float rows; the block rows with cuda = true are quant_cuda's
    case GgmlType::F32: return load(DType::f32, row, k);
    case GgmlType::F16: return load(DType::f16, row, k);
    case GgmlType::BF16: return load(DType::bf16, row, k);
    default: return quant_cuda::dequant(static_cast<QuantType>(p.type), row, k);
  }
}

// Lane `lane`'s chains for rows [t0, t0 + rows) of x (rows <= kRowsPerPass) and weight row n.
NG_HD inline void lane_chains(const LinearParams& p, std::int64_t t0, int rows, std::int64_t n, int lane,
                              float acc[kRowsPerPass]) {
  for (int r = 0; r < kRowsPerPass; ++r) acc[r] = 0.0f;
  for (std::int64_t k = lane; k < p.K; k += kWarp) {
    const float w = weight_at(p, n, k);
    for (int r = 0; r < rows; ++r) acc[r] = fmaf(p.x[(t0 + r) * p.x_stride + k], w, acc[r]);
  }
}

// One butterfly step as lane `lane` sees it: its value plus its partner's.
NG_HD inline float butterfly(float mine, float partner) { return fadd(mine, partner); }

NG_HD inline void finish(const LinearParams& p, std::int64_t t, std::int64_t n, float sum) {
  const float y = p.bias ? fadd(sum, p.bias[n]) : sum;
  store(p.y_dtype, p.y, t * p.y_stride + n, y);
}

}  // namespace npugraph::ops::linear_impl::cuda_core
