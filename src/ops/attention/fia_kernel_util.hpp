// Helpers both FIA CPU kernels share (the simple kernel in fia_kernel.cpp, the fast ones behind
// fia_fast_launch.cpp): element loads, the int8 output rounding, and the left-padding read.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "npugraph/dtype.hpp"
#include "npugraph/error.hpp"

namespace npugraph::ops::attention {

// Element i of a float32/float16/bfloat16/int8 tensor, as float32.
inline float load_f32(const void* base, DType t, std::int64_t i) {
  switch (t) {
    case DType::f16: return static_cast<float>(static_cast<const half*>(base)[i]);
    case DType::bf16: return static_cast<float>(static_cast<const bfloat16*>(base)[i]);
    case DType::i8: return static_cast<float>(static_cast<const std::int8_t*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

// Round half to even and saturate to int8 (NaN gives 0), independent of the FP rounding mode.
inline std::int8_t quantize_i8(float y) {
  if (std::isnan(y)) return 0;
  float r = std::floor(y);
  const float frac = y - r;
  if (frac > 0.5f || (frac == 0.5f && std::fmod(r, 2.0f) != 0.0f)) r += 1.0f;
  return static_cast<std::int8_t>(std::clamp(r, -128.0f, 127.0f));
}

// Reads an effective left padding (< 0 reads as 0) and checks every batch's start (the tensor may
// have changed since the op checked it). -1 when there is no padding tensor.
inline std::int64_t read_padding(const std::int64_t* pad, const char* name, std::int64_t seq,
                                 const std::int64_t* actual, std::int64_t batch) {
  if (!pad) return -1;
  const std::int64_t x = std::max<std::int64_t>(0, *pad);
  for (std::int64_t b = 0; b < batch; ++b)
    if (seq - x - actual[b] < 0)
      NG_THROW(TaskError, "fused_infer_attention_score: ", name, " = ", x, ": batch ", b,
               "'s valid rows would start at ", seq, " - ", x, " - ", actual[b],
               " < 0 when the kernel ran");
  return x;
}

}  // namespace npugraph::ops::attention
