// Float rows to and from float32, compiled once per Highway target (float_rows.hpp,
// Note [Exact float rows]).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/convert/float_rows_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "ops/convert/float_convert-inl.h"
#include "ops/convert/float_rows.hpp"

HWY_BEFORE_NAMESPACE();
namespace npugraph::ops::float_rows_impl {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace cv = convert::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

void LoadRow(const void* src, DType dtype, std::int64_t n, float* dst) {
  const DF df;
  const auto L = static_cast<std::int64_t>(hn::Lanes(df));
  const auto* s = static_cast<const std::uint16_t*>(src);
  std::int64_t i = 0;
  if (dtype == DType::f16) {
    for (; i + L <= n; i += L) hn::StoreU(cv::LoadF16(df, s + i), df, dst + i);
    for (; i < n; ++i) dst[i] = f16_bits_to_f32(s[i]);
  } else {  // bf16
    for (; i + L <= n; i += L) hn::StoreU(cv::LoadBf16(df, s + i), df, dst + i);
    for (; i < n; ++i) dst[i] = bf16_bits_to_f32(s[i]);
  }
}

void StoreRow(const float* src, std::int64_t n, void* dst, DType dtype) {
  const DF df;
  const auto L = static_cast<std::int64_t>(hn::Lanes(df));
  std::int64_t i = 0;
  if (dtype == DType::f16) {
    auto* d = static_cast<half*>(dst);
    for (; i + L <= n; i += L) cv::StoreAsType(df, hn::LoadU(df, src + i), d + i);
    for (; i < n; ++i) d[i] = half(src[i]);
  } else {  // bf16
    auto* d = static_cast<bfloat16*>(dst);
    for (; i + L <= n; i += L) cv::StoreAsType(df, hn::LoadU(df, src + i), d + i);
    for (; i < n; ++i) d[i] = bfloat16(src[i]);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops::float_rows_impl
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace npugraph::ops {
namespace float_rows_impl {
HWY_EXPORT(LoadRow);
HWY_EXPORT(StoreRow);
// Dispatched from this namespace: with HWY_COMPILE_ONLY_STATIC (the sanitizer builds) the dispatch
// names the target's namespace, which nests this one's functions.
void load_row(const void* src, DType dtype, std::int64_t n, float* dst) {
  HWY_DYNAMIC_DISPATCH(LoadRow)(src, dtype, n, dst);
}
void store_row(const float* src, std::int64_t n, void* dst, DType dtype) {
  HWY_DYNAMIC_DISPATCH(StoreRow)(src, n, dst, dtype);
}
}  // namespace float_rows_impl

void load_row_f32(const void* src, DType dtype, std::int64_t n, float* dst) {
  if (n <= 0) return;
  if (dtype == DType::f32) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
    return;
  }
  float_rows_impl::load_row(src, dtype, n, dst);
}

void store_row_f32(const float* src, std::int64_t n, void* dst, DType dtype) {
  if (n <= 0) return;
  if (dtype == DType::f32) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
    return;
  }
  float_rows_impl::store_row(src, n, dst, dtype);
}

}  // namespace npugraph::ops
#endif  // HWY_ONCE
