// The parameter block of rotary_embedding (rope.cpp) and its CUDA launcher (rope_cuda.cu; built
// with the CUDA backend only). Light on includes: nvcc compiles it (rope_cuda.cu).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "npugraph/dtype.hpp"

namespace npugraph::ops::rope_impl {

inline constexpr std::int64_t kMaxHeadDim = 1024;

struct RopeParams {
  const std::int32_t* positions = nullptr;
  const void* x = nullptr;
  void* out = nullptr;
  std::int64_t T = 0, heads = 0, D = 0, rot = 0;
  double theta = 0;
  double freq_scale = 1.0;
  const float* freq_factors = nullptr;  // rot / 2 divisors, or null (Note [RoPE scaling])
  bool neox = true;  // RopeStyle::neox pairs (i, i + rot / 2), else ::norm (2i, 2i + 1)
  DType x_dtype = DType::f32, out_dtype = DType::f32;
};

#if defined(__CUDACC__)
#define NG_ROPE_HD __host__ __device__
#else
#define NG_ROPE_HD
#endif

// Pair i's angle per position (Note [RoPE scaling] in rope.hpp), in float64 on host and device.
NG_ROPE_HD inline double inv_freq(const RopeParams& p, std::int64_t i) {
  double f = p.freq_scale * pow(p.theta, -2.0 * static_cast<double>(i) / static_cast<double>(p.rot));
  if (p.freq_factors != nullptr) f /= static_cast<double>(p.freq_factors[i]);
  return f;
}

// Token t of float32 x into float32 out on the machine's SIMD target, with the scalar kernel's bits
// (rope_simd.cpp); cs: the cos of pairs 0..rot/2-1, then their sin.
void rope_token_f32(const RopeParams& p, std::int64_t t, const float* cs);

void rope_cuda(const void* params, std::size_t size, const void* device_params, void* stream);

}  // namespace npugraph::ops::rope_impl
