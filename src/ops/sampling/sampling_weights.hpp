// The unnormalised probabilities of `sample` (sampling.hpp): w = exp((x - max) * inv_t) in float32
// with Highway's vectorised Exp, NaN logits weighted 0, the argument clamped to >= -FLT_MAX (so
// -inf logits weigh 0). Element-wise: a value does not depend on its neighbours or on n, so the
// kernel may compute any subset of a row with it (sampling_simd.cpp).
#pragma once

#include <cstdint>

namespace npugraph::ops::sampling_impl {

void exp_weights(const float* x, std::int64_t n, float max, float inv_t, float* w);

// argmax's vectorised pass (sampling.cpp's argmax_row): when every x[0, n) is finite (n > 0),
// the first index of the largest value in *index, and true; false otherwise (a NaN or an
// infinity somewhere: the caller's exact scan decides). One pass: each lane keeps its largest
// value and that value's first index, and the lowest index among the lanes holding the maximum
// is the row's first.
bool argmax_finite(const float* x, std::int64_t n, std::int32_t* index);

}  // namespace npugraph::ops::sampling_impl
