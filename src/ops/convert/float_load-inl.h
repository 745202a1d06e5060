// Float32, float16, bfloat16 and int8 values loaded as float32 vectors, on every Highway target
// exactly as npugraph/dtype.hpp converts them (Note [Exact float rows] in float_rows.hpp): float16
// through the target's instruction where it has one (F16C: AVX2 and up, exact), through integer
// operations elsewhere (Highway's own emulation, on SSE4 and SCALAR, turns infinities and NaN into
// finite numbers). The kernels that read float16 (FIA, linear, swiglu) load through here.
//
// Include guard for per-target re-inclusion (Highway's convention).
#if defined(NPUGRAPH_OPS_CONVERT_FLOAT_LOAD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NPUGRAPH_OPS_CONVERT_FLOAT_LOAD_INL_H_
#undef NPUGRAPH_OPS_CONVERT_FLOAT_LOAD_INL_H_
#else
#define NPUGRAPH_OPS_CONVERT_FLOAT_LOAD_INL_H_
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
#if HWY_TARGET >= HWY_SSE4  // no F16C
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

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops::convert
HWY_AFTER_NAMESPACE();

#endif  // NPUGRAPH_OPS_CONVERT_FLOAT_LOAD_INL_H_
