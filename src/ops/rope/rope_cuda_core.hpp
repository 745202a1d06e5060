// The math of the rotary_embedding CUDA kernel (rope_cuda.cu) as __host__ __device__ code.
//
// Note [RoPE on CUDA]
// One thread per work item of a (token, head): items [0, rot / 2) rotate the pair (a, b) of
// Note [RoPE pairing] (rope.hpp) — the thread reads both elements before it writes either, so in
// place is safe — and items [rot / 2, rot / 2 + D - rot) copy the unrotated tail (skipped in
// place). The angle is the CPU kernel's: inv_freq (rope_params.hpp) and pos * inv_freq in
// float64, cos and sin rounded to float, then a * c - b * s and b * c + a * s in float32 with
// every rounding step the CPU's (Note [Uncontracted device arithmetic]). On the host the same code
// calls the same libm, so the emulation is bitwise the CPU op; the device's float64 pow / cos /
// sin are within an ulp or two of libm's, so on a GPU a value may differ in its last float bit
// where the float64 angle's rounding to float is that close to a tie.
#pragma once

#include "ops/activation/cuda_io.hpp"
#include "ops/rope/rope_params.hpp"

namespace npugraph::ops::rope_impl::cuda_core {

using namespace cuda_io;

NG_HD inline std::int64_t items_per_head(const RopeParams& p) { return p.rot / 2 + (p.D - p.rot); }
NG_HD inline std::int64_t item_count(const RopeParams& p) { return p.T * p.heads * items_per_head(p); }

NG_HD inline void item(const RopeParams& p, std::int64_t k) {
  const std::int64_t w = items_per_head(p), half = p.rot / 2;
  const std::int64_t th = k / w, j = k % w;
  const std::int64_t t = th / p.heads;
  const std::int64_t base = th * p.D;
  if (j >= half) {
    if (p.x == p.out) return;
    const std::int64_t d = p.rot + (j - half);
    store(p.out_dtype, p.out, base + d, load(p.x_dtype, p.x, base + d));
    return;
  }
  const double angle = static_cast<double>(p.positions[t]) * inv_freq(p, j);
  const auto c = static_cast<float>(cos(angle));
  const auto s = static_cast<float>(sin(angle));
  const bool neox = p.neox;
  const std::int64_t ia = base + (neox ? j : 2 * j);
  const std::int64_t ib = base + (neox ? j + half : 2 * j + 1);
  const float a = load(p.x_dtype, p.x, ia), b = load(p.x_dtype, p.x, ib);
  store(p.out_dtype, p.out, ia, fsub(fmul(a, c), fmul(b, s)));
  store(p.out_dtype, p.out, ib, fadd(fmul(b, c), fmul(a, s)));
}

}  // namespace npugraph::ops::rope_impl::cuda_core
