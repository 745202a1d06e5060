// What the decode-engine ops' CUDA kernels share (norm, rope, activation, embedding, kv_cache,
// linear, sampling: their *_cuda_core.hpp): the __host__ __device__ qualifier, element loads and
// stores that round like the CPU kernels (FIA's bit-exact conversions, fia_cuda_float.hpp), and
// arithmetic that is never contracted.
//
// Note [Uncontracted device arithmetic]
// nvcc fuses a * b + c into one fused multiply-add by default (-fmad=true); the host compiler of
// the CPU kernels does not (the library is built for baseline x86-64, which has no FMA). A kernel
// that must give the CPU kernel's bits therefore writes each rounding step with these helpers:
// on the device they are the _rn intrinsics, which nvcc never fuses; on the host plain operators.
// Where a kernel wants a fused multiply-add (the linear reductions) it calls fmaf on both sides,
// so the host emulation and the GPU still compute the same bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/attention/fia_cuda_float.hpp"

#if defined(__CUDACC__)
#define NG_HD __host__ __device__
#else
#define NG_HD
#endif

namespace npugraph::ops::cuda_io {

using attention::cuda_core::bf16_to_float;
using attention::cuda_core::bits_of;
using attention::cuda_core::float_of;
using attention::cuda_core::half_to_float;
using attention::cuda_core::is_nan;
using attention::cuda_core::load;
using attention::cuda_core::neg_inf;
using attention::cuda_core::quiet_nan;
using attention::cuda_core::store;

#if defined(__CUDA_ARCH__)
NG_HD inline float fmul(float a, float b) { return __fmul_rn(a, b); }
NG_HD inline float fadd(float a, float b) { return __fadd_rn(a, b); }
NG_HD inline float fsub(float a, float b) { return __fsub_rn(a, b); }
NG_HD inline float fdiv(float a, float b) { return __fdiv_rn(a, b); }
NG_HD inline double dmul(double a, double b) { return __dmul_rn(a, b); }
NG_HD inline double dadd(double a, double b) { return __dadd_rn(a, b); }
#else
inline float fmul(float a, float b) { return a * b; }
inline float fadd(float a, float b) { return a + b; }
inline float fsub(float a, float b) { return a - b; }
inline float fdiv(float a, float b) { return a / b; }
inline double dmul(double a, double b) { return a * b; }
inline double dadd(double a, double b) { return a + b; }
#endif

// Grid-stride loops: every kernel here walks its work by the count it reads from the device block
// with a stride of the launched grid, so a block whose counts differ from the ones the grid was
// sized for (a task update of an op without check_update) is still covered completely.
inline constexpr int kThreads = 256;
inline constexpr std::int64_t kMaxBlocks = 4096;

inline unsigned blocks_for(std::int64_t items, std::int64_t per_block = kThreads) {
  const std::int64_t b = (items + per_block - 1) / per_block;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

}  // namespace npugraph::ops::cuda_io
