// Element helpers of the FIA CPU kernels (FiaLaunch, the simple kernel, the fast kernels' host
// side): element loads and the int8 output rounding.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "npugraph/dtype.hpp"

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

}  // namespace npugraph::ops::attention
