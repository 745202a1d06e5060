// Pieces both linear kernels share (linear_simd.cpp, linear_q8_simd.cpp): the output store and the
// weight prefetch of the GEMV. Plain C++, the same on every Highway target.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hwy/cache_control.h"
#include "npugraph/dtype.hpp"
#include "ops/linear/linear_params.hpp"

namespace npugraph::ops::linear_impl {

// Bytes of weights prefetched ahead of the rows being computed (GEMV; Note [Linear kernels]).
inline constexpr std::int64_t kPrefetchAhead = 6 << 10;

// Prefetches the cache lines of [from, to).
inline void prefetch_range(const std::byte* from, const std::byte* to) {
  const auto line = reinterpret_cast<std::uintptr_t>(from) & ~std::uintptr_t{63};
  for (auto a = line; a < reinterpret_cast<std::uintptr_t>(to); a += 64)
    hwy::Prefetch(reinterpret_cast<const std::byte*>(a));
}

// y[t, n] = v + bias[n], in the output's dtype.
inline void store_out(const LinearParams& p, std::int64_t t, std::int64_t n, float v) {
  if (p.bias) v += p.bias[n];
  const std::int64_t i = t * p.y_stride + n;
  switch (p.y_dtype) {
    case DType::f16: static_cast<half*>(p.y)[i] = half(v); return;
    case DType::bf16: static_cast<bfloat16*>(p.y)[i] = bfloat16(v); return;
    default: static_cast<float*>(p.y)[i] = v; return;
  }
}

}  // namespace npugraph::ops::linear_impl
