// Float32, float16, bfloat16 and int8 values loaded as float32 vectors, and float32 vectors stored
// as float16 or bfloat16, on every Highway target exactly as npugraph/dtype.hpp converts them (Note [Exact float rows] in float_rows.hpp): float16
// through the target's instruction where it has one (F16C: AVX2 and up, exact), through integer
// operations elsewhere (Highway's own emulation, on SSE4 and SCALAR, turns infinities and NaN into
// finite numbers); stores through integer operations on every target (Highway's float16 DemoteTo
// does not round on SSE4 and SCALAR, its bfloat16 DemoteTo truncates on all). The kernels that
// read or write float16 (FIA, linear, swiglu) convert through here.
//
// Include guard for per-target re-inclusion (Highway's convention).
#if defined(NPUGRAPH_OPS_CONVERT_FLOAT_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NPUGRAPH_OPS_CONVERT_FLOAT_CONVERT_INL_H_
#undef NPUGRAPH_OPS_CONVERT_FLOAT_CONVERT_INL_H_
#else
#define NPUGRAPH_OPS_CONVERT_FLOAT_CONVERT_INL_H_
#endif

#include <cstdint>
#include <type_traits>

#include "hwy/highway.h"
#include "npugraph/dtype.hpp"

HWY_BEFORE_NAMESPACE();
namespace npugraph::ops::convert {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// f16_bits_to_f32, lane by lane (h: the 16 bits in 32-bit lanes).
template <class DF>
HWY_INLINE hn::Vec<DF> F16BitsToF32(DF df, hn::Vec<hn::RebindToUnsigned<DF>> h) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  using VU = hn::Vec<decltype(du)>;
  const VU sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  const VU exp = hn::And(hn::ShiftRight<10>(h), hn::Set(du, 0x1fu));
  const VU mant = hn::And(h, hn::Set(du, 0x3ffu));
  const VU normal =
      hn::Or(hn::ShiftLeft<23>(hn::Add(exp, hn::Set(du, 112u))), hn::ShiftLeft<13>(mant));
  // Infinity, or NaN made quiet.
  const VU special =
      hn::Or(hn::Or(hn::Set(du, 0x7f800000u), hn::ShiftLeft<13>(mant)),
             hn::IfThenElseZero(hn::Ne(mant, hn::Zero(du)), hn::Set(du, 0x00400000u)));
  // Zero or subnormal: mant * 2^-24, exact (a float32 normal number).
  const VU sub = hn::BitCast(
      du, hn::Mul(hn::ConvertTo(df, hn::BitCast(di, mant)), hn::Set(df, 5.9604644775390625e-8f)));
  VU bits = hn::IfThenElse(hn::Eq(exp, hn::Zero(du)), sub, normal);
  bits = hn::IfThenElse(hn::Eq(exp, hn::Set(du, 0x1fu)), special, bits);
  return hn::BitCast(df, hn::Or(sign, bits));
}

// Lanes(df) float16 values at p.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadF16(DF df, const void* p) {
#if HWY_TARGET >= HWY_SSE4 || defined(HWY_DISABLE_F16C)  // no F16C (Highway emulates it then)
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<std::uint16_t, DF> du16;
  return F16BitsToF32(df, hn::PromoteTo(du, hn::LoadU(du16, static_cast<const std::uint16_t*>(p))));
#else
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, static_cast<const hwy::float16_t*>(p)));
#endif
}

// Lanes(df) bfloat16 values at p (the bits shifted up: exact on every target).
template <class DF>
HWY_INLINE hn::Vec<DF> LoadBf16(DF df, const void* p) {
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<std::uint16_t, DF> du16;
  return hn::BitCast(
      df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(du16, static_cast<const std::uint16_t*>(p)))));
}

// Lanes(df) values of T (float, half, bfloat16, int8) at p as float32.
template <class T, class DF>
HWY_INLINE hn::Vec<DF> LoadAsFloat(DF df, const T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, float>) {
    return hn::LoadU(df, p);
  } else if constexpr (std::is_same_v<T, half>) {
    return LoadF16(df, p);
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    return LoadBf16(df, p);
  } else {
    static_assert(std::is_same_v<T, std::int8_t>);
    const hn::Rebind<std::int32_t, DF> di;
    const hn::Rebind<std::int8_t, DF> d8;
    return hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, p)));
  }
}

// f32_to_f16_bits, lane by lane (the 16 bits in a 32-bit lane).
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> F32ToF16Bits(DF, hn::Vec<DF> f) {
  const hn::RebindToUnsigned<DF> du;
  using VU = hn::Vec<decltype(du)>;
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
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> F32ToBf16Bits(DF, hn::Vec<DF> f) {
  const hn::RebindToUnsigned<DF> du;
  using VU = hn::Vec<decltype(du)>;
  const VU x = hn::BitCast(du, f);
  const VU hi = hn::ShiftRight<16>(x);
  const VU rounded =
      hn::ShiftRight<16>(hn::Add(x, hn::Add(hn::Set(du, 0x7fffu), hn::And(hi, hn::Set(du, 1u)))));
  const auto is_nan = hn::Gt(hn::And(x, hn::Set(du, 0x7fffffffu)), hn::Set(du, 0x7f800000u));
  return hn::IfThenElse(is_nan, hn::Or(hi, hn::Set(du, 0x40u)), rounded);
}


// Lanes(df) values stored at p as T (float, half, bfloat16), exactly as T(float) rounds.
template <class T, class DF>
HWY_INLINE void StoreAsType(DF df, hn::Vec<DF> v, T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, float>) {
    hn::StoreU(v, df, p);
  } else {
    static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>);
    const hn::RebindToSigned<DF> di;
    const hn::Rebind<std::uint16_t, DF> du16;
    hn::Vec<hn::RebindToUnsigned<DF>> bits;
    if constexpr (std::is_same_v<T, half>) bits = F32ToF16Bits(df, v);
    else bits = F32ToBf16Bits(df, v);
    hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di, bits)), du16,  // every lane < 2^16
               reinterpret_cast<std::uint16_t*>(p));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops::convert
HWY_AFTER_NAMESPACE();

#endif  // NPUGRAPH_OPS_CONVERT_FLOAT_CONVERT_INL_H_
