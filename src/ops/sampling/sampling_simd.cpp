// exp_weights and argmax_finite (sampling_weights.hpp), compiled once per Highway target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/sampling/sampling_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "ops/sampling/sampling_weights.hpp"

HWY_BEFORE_NAMESPACE();
namespace npugraph::ops::sampling_impl {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

HWY_INLINE VF Weight(VF x, VF max, VF inv_t) {
  const DF df;
  const VF arg = hn::Max(hn::Mul(hn::Sub(x, max), inv_t), hn::Set(df, -FLT_MAX));
  return hn::IfThenZeroElse(hn::IsNaN(x), hn::Exp(df, arg));
}

void ExpWeights(const float* x, std::int64_t n, float max, float inv_t, float* w) {
  const DF df;
  const auto L = static_cast<std::int64_t>(hn::Lanes(df));
  const VF vm = hn::Set(df, max), vt = hn::Set(df, inv_t);
  std::int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(Weight(hn::LoadU(df, x + i), vm, vt), df, w + i);
  if (i < n) {
    HWY_ALIGN float in[hn::MaxLanes(DF())], out[hn::MaxLanes(DF())];
    for (std::int64_t j = 0; j < L; ++j) in[j] = i + j < n ? x[i + j] : max;
    hn::Store(Weight(hn::Load(df, in), vm, vt), df, out);
    for (std::int64_t j = 0; i + j < n; ++j) w[i + j] = out[j];
  }
}

bool ArgmaxFinite(const float* x, std::int64_t n, std::int32_t* index) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  using VI = hn::Vec<decltype(di)>;
  const auto L = static_cast<std::int64_t>(hn::Lanes(df));
  const VF zero = hn::Zero(df);
  VF m = hn::Set(df, -HUGE_VALF), probe = zero;
  VI at = hn::Zero(di), idx = hn::Iota(di, 0);
  const VI step = hn::Set(di, static_cast<std::int32_t>(L));
  std::int64_t i = 0;
  for (; i + L <= n; i += L) {
    const VF v = hn::LoadU(df, x + i);
    probe = hn::Add(probe, hn::Mul(v, zero));  // NaN once any value is NaN or infinite
    const auto gt = hn::Gt(v, m);              // strict: a lane keeps its first index of a value
    m = hn::IfThenElse(gt, v, m);
    at = hn::IfThenElse(hn::RebindMask(di, gt), idx, at);
    idx = hn::Add(idx, step);
  }
  HWY_ALIGN float lm[hn::MaxLanes(DF())], lp[hn::MaxLanes(DF())];
  HWY_ALIGN std::int32_t la[hn::MaxLanes(DF())];
  hn::Store(m, df, lm);
  hn::Store(probe, df, lp);
  hn::Store(at, di, la);
  for (; i < n; ++i) {  // the tail on lane 0: later indices than any lane holds
    lp[0] += x[i] * 0.0f;
    if (x[i] > lm[0]) lm[0] = x[i], la[0] = static_cast<std::int32_t>(i);
  }
  float any = 0, best = lm[0];
  for (std::int64_t l = 0; l < L; ++l) any += lp[l], best = lm[l] > best ? lm[l] : best;
  if (any != any || n == 0) return false;
  std::int32_t first = la[0];
  bool found = false;
  for (std::int64_t l = 0; l < L; ++l)
    if (lm[l] == best && (!found || la[l] < first)) first = la[l], found = true;
  *index = first;
  return true;
}

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops::sampling_impl
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace npugraph::ops::sampling_impl {

HWY_EXPORT(ExpWeights);
HWY_EXPORT(ArgmaxFinite);

bool argmax_finite(const float* x, std::int64_t n, std::int32_t* index) {
  return HWY_DYNAMIC_DISPATCH(ArgmaxFinite)(x, n, index);
}

void exp_weights(const float* x, std::int64_t n, float max, float inv_t, float* w) {
  HWY_DYNAMIC_DISPATCH(ExpWeights)(x, n, max, inv_t, w);
}

}  // namespace npugraph::ops::sampling_impl
#endif  // HWY_ONCE
