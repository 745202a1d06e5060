// exp_weights (sampling_weights.hpp), compiled once per Highway target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/sampling/sampling_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cfloat>
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

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops::sampling_impl
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace npugraph::ops::sampling_impl {

HWY_EXPORT(ExpWeights);

void exp_weights(const float* x, std::int64_t n, float max, float inv_t, float* w) {
  HWY_DYNAMIC_DISPATCH(ExpWeights)(x, n, max, inv_t, w);
}

}  // namespace npugraph::ops::sampling_impl
#endif  // HWY_ONCE
