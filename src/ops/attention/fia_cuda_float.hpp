// The element conversions of the CUDA kernels (float16 / bfloat16 / float32, bit exact, round to
// nearest even, the same on host and device) and a few helpers, as __host__ __device__ code. Split
// from fia_cuda_core.hpp so that other ops' kernels (the decode ops, ops/activation/cuda_io.hpp)
// use them without FIA's parameter block: this header includes only dtype.hpp, which keeps their
// nvcc compiles short.
#pragma once

#include <cstdint>
#include <cstring>

#include "npugraph/dtype.hpp"

#if defined(__CUDACC__)
#define NG_FIA_HD __host__ __device__
#else
#define NG_FIA_HD
#endif

namespace npugraph::ops::attention::cuda_core {

// ---- element conversions (bit exact, round to nearest even; the same on host and device) ----

NG_FIA_HD inline std::uint32_t bits_of(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

NG_FIA_HD inline float float_of(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

NG_FIA_HD inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return float_of(sign | 0x7f800000u | (man << 13));  // inf, NaN
  if (exp == 0) {  // zero, subnormal: man * 2^-24 (exact in float)
    const float v = static_cast<float>(man) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return float_of(sign | ((exp + 112u) << 23) | (man << 13));
}

NG_FIA_HD inline std::uint16_t float_to_half(float f) {
  const std::uint32_t x = bits_of(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN (quiet)
  if (ax >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (ax < 0x38800000u) {  // below 2^-14: a subnormal half or zero, in units of 2^-24
    if (ax <= 0x33000000u) return static_cast<std::uint16_t>(sign);  // <= 2^-25: rounds to 0
    const std::uint32_t e = ax >> 23;                  // 102 ... 112
    const std::uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - e;              // 14 ... 24
    std::uint32_t q = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<std::uint16_t>(sign | q);
  }
  const std::uint32_t r = ax - 0x38000000u;  // rebias the exponent (127 -> 15)
  std::uint32_t q = r >> 13;
  const std::uint32_t rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;  // a carry raises the exponent
  return static_cast<std::uint16_t>(sign | q);
}

NG_FIA_HD inline float bf16_to_float(std::uint16_t h) {
  return float_of(static_cast<std::uint32_t>(h) << 16);
}

NG_FIA_HD inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t x = bits_of(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Element i of a float16 / bfloat16 / float32 tensor as float32, and the store that rounds once.
NG_FIA_HD inline float load(DType t, const void* base, std::int64_t i) {
  switch (t) {
    case DType::f16: return half_to_float(static_cast<const std::uint16_t*>(base)[i]);
    case DType::bf16: return bf16_to_float(static_cast<const std::uint16_t*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

NG_FIA_HD inline void store(DType t, void* base, std::int64_t i, float v) {
  switch (t) {
    case DType::f16: static_cast<std::uint16_t*>(base)[i] = float_to_half(v); return;
    case DType::bf16: static_cast<std::uint16_t*>(base)[i] = float_to_bf16(v); return;
    default: static_cast<float*>(base)[i] = v; return;
  }
}

// (Bit patterns: std::numeric_limits is constexpr host code, which device code may not call.)
NG_FIA_HD inline float neg_inf() { return float_of(0xff800000u); }
NG_FIA_HD inline float pos_inf() { return float_of(0x7f800000u); }
NG_FIA_HD inline float quiet_nan() { return float_of(0x7fc00000u); }
NG_FIA_HD inline bool is_nan(float x) { return x != x; }
NG_FIA_HD inline std::int64_t min64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
NG_FIA_HD inline std::int64_t max64(std::int64_t a, std::int64_t b) { return a > b ? a : b; }
NG_FIA_HD inline std::int64_t cdiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace npugraph::ops::attention::cuda_core
