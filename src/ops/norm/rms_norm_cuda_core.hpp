// The math of the rms_norm / add_rms_norm CUDA kernel (rms_norm_cuda.cu) as __host__ __device__
// code, so that a host loop can run it as the grid does (tests/ops/test_decode_cuda_emulation.cpp).
//
// Note [RMSNorm on CUDA]
// A thread block per row (grid-stride over rows), in three phases separated by __syncthreads:
//   1. add_rms_norm only: x_out[i] = x1[i] + x2[i] rounded to x_out's dtype (threads stride i);
//   2. threads 0..3 each sum one of the CPU kernel's four float64 lanes (lane j: the squares of
//      elements i + j for the full groups of four; lane 0 also takes the tail), exactly the CPU
//      kernel's order (rms_norm.cpp), into shared memory;
//   3. every thread combines the lanes as the CPU does, ((s0 + s1) + (s2 + s3)) / H, takes
//      rstd = float(1 / sqrt(ms + epsilon)) (IEEE division and square root on both sides), and
//      writes its elements y[i] = (x[i] * rstd) * gamma[i]; thread 0 writes rstd.
// Every rounding step is the CPU kernel's, uncontracted (Note [Uncontracted device arithmetic]),
// so the result is bitwise the CPU op's. Four serial lanes of H / 4 terms are slow for a wide row,
// but a decode row is 576 elements; a tree reduction would change the bits.
#pragma once

#include "ops/activation/cuda_io.hpp"
#include "ops/norm/rms_norm_params.hpp"

namespace npugraph::ops::norm_impl::cuda_core {

using namespace cuda_io;

// Phase 1 (add_rms_norm): element i of row r of x_out.
NG_HD inline void add_element(const RmsNormParams& p, std::int64_t r, std::int64_t i) {
  const std::int64_t at = r * p.H + i;
  store(p.x_out_dtype, p.x_out, at, fadd(load(p.x_dtype, p.x1, at), load(p.x_dtype, p.x2, at)));
}

// The normalised input of row r, element i: x_out (add) or x1.
NG_HD inline float input(const RmsNormParams& p, bool add, std::int64_t r, std::int64_t i) {
  return add ? load(p.x_out_dtype, p.x_out, r * p.H + i) : load(p.x_dtype, p.x1, r * p.H + i);
}

// Phase 2: lane j (0..3) of row r's sum of squares, in the CPU kernel's order.
NG_HD inline double lane_sum(const RmsNormParams& p, bool add, std::int64_t r, int j) {
  double s = 0;
  std::int64_t i = 0;
  for (; i + 4 <= p.H; i += 4) {
    const double v = input(p, add, r, i + j);
    s = dadd(s, dmul(v, v));
  }
  if (j == 0)
    for (; i < p.H; ++i) {
      const double v = input(p, add, r, i);
      s = dadd(s, dmul(v, v));
    }
  return s;
}

// Phase 3: rstd from the four lanes.
NG_HD inline float rstd_of(const RmsNormParams& p, const double s[4]) {
  const double ms = dadd(dadd(s[0], s[1]), dadd(s[2], s[3])) / static_cast<double>(p.H);
  return static_cast<float>(1.0 / sqrt(dadd(ms, p.epsilon)));
}

NG_HD inline void out_element(const RmsNormParams& p, bool add, std::int64_t r, std::int64_t i,
                              float rstd) {
  store(p.y_dtype, p.y, r * p.H + i, fmul(fmul(input(p, add, r, i), rstd), load(p.gamma_dtype, p.gamma, i)));
}

}  // namespace npugraph::ops::norm_impl::cuda_core
