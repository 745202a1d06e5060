// Float rows to and from float32, compiled once per Highway target (float_rows.hpp,
// Note [Exact float rows]).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/convert/float_rows_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "ops/convert/float_load-inl.h"
#include "ops/convert/float_rows.hpp"

HWY_BEFORE_NAMESPACE();
namespace npugraph::ops::float_rows_impl {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DU = hn::ScalableTag<std::uint32_t>;
using DI = hn::RebindToSigned<DU>;
using DF = hn::RebindToFloat<DU>;
using DU16 = hn::Rebind<std::uint16_t, DU>;
using VU = hn::Vec<DU>;
using VF = hn::Vec<DF>;

// f32_to_f16_bits, lane by lane (the 16 bits in a 32-bit lane).
HWY_INLINE VU F32ToF16(VF f) {
  const DU du;
  const VU one = hn::Set(du, 1u);
  const VU x = hn::BitCast(du, f);
  const VU sign = hn::And(hn::ShiftRight<16>(x), hn::Set(du, 0x8000u));
  const VU exp = hn::ShiftRight<23>(hn::And(x, hn::Set(du, 0x7fffffffu)));
  const VU mant = hn::And(x, hn::Set(du, 0x7fffffu));
  // Normal in half (113 <= exp <= 142): rebias, round to nearest even on bit 13 (a carry into the
  // exponent is correct, up to infinity).
  const VU rebiased = hn::Sub(hn::And(x, hn::Set(du, 0x7fffffffu)), hn::Set(du, 112u << 23));
  const VU normal = hn::ShiftRight<13>(
      hn::Add(rebiased, hn::Add(hn::Set(du, 0xfffu), hn::And(hn::ShiftRight<13>(x), one))));
  // Subnormal in half (102 <= exp <= 112): the 24-bit significand shifted right by 126 - exp
  // (14 to 24; clamped there for the lanes this case does not select), rounded to nearest even.
  const VU m = hn::Or(mant, hn::Set(du, 0x800000u));
  const VU shift = hn::Min(hn::Max(hn::Sub(hn::Set(du, 126u), hn::Min(exp, hn::Set(du, 126u))),
                                   hn::Set(du, 14u)),
                           hn::Set(du, 24u));
  const VU r = m >> shift;
  const VU half = one << hn::Sub(shift, one);
  const VU rem = hn::And(m, hn::Sub(one << shift, one));
  const auto up = hn::Or(hn::Gt(rem, half),
                         hn::And(hn::Eq(rem, half), hn::Eq(hn::And(r, one), one)));
  const VU sub = hn::Add(r, hn::IfThenElseZero(up, one));
  // Infinity, or NaN kept quiet with the top of its payload.
  const VU inf = hn::Set(du, 0x7c00u);
  const VU nan = hn::IfThenElseZero(hn::Ne(mant, hn::Zero(du)),
                                    hn::Or(hn::Set(du, 0x200u), hn::ShiftRight<13>(mant)));
  VU bits = hn::IfThenElseZero(hn::Gt(exp, hn::Set(du, 101u)), sub);  // below: zero
  bits = hn::IfThenElse(hn::Gt(exp, hn::Set(du, 112u)), normal, bits);
  bits = hn::IfThenElse(hn::Gt(exp, hn::Set(du, 142u)), inf, bits);
  bits = hn::IfThenElse(hn::Eq(exp, hn::Set(du, 255u)), hn::Or(inf, nan), bits);
  return hn::Or(sign, bits);
}

// f32_to_bf16_bits, lane by lane.
HWY_INLINE VU F32ToBf16(VF f) {
  const DU du;
  const VU x = hn::BitCast(du, f);
  const VU hi = hn::ShiftRight<16>(x);
  const VU rounded =
      hn::ShiftRight<16>(hn::Add(x, hn::Add(hn::Set(du, 0x7fffu), hn::And(hi, hn::Set(du, 1u)))));
  const auto is_nan = hn::Gt(hn::And(x, hn::Set(du, 0x7fffffffu)), hn::Set(du, 0x7f800000u));
  return hn::IfThenElse(is_nan, hn::Or(hi, hn::Set(du, 0x40u)), rounded);
}

HWY_INLINE void Store16(VU v, std::uint16_t* p) {
  hn::StoreU(hn::DemoteTo(DU16(), hn::BitCast(DI(), v)), DU16(), p);  // every lane < 2^16
}

void LoadRow(const void* src, DType dtype, std::int64_t n, float* dst) {
  const DF df;
  const auto L = static_cast<std::int64_t>(hn::Lanes(df));
  const auto* s = static_cast<const std::uint16_t*>(src);
  std::int64_t i = 0;
  if (dtype == DType::f16) {
    for (; i + L <= n; i += L) hn::StoreU(convert::HWY_NAMESPACE::LoadF16(df, s + i), df, dst + i);
    for (; i < n; ++i) dst[i] = f16_bits_to_f32(s[i]);
  } else {  // bf16
    for (; i + L <= n; i += L) hn::StoreU(convert::HWY_NAMESPACE::LoadBf16(df, s + i), df, dst + i);
    for (; i < n; ++i) dst[i] = bf16_bits_to_f32(s[i]);
  }
}

void StoreRow(const float* src, std::int64_t n, void* dst, DType dtype) {
  const DF df;
  const auto L = static_cast<std::int64_t>(hn::Lanes(df));
  auto* d = static_cast<std::uint16_t*>(dst);
  std::int64_t i = 0;
  if (dtype == DType::f16) {
    for (; i + L <= n; i += L) Store16(F32ToF16(hn::LoadU(df, src + i)), d + i);
    for (; i < n; ++i) d[i] = f32_to_f16_bits(src[i]);
  } else {  // bf16
    for (; i + L <= n; i += L) Store16(F32ToBf16(hn::LoadU(df, src + i)), d + i);
    for (; i < n; ++i) d[i] = f32_to_bf16_bits(src[i]);
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
}  // namespace float_rows_impl

void load_row_f32(const void* src, DType dtype, std::int64_t n, float* dst) {
  if (n <= 0) return;
  if (dtype == DType::f32) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
    return;
  }
  HWY_DYNAMIC_DISPATCH(float_rows_impl::LoadRow)(src, dtype, n, dst);
}

void store_row_f32(const float* src, std::int64_t n, void* dst, DType dtype) {
  if (n <= 0) return;
  if (dtype == DType::f32) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
    return;
  }
  HWY_DYNAMIC_DISPATCH(float_rows_impl::StoreRow)(src, n, dst, dtype);
}

}  // namespace npugraph::ops
#endif  // HWY_ONCE
