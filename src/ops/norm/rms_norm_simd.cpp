// rms_norm / add_rms_norm on float32 rows, compiled once per Highway target (Note [RMSNorm lanes]).
//
// Note [RMSNorm lanes]
// A row's sum of squares is float64 in four lanes: lane j adds the squares of elements i = j
// (mod 4) of the row's whole quads in order, the elements past the last quad go to lane 0, and
// rstd = 1 / sqrt(((s0 + s1) + (s2 + s3)) / H + eps) rounded to float. The scalar kernel
// (rows_kernel in rms_norm.cpp) and the CUDA core (rms_norm_cuda_core.hpp) add in this order, and
// so does this one: a float's square is exact in float64 and the project builds ISO C++ (no
// contraction), so the three give the same bits. The four lanes are one vector of float64 (two
// on 128-bit targets); a row is a chain of dependent adds, so up to four rows run side by side
// (rows are independent: a row's bits do not depend on its neighbours). y = (x * rstd) * gamma
// in float, as the scalar kernel rounds it. Measured in bench_profile (k:rms_norm_us,
// k:add_rms_norm_us; Xeon family 6 model 207, AVX3): see the closing note of issue 45.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/norm/rms_norm_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "hwy/highway.h"
#include "ops/norm/rms_norm_params.hpp"

HWY_BEFORE_NAMESPACE();
namespace npugraph::ops::norm_impl {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DD = hn::CappedTag<double, 4>;  // the four lanes (one vector, or two of two)
using DF4 = hn::Rebind<float, DD>;
constexpr int kN = static_cast<int>(hn::MaxLanes(DD()));
constexpr int kVecs = 4 / kN;
constexpr int kRows = 4;  // rows whose chains run side by side

// rows_kernel's s[] for rows x[0..R): the squares of each row's whole quads per lane, then its
// tail in lane 0.
template <int R>
HWY_INLINE void SumSquares(const float* const* x, std::int64_t H, double (*s)[4]) {
  const DD dd;
  const DF4 df4;
  hn::Vec<DD> acc[R][kVecs];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < kVecs; ++v) acc[r][v] = hn::Zero(dd);
  std::int64_t i = 0;
  for (; i + 4 <= H; i += 4)
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < kVecs; ++v) {
        const auto e = hn::PromoteTo(dd, hn::LoadU(df4, x[r] + i + v * kN));
        acc[r][v] = hn::Add(acc[r][v], hn::Mul(e, e));
      }
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < kVecs; ++v) hn::StoreU(acc[r][v], dd, s[r] + v * kN);
    for (std::int64_t k = i; k < H; ++k) {
      const double e = x[r][k];
      s[r][0] += e * e;
    }
  }
}

// y[k] = (x[k] * rstd) * gamma[k]; y may be x.
HWY_INLINE void Scale(const float* x, float rstd, const float* gamma, float* y, std::int64_t H) {
  const DF df;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const auto vr = hn::Set(df, rstd);
  std::int64_t k = 0;
  for (; k + L <= H; k += L)
    hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(df, x + k), vr), hn::LoadU(df, gamma + k)), df, y + k);
  for (; k < H; ++k) y[k] = (x[k] * rstd) * gamma[k];
}

// x_out[k] = x1[k] + x2[k]; x_out may be x1 or x2.
HWY_INLINE void AddRow(const float* x1, const float* x2, float* out, std::int64_t H) {
  const DF df;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  std::int64_t k = 0;
  for (; k + L <= H; k += L) hn::StoreU(hn::Add(hn::LoadU(df, x1 + k), hn::LoadU(df, x2 + k)), df, out + k);
  for (; k < H; ++k) out[k] = x1[k] + x2[k];
}

template <int R>
HWY_INLINE void Rows(const RmsNormParams& p, bool add, std::int64_t r0) {
  const std::int64_t H = p.H;
  const float* x[R];
  for (int r = 0; r < R; ++r) {
    const std::int64_t base = (r0 + r) * H;
    if (add) {
      float* out = static_cast<float*>(p.x_out) + base;
      AddRow(static_cast<const float*>(p.x1) + base, static_cast<const float*>(p.x2) + base, out, H);
      x[r] = out;
    } else {
      x[r] = static_cast<const float*>(p.x1) + base;
    }
  }
  double s[R][4];
  SumSquares<R>(x, H, s);
  for (int r = 0; r < R; ++r) {
    const double ms = ((s[r][0] + s[r][1]) + (s[r][2] + s[r][3])) / static_cast<double>(H);
    const auto rstd = static_cast<float>(1.0 / std::sqrt(ms + p.epsilon));
    if (p.rstd) p.rstd[r0 + r] = rstd;
    Scale(x[r], rstd, static_cast<const float*>(p.gamma), static_cast<float*>(p.y) + (r0 + r) * H, H);
  }
}

void RmsNormRowsF32(const RmsNormParams& p, bool add, std::int64_t r0, std::int64_t r1) {
  std::int64_t r = r0;
  for (; r + kRows <= r1; r += kRows) Rows<kRows>(p, add, r);
  for (; r < r1; ++r) Rows<1>(p, add, r);
}

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops::norm_impl
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace npugraph::ops::norm_impl {

HWY_EXPORT(RmsNormRowsF32);

void rms_norm_rows_f32(const RmsNormParams& p, bool add, std::int64_t r0, std::int64_t r1) {
  HWY_DYNAMIC_DISPATCH(RmsNormRowsF32)(p, add, r0, r1);
}

}  // namespace npugraph::ops::norm_impl
#endif  // HWY_ONCE
