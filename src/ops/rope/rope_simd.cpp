// rotary_embedding on float32 tokens, compiled once per Highway target: per pair
// (a, b) -> (a c - b s, b c + a s), each product and the sum or difference rounded to float, as the
// scalar kernel in rope.cpp and the CUDA core compute it (the project builds ISO C++: no
// contraction), so the bits are theirs. RopeStyle::neox pairs are two runs of the head
// (i, i + rot / 2); ::norm pairs are neighbours (2i, 2i + 1), deinterleaved on load.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/rope/rope_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "ops/rope/rope_params.hpp"

HWY_BEFORE_NAMESPACE();
namespace npugraph::ops::rope_impl {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

// Token t of x into out (both float32; out may be x): cs holds the cos of pairs 0..rot/2-1, then
// their sin.
void RopeTokenF32(const RopeParams& p, std::int64_t t, const float* cs) {
  const DF df;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const std::int64_t half = p.rot / 2;
  const float* c = cs;
  const float* s = cs + half;
  const auto* x = static_cast<const float*>(p.x);
  auto* out = static_cast<float*>(p.out);
  for (std::int64_t h = 0; h < p.heads; ++h) {
    const std::int64_t base = (t * p.heads + h) * p.D;
    const float* xa = x + base;
    float* oa = out + base;
    std::int64_t i = 0;
    if (p.neox) {
      for (; i + L <= half; i += L) {
        const auto a = hn::LoadU(df, xa + i), b = hn::LoadU(df, xa + half + i);
        const auto vc = hn::LoadU(df, c + i), vs = hn::LoadU(df, s + i);
        const auto ra = hn::Sub(hn::Mul(a, vc), hn::Mul(b, vs));
        const auto rb = hn::Add(hn::Mul(b, vc), hn::Mul(a, vs));
        hn::StoreU(ra, df, oa + i);
        hn::StoreU(rb, df, oa + half + i);
      }
    } else {
      for (; i + L <= half; i += L) {
        hn::Vec<DF> a, b;
        hn::LoadInterleaved2(df, xa + 2 * i, a, b);
        const auto vc = hn::LoadU(df, c + i), vs = hn::LoadU(df, s + i);
        hn::StoreInterleaved2(hn::Sub(hn::Mul(a, vc), hn::Mul(b, vs)), hn::Add(hn::Mul(b, vc), hn::Mul(a, vs)),
                              df, oa + 2 * i);
      }
    }
    for (; i < half; ++i) {
      const std::int64_t ia = p.neox ? i : 2 * i, ib = p.neox ? i + half : 2 * i + 1;
      const float a = xa[ia], b = xa[ib];
      oa[ia] = a * c[i] - b * s[i];
      oa[ib] = b * c[i] + a * s[i];
    }
    if (oa != xa && p.rot < p.D)
      std::memcpy(oa + p.rot, xa + p.rot, static_cast<std::size_t>(p.D - p.rot) * sizeof(float));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops::rope_impl
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace npugraph::ops::rope_impl {

HWY_EXPORT(RopeTokenF32);

void rope_token_f32(const RopeParams& p, std::int64_t t, const float* cs) {
  HWY_DYNAMIC_DISPATCH(RopeTokenF32)(p, t, cs);
}

}  // namespace npugraph::ops::rope_impl
#endif  // HWY_ONCE
