// The math of the swiglu CUDA kernel (swiglu_cuda.cu) as __host__ __device__ code.
//
// Note [SwiGLU on CUDA]
// One thread per output element (grid-stride over rows * H): out = (a * b) / (1 + exp(-a)) with
// the exponent's argument clamped to [-88, 88], the CPU kernel's formula and rounding steps
// (swiglu_params.hpp), uncontracted. Only the exponential differs: the CPU kernel uses Highway's
// vectorised Exp, this one expf (the device's, or the host libm's in the emulation); both are
// within a few ulp of exp, so results match the CPU op to a few float ulp, not bitwise.
#pragma once

#include "ops/activation/cuda_io.hpp"
#include "ops/activation/swiglu_params.hpp"

namespace npugraph::ops::swiglu_impl::cuda_core {

using namespace cuda_io;

NG_HD inline float silu_mul(float a, float b) {
  float na = -a;
  na = na < -88.0f ? -88.0f : (na > 88.0f ? 88.0f : na);
  return fdiv(fmul(a, b), fadd(1.0f, expf(na)));
}

NG_HD inline void element(const SwigluParams& p, std::int64_t k) {
  const std::int64_t r = k / p.H, i = k % p.H;
  const std::int64_t in = r * p.in_stride + i;
  store(p.out_dtype, p.out, k, silu_mul(load(p.in_dtype, p.gate, in), load(p.in_dtype, p.up, in)));
}

}  // namespace npugraph::ops::swiglu_impl::cuda_core
