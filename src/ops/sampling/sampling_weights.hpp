// The unnormalised probabilities of `sample` (sampling.hpp): w = exp((x - max) * inv_t) in float32
// with Highway's vectorised Exp, NaN logits weighted 0, the argument clamped to >= -FLT_MAX (so
// -inf logits weigh 0). Element-wise: a value does not depend on its neighbours or on n, so the
// kernel may compute any subset of a row with it (sampling_simd.cpp).
#pragma once

#include <cstdint>

namespace npugraph::ops::sampling_impl {

void exp_weights(const float* x, std::int64_t n, float max, float inv_t, float* w);

}  // namespace npugraph::ops::sampling_impl
