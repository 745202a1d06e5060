// Rows of float32, float16 or bfloat16 values to and from float32, with SIMD on every Highway
// target, bit for bit the scalar conversions of npugraph/dtype.hpp (f16_bits_to_f32,
// f32_to_f16_bits, f32_to_bf16_bits: round to nearest even, NaN kept quiet, overflow to infinity).
//
// Note [Exact float rows]
// The conversions are integer operations on the bits, the scalar functions' cases lane by lane,
// not the target's float16 instructions: Highway's float16 PromoteTo/DemoteTo on targets without
// F16C (SSE4, SCALAR) neither round nor map infinities and NaN, and its bfloat16 DemoteTo
// truncates. So a kernel gives the same bits whichever target runs it, and the same bits as the
// element-at-a-time code it replaces (tests/ops/test_float_rows.cpp checks every float16 and
// bfloat16 value, and every float32 exponent with the rounding cases, on every target).
#pragma once

#include <cstdint>

#include "npugraph/dtype.hpp"

namespace npugraph::ops {

// dst[i] = float(src[i]) for i < n; `src` holds n contiguous values of `dtype` (f32, f16, bf16).
void load_row_f32(const void* src, DType dtype, std::int64_t n, float* dst);

// dst[i] = T(src[i]) for i < n, T the storage type of `dtype` (f32, f16, bf16); `dst` holds n
// contiguous values.
void store_row_f32(const float* src, std::int64_t n, void* dst, DType dtype);

}  // namespace npugraph::ops
