// The swiglu kernel, compiled once per Highway target (swiglu_params.hpp).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/activation/swiglu_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "hwy/highway.h"
#include "ops/convert/float_convert-inl.h"
#include "hwy/contrib/math/math-inl.h"
#include "npugraph/kernel.hpp"
#include "ops/activation/swiglu_params.hpp"

HWY_BEFORE_NAMESPACE();
namespace npugraph::ops::swiglu_impl {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr std::int64_t kL = static_cast<std::int64_t>(hn::MaxLanes(DF()));

// Exact on every target (float_convert-inl.h).
template <class T>
HWY_INLINE VF LoadAsFloat(const T* HWY_RESTRICT p) {
  return convert::HWY_NAMESPACE::LoadAsFloat(DF(), p);
}

HWY_INLINE VF Silu_mul(VF a, VF b) {
  const DF df;
  const VF na = hn::Clamp(hn::Neg(a), hn::Set(df, -88.0f), hn::Set(df, 88.0f));
  const VF e = hn::Exp(df, na);
  return hn::Div(hn::Mul(a, b), hn::Add(hn::Set(df, 1.0f), e));
}

HWY_INLINE VF Gelu_mul(VF a, VF b) {
  const DF df;
  const VF inner = hn::Mul(hn::Set(df, 0.7978845608028654f),  // sqrt(2 / pi)
                           hn::MulAdd(hn::Mul(hn::Set(df, 0.044715f), hn::Mul(a, a)), a, a));
  const VF t = hn::Tanh(df, inner);
  return hn::Mul(hn::Mul(hn::Mul(hn::Set(df, 0.5f), a), hn::Add(hn::Set(df, 1.0f), t)), b);
}

template <GateFn kFn>
HWY_INLINE VF Gated(VF a, VF b) {
  if constexpr (kFn == GateFn::gelu_tanh) return Gelu_mul(a, b);
  else return Silu_mul(a, b);
}

template <GateFn kFn, class TI, class TO>
void Rows(const SwigluParams& p, std::int64_t r0, std::int64_t r1) {
  const DF df;
  const auto* gate = static_cast<const TI*>(p.gate);
  const auto* up = static_cast<const TI*>(p.up);
  auto* out = static_cast<TO*>(p.out);
  HWY_ALIGN float buf[kL];
  HWY_ALIGN TI ta[kL], tb[kL];
  for (std::int64_t r = r0; r < r1; ++r) {
    const TI* a = gate + r * p.in_stride;
    const TI* b = up + r * p.in_stride;
    TO* o = out + r * p.H;
    std::int64_t i = 0;
    for (; i + kL <= p.H; i += kL) {
      convert::HWY_NAMESPACE::StoreAsType(df, Gated<kFn>(LoadAsFloat(a + i), LoadAsFloat(b + i)), o + i);
    }
    if (i < p.H) {
      const std::int64_t rem = p.H - i;
      for (std::int64_t j = 0; j < kL; ++j) {
        ta[j] = j < rem ? a[i + j] : TI(0.0f);
        tb[j] = j < rem ? b[i + j] : TI(0.0f);
      }
      hn::Store(Gated<kFn>(LoadAsFloat(ta), LoadAsFloat(tb)), df, buf);
      for (std::int64_t j = 0; j < rem; ++j) o[i + j] = TO(buf[j]);
    }
  }
}

template <class F>
void dispatch(DType t, F&& f) {
  switch (t) {
    case DType::f16: return f(half{});
    case DType::bf16: return f(bfloat16{});
    default: return f(float{});
  }
}

void RunSwiglu(const SwigluParams& p, const ExecContext& ctx) {
  // Rows per chunk: about 16K elements for SiLU; GELU's tanh costs ~3x as much an element, so 4K
  // (Gemma 3's batch of 8 rows of 2048 is two chunks, not one). Rows are independent: the chunks
  // change who computes a row, never its bits.
  const std::int64_t per_chunk = p.fn == GateFn::gelu_tanh ? 4096 : 16384;
  const std::int64_t grain = std::max<std::int64_t>(1, per_chunk / std::max<std::int64_t>(1, p.H));
  dispatch(p.in_dtype, [&](auto ti) {
    dispatch(p.out_dtype, [&](auto to) {
      ctx.parallel_for(p.rows, grain, [&](std::int64_t b, std::int64_t e) {
        if (p.fn == GateFn::gelu_tanh) Rows<GateFn::gelu_tanh, decltype(ti), decltype(to)>(p, b, e);
        else Rows<GateFn::silu, decltype(ti), decltype(to)>(p, b, e);
      });
    });
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops::swiglu_impl
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace npugraph::ops::swiglu_impl {

HWY_EXPORT(RunSwiglu);

void run_swiglu(const SwigluParams& p, const ExecContext& ctx) {
  HWY_DYNAMIC_DISPATCH(RunSwiglu)(p, ctx);
}

}  // namespace npugraph::ops::swiglu_impl
#endif  // HWY_ONCE
