// The SIMD core of the fast FIA kernels (Note [FIA fast kernels] in fia_fast_launch.hpp),
// compiled once per Highway target by the files that include it after hwy/foreach_target.h
// (fia_fast_decode.cpp, fia_fast_prefill.cpp):
//   - LoadKv: a vector of a key/value row (float32, float16, bfloat16, int8 dequantised) as
//     float32; ConvertRows: key/value rows to zero-padded float32 tiles;
//   - ChunkScores: q·k for a set of query rows × a key tile, 4 rows × 4 columns (AVX-512) or
//     4 × 2 register-blocked (1 row × 4 columns for the rest), four horizontal sums folded into
//     one (Reduce4);
//   - SoftmaxChunk: scale, band/mask/pse, the online-softmax update, vectorised exp;
//   - AccumulatePV: acc += P·V, 4 rows × 4 (AVX-512) or 2 vectors register-blocked;
//   - ProcessRows: a unit's query rows against a range of KV columns, chunk by chunk, skipping
//     chunks that no row can see;
//   - DirectRows (DirectScores, DirectPV): the same for units of at most kDirectRows rows, with
//     K and V converted in registers instead of through tiles.
// Every function does the same float operations in the same order for the same inputs, whatever
// thread runs it (Note [FIA workspace]).
//
// Include guard for per-target re-inclusion (Highway's convention).
#if defined(NPUGRAPH_OPS_ATTENTION_FIA_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NPUGRAPH_OPS_ATTENTION_FIA_SIMD_INL_H_
#undef NPUGRAPH_OPS_ATTENTION_FIA_SIMD_INL_H_
#else
#define NPUGRAPH_OPS_ATTENTION_FIA_SIMD_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "ops/attention/fia_fast_launch.hpp"
#include "ops/attention/softmax_state.hpp"

HWY_BEFORE_NAMESPACE();
namespace npugraph::ops::attention::fast {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Query rows one unit holds at most (decode: a GQA group of 64 heads x kDecodeMaxSeq rows).
inline constexpr std::int64_t kMaxUnitRows = 64 * kDecodeMaxSeq;
static_assert(kPrefillRows <= kMaxUnitRows);

// How rows are dequantised as they are loaded (int8 KV, DqRun): not at all (float types), with
// per-channel vectors, or with one scale/offset per row.
enum class Dq { none, channel, token };

// N elements of T at p as float32.
template <class T>
HWY_INLINE VF LoadAsFloat(const T* HWY_RESTRICT p) {
  const DF df;
  if constexpr (std::is_same_v<T, float>) {
    return hn::LoadU(df, p);
  } else if constexpr (std::is_same_v<T, half>) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    const hn::Rebind<hwy::bfloat16_t, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::bfloat16_t*>(p)));
  } else {
    static_assert(std::is_same_v<T, std::int8_t>);
    const hn::Rebind<std::int32_t, DF> di;
    const hn::Rebind<std::int8_t, DF> d8;
    return hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, p)));
  }
}

// Elements [d, d + N) of a KV row as float32, dequantised (x + offset) * scale for int8: `dq`'s
// channel arrays (Dq::channel) or the row's broadcast scale/offset (Dq::token).
template <class T, Dq K>
HWY_INLINE VF LoadKv(const T* HWY_RESTRICT row, std::int64_t d, const DqRun* dq, VF rs, VF ro) {
  const VF x = LoadAsFloat(row + d);
  if constexpr (K == Dq::channel) {
    const DF df;
    return hn::Mul(hn::Add(x, hn::Load(df, dq->offset + d)), hn::Load(df, dq->scale + d));
  } else if constexpr (K == Dq::token) {
    return hn::Mul(hn::Add(x, ro), rs);
  } else {
    (void)dq, (void)rs, (void)ro;
    return x;
  }
}

// Row c's broadcast scale and offset (Dq::token; unused otherwise).
template <Dq K>
HWY_INLINE void RowDq(const DqRun* dq, std::int64_t c, VF& rs, VF& ro) {
  const DF df;
  if constexpr (K == Dq::token) {
    rs = hn::Set(df, dq->scale[c]);
    ro = hn::Set(df, dq->offset[c]);
  } else {
    (void)dq, (void)c;
    rs = ro = hn::Zero(df);
  }
}

// n elements of row c of T to float32 (Dq as LoadKv).
template <class T, Dq K>
HWY_INLINE void ConvertRow(const T* HWY_RESTRICT src, std::int64_t n, float* HWY_RESTRICT dst,
                           const DqRun* dq, std::int64_t c) {
  const DF df;
  const auto N = static_cast<std::int64_t>(hn::Lanes(df));
  VF rs, ro;
  RowDq<K>(dq, c, rs, ro);
  std::int64_t d = 0;
  for (; d + N <= n; d += N) hn::StoreU(LoadKv<T, K>(src, d, dq, rs, ro), df, dst + d);
  for (; d < n; ++d) {
    const float x = static_cast<float>(src[d]);
    if constexpr (K == Dq::channel) dst[d] = (x + dq->offset[d]) * dq->scale[d];
    else if constexpr (K == Dq::token) dst[d] = (x + dq->offset[c]) * dq->scale[c];
    else dst[d] = x;
  }
}

// `cols` rows (row stride `stride` elements) of D elements, and optionally of D2 elements from a
// second tensor placed after them, into float32 rows of `padded` floats (the rest zero).
// `ahead` (optional, row stride `ahead_stride`, `ahead_rows` rows): the rows of the next run of
// the same tensor, prefetched one per converted row so that the loads are spread over the chunk.
// `dq`: the run's antiquant parameters (int8; D2 is 0 then).
template <class T, Dq K>
HWY_INLINE void ConvertRows(const std::byte* src, std::int64_t stride, std::int64_t D,
                            const std::byte* src2, std::int64_t stride2, std::int64_t D2,
                            std::int64_t cols, float* dst, std::int64_t padded,
                            const std::byte* ahead, std::int64_t ahead_stride,
                            std::int64_t ahead_rows, const DqRun* dq) {
  const T* a = reinterpret_cast<const T*>(src);
  const T* a2 = reinterpret_cast<const T*>(src2);
  const T* next = reinterpret_cast<const T*>(ahead);
  const auto row_bytes = static_cast<std::int64_t>(D * static_cast<std::int64_t>(sizeof(T)));
  for (std::int64_t c = 0; c < cols; ++c) {
    if (next) {
      // The rest of the next run's rows go with the last row.
      const std::int64_t last = c + 1 == cols ? ahead_rows : std::min(c + 1, ahead_rows);
      for (std::int64_t r = c; r < last; ++r)
        for (std::int64_t o = 0; o < row_bytes; o += 64)
          hwy::Prefetch(reinterpret_cast<const std::byte*>(next + r * ahead_stride) + o);
    }
    float* row = dst + c * padded;
    ConvertRow<T, K>(a + c * stride, D, row, dq, c);
    if (D2) ConvertRow<T, Dq::none>(a2 + c * stride2, D2, row + D, nullptr, c);
    for (std::int64_t d = D + D2; d < padded; ++d) row[d] = 0.0f;
  }
}

// out[k] = the sum of the lanes of a_k, k = 0..3, in a fixed order.
HWY_INLINE void Reduce4(VF a0, VF a1, VF a2, VF a3, float* HWY_RESTRICT out) {
#if HWY_TARGET == HWY_SCALAR
  out[0] = hn::GetLane(a0);
  out[1] = hn::GetLane(a1);
  out[2] = hn::GetLane(a2);
  out[3] = hn::GetLane(a3);
#else
  const DF df;
  // Within each 128-bit block: [a0, a1, a0, a1] pairs, then [a0, a1, a2, a3] block sums.
  const hn::Repartition<std::uint64_t, DF> du;
  const VF t0 = hn::Add(hn::InterleaveLower(df, a0, a1), hn::InterleaveUpper(df, a0, a1));
  const VF t1 = hn::Add(hn::InterleaveLower(df, a2, a3), hn::InterleaveUpper(df, a2, a3));
  const auto u0 = hn::BitCast(du, t0);
  const auto u1 = hn::BitCast(du, t1);
  const VF u = hn::Add(hn::BitCast(df, hn::InterleaveLower(du, u0, u1)),
                       hn::BitCast(df, hn::InterleaveUpper(du, u0, u1)));
  HWY_ALIGN float buf[HWY_MAX_BYTES / sizeof(float)];
  hn::Store(u, df, buf);
  const hn::Full128<float> d4;
  auto r = hn::Load(d4, buf);
  for (std::size_t k = 4; k < hn::Lanes(df); k += 4) r = hn::Add(r, hn::Load(d4, buf + k));
  hn::StoreU(r, d4, out);
#endif
}

HWY_INLINE float Reduce1(VF a) {
  const DF df;
  return hn::GetLane(hn::SumOfLanes(df, a));
}

// Scores of query rows q[0..rows) against key tile rows [0, cols) (float32, `dp` floats each,
// zero-padded): s[r][j] = q_r · k_j.
HWY_INLINE void ChunkScores(const float* const* q, std::int64_t rows, const float* kt,
                            std::int64_t dp, std::int64_t cols, float* const* s) {
  const DF df;
  const auto N = static_cast<std::int64_t>(hn::Lanes(df));
  std::int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float *q0 = q[r], *q1 = q[r + 1], *q2 = q[r + 2], *q3 = q[r + 3];
    std::int64_t j0 = 0;
#if HWY_TARGET <= HWY_AVX3
    // 32 registers: 4 rows x 4 columns, 16 FMAs per 8 loads.
    for (; j0 + 4 <= cols; j0 += 4) {
      const float* k0 = kt + j0 * dp;
      VF a[4][4];
      for (int x = 0; x < 4; ++x)
        for (int y = 0; y < 4; ++y) a[x][y] = hn::Zero(df);
      for (std::int64_t d = 0; d < dp; d += N) {
        const VF x0 = hn::Load(df, k0 + d), x1 = hn::Load(df, k0 + dp + d);
        const VF x2 = hn::Load(df, k0 + 2 * dp + d), x3 = hn::Load(df, k0 + 3 * dp + d);
        const float* qq[4] = {q0, q1, q2, q3};
        for (int x = 0; x < 4; ++x) {
          const VF y = hn::Load(df, qq[x] + d);
          a[x][0] = hn::MulAdd(y, x0, a[x][0]);
          a[x][1] = hn::MulAdd(y, x1, a[x][1]);
          a[x][2] = hn::MulAdd(y, x2, a[x][2]);
          a[x][3] = hn::MulAdd(y, x3, a[x][3]);
        }
      }
      for (int x = 0; x < 4; ++x) Reduce4(a[x][0], a[x][1], a[x][2], a[x][3], s[r + x] + j0);
    }
#endif
    for (std::int64_t j = j0; j < cols; j += 2) {
      const float* k0 = kt + j * dp;
      const float* k1 = j + 1 < cols ? k0 + dp : k0;
      VF a00 = hn::Zero(df), a10 = a00, a20 = a00, a30 = a00;
      VF a01 = a00, a11 = a00, a21 = a00, a31 = a00;
      for (std::int64_t d = 0; d < dp; d += N) {
        const VF x0 = hn::Load(df, k0 + d), x1 = hn::Load(df, k1 + d);
        const VF y0 = hn::Load(df, q0 + d), y1 = hn::Load(df, q1 + d);
        const VF y2 = hn::Load(df, q2 + d), y3 = hn::Load(df, q3 + d);
        a00 = hn::MulAdd(y0, x0, a00);
        a10 = hn::MulAdd(y1, x0, a10);
        a20 = hn::MulAdd(y2, x0, a20);
        a30 = hn::MulAdd(y3, x0, a30);
        a01 = hn::MulAdd(y0, x1, a01);
        a11 = hn::MulAdd(y1, x1, a11);
        a21 = hn::MulAdd(y2, x1, a21);
        a31 = hn::MulAdd(y3, x1, a31);
      }
      float c0[4], c1[4];
      Reduce4(a00, a10, a20, a30, c0);
      Reduce4(a01, a11, a21, a31, c1);
      for (int k = 0; k < 4; ++k) s[r + k][j] = c0[k];
      if (j + 1 < cols)
        for (int k = 0; k < 4; ++k) s[r + k][j + 1] = c1[k];
    }
  }
  for (; r < rows; ++r) {
    const float* q0 = q[r];
    std::int64_t j = 0;
    for (; j + 4 <= cols; j += 4) {
      const float* k0 = kt + j * dp;
      VF a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0;
      for (std::int64_t d = 0; d < dp; d += N) {
        const VF y = hn::Load(df, q0 + d);
        a0 = hn::MulAdd(y, hn::Load(df, k0 + d), a0);
        a1 = hn::MulAdd(y, hn::Load(df, k0 + dp + d), a1);
        a2 = hn::MulAdd(y, hn::Load(df, k0 + 2 * dp + d), a2);
        a3 = hn::MulAdd(y, hn::Load(df, k0 + 3 * dp + d), a3);
      }
      Reduce4(a0, a1, a2, a3, s[r] + j);
    }
    for (; j < cols; ++j) {
      const float* k0 = kt + j * dp;
      VF a0 = hn::Zero(df);
      for (std::int64_t d = 0; d < dp; d += N) a0 = hn::MulAdd(hn::Load(df, q0 + d), hn::Load(df, k0 + d), a0);
      s[r][j] = Reduce1(a0);
    }
  }
}

// One row's chunk of scores s[0..cols) (columns j0..j0+cols): scaled, masked outside the row's
// band [lo, hi) and by the mask, pse added, then turned into probabilities exp(s - max) in place
// (padding up to whole vectors is set to 0). Updates the row's state; returns the factor the
// accumulator must be scaled by, or 0 with *skip set when the row is still empty.
HWY_INLINE float SoftmaxChunk(const Launch& l, const Row& row, std::int64_t j0, std::int64_t cols,
                              float* s, SoftmaxState& st, bool* skip) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const DF df;
  const auto N = static_cast<std::int64_t>(hn::Lanes(df));
  const std::int64_t padded = (cols + N - 1) / N * N;
  const VF scale = hn::Set(df, l.p.scale);
  for (std::int64_t j = 0; j < padded; j += N)
    hn::Store(hn::Mul(hn::Load(df, s + j), scale), df, s + j);
  const std::int64_t a = std::clamp<std::int64_t>(row.lo - j0, 0, cols);
  const std::int64_t b = std::clamp<std::int64_t>(row.hi - j0, a, cols);
  for (std::int64_t j = 0; j < a; ++j) s[j] = -kInf;
  for (std::int64_t j = b; j < padded; ++j) s[j] = -kInf;
  if (l.p.pse.data || l.key.mask_kind == static_cast<std::int64_t>(FiaMaskKind::full))
    l.bias(row, j0 + a, b - a, s + a);
  VF vmax = hn::Set(df, -kInf);
  VF vnan = hn::Zero(df);
  const VF one = hn::Set(df, 1.0f);
  for (std::int64_t j = 0; j < padded; j += N) {
    const VF x = hn::Load(df, s + j);
    vmax = hn::Max(vmax, x);
    vnan = hn::Max(vnan, hn::IfThenElseZero(hn::IsNaN(x), one));
  }
  float m = hn::GetLane(hn::MaxOfLanes(df, vmax));
  if (hn::GetLane(hn::MaxOfLanes(df, vnan)) > 0.0f) m = std::numeric_limits<float>::quiet_NaN();
  const float factor = st.raise_max(m);
  if (st.empty()) {
    *skip = true;
    return 0.0f;
  }
  *skip = false;
  const VF vm = hn::Set(df, st.max);
  VF sum = hn::Zero(df);
  for (std::int64_t j = 0; j < padded; j += N) {
    const VF p = hn::Exp(df, hn::Sub(hn::Load(df, s + j), vm));
    hn::Store(p, df, s + j);
    sum = hn::Add(sum, p);
  }
  st.sum += Reduce1(sum);
  return factor;
}

// acc_r += sum_j p_r[j] * v_j for the rows r in [0, rows), value tile rows of `dp` floats.
HWY_INLINE void AccumulatePV(float* const* acc, const float* const* p, std::int64_t rows,
                             const float* vt, std::int64_t dp, std::int64_t cols) {
  const DF df;
  const auto N = static_cast<std::int64_t>(hn::Lanes(df));
  std::int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    float *c0 = acc[r], *c1 = acc[r + 1], *c2 = acc[r + 2], *c3 = acc[r + 3];
    const float *p0 = p[r], *p1 = p[r + 1], *p2 = p[r + 2], *p3 = p[r + 3];
    std::int64_t d = 0;
#if HWY_TARGET <= HWY_AVX3
    // 32 registers: 4 rows x 4 vectors, 16 FMAs per 8 loads.
    for (; d + 4 * N <= dp; d += 4 * N) {
      VF a[4][4];
      float* c[4] = {c0, c1, c2, c3};
      const float* pp[4] = {p0, p1, p2, p3};
      for (int x = 0; x < 4; ++x)
        for (int y = 0; y < 4; ++y) a[x][y] = hn::Load(df, c[x] + d + y * N);
      for (std::int64_t j = 0; j < cols; ++j) {
        const float* vj = vt + j * dp + d;
        const VF v0 = hn::Load(df, vj), v1 = hn::Load(df, vj + N);
        const VF v2 = hn::Load(df, vj + 2 * N), v3 = hn::Load(df, vj + 3 * N);
        for (int x = 0; x < 4; ++x) {
          const VF w = hn::Set(df, pp[x][j]);
          a[x][0] = hn::MulAdd(w, v0, a[x][0]);
          a[x][1] = hn::MulAdd(w, v1, a[x][1]);
          a[x][2] = hn::MulAdd(w, v2, a[x][2]);
          a[x][3] = hn::MulAdd(w, v3, a[x][3]);
        }
      }
      for (int x = 0; x < 4; ++x)
        for (int y = 0; y < 4; ++y) hn::Store(a[x][y], df, c[x] + d + y * N);
    }
#endif
    for (; d + 2 * N <= dp; d += 2 * N) {
      VF a00 = hn::Load(df, c0 + d), a01 = hn::Load(df, c0 + d + N);
      VF a10 = hn::Load(df, c1 + d), a11 = hn::Load(df, c1 + d + N);
      VF a20 = hn::Load(df, c2 + d), a21 = hn::Load(df, c2 + d + N);
      VF a30 = hn::Load(df, c3 + d), a31 = hn::Load(df, c3 + d + N);
      for (std::int64_t j = 0; j < cols; ++j) {
        const VF v0 = hn::Load(df, vt + j * dp + d), v1 = hn::Load(df, vt + j * dp + d + N);
        const VF w0 = hn::Set(df, p0[j]), w1 = hn::Set(df, p1[j]);
        const VF w2 = hn::Set(df, p2[j]), w3 = hn::Set(df, p3[j]);
        a00 = hn::MulAdd(w0, v0, a00);
        a01 = hn::MulAdd(w0, v1, a01);
        a10 = hn::MulAdd(w1, v0, a10);
        a11 = hn::MulAdd(w1, v1, a11);
        a20 = hn::MulAdd(w2, v0, a20);
        a21 = hn::MulAdd(w2, v1, a21);
        a30 = hn::MulAdd(w3, v0, a30);
        a31 = hn::MulAdd(w3, v1, a31);
      }
      hn::Store(a00, df, c0 + d);
      hn::Store(a01, df, c0 + d + N);
      hn::Store(a10, df, c1 + d);
      hn::Store(a11, df, c1 + d + N);
      hn::Store(a20, df, c2 + d);
      hn::Store(a21, df, c2 + d + N);
      hn::Store(a30, df, c3 + d);
      hn::Store(a31, df, c3 + d + N);
    }
    for (; d < dp; d += N) {
      VF a0 = hn::Load(df, c0 + d), a1 = hn::Load(df, c1 + d);
      VF a2 = hn::Load(df, c2 + d), a3 = hn::Load(df, c3 + d);
      for (std::int64_t j = 0; j < cols; ++j) {
        const VF v = hn::Load(df, vt + j * dp + d);
        a0 = hn::MulAdd(hn::Set(df, p0[j]), v, a0);
        a1 = hn::MulAdd(hn::Set(df, p1[j]), v, a1);
        a2 = hn::MulAdd(hn::Set(df, p2[j]), v, a2);
        a3 = hn::MulAdd(hn::Set(df, p3[j]), v, a3);
      }
      hn::Store(a0, df, c0 + d);
      hn::Store(a1, df, c1 + d);
      hn::Store(a2, df, c2 + d);
      hn::Store(a3, df, c3 + d);
    }
  }
  for (; r < rows; ++r) {
    float* c = acc[r];
    const float* pr = p[r];
    std::int64_t d = 0;
    for (; d + 4 * N <= dp; d += 4 * N) {
      VF a0 = hn::Load(df, c + d), a1 = hn::Load(df, c + d + N);
      VF a2 = hn::Load(df, c + d + 2 * N), a3 = hn::Load(df, c + d + 3 * N);
      for (std::int64_t j = 0; j < cols; ++j) {
        const VF w = hn::Set(df, pr[j]);
        const float* v = vt + j * dp + d;
        a0 = hn::MulAdd(w, hn::Load(df, v), a0);
        a1 = hn::MulAdd(w, hn::Load(df, v + N), a1);
        a2 = hn::MulAdd(w, hn::Load(df, v + 2 * N), a2);
        a3 = hn::MulAdd(w, hn::Load(df, v + 3 * N), a3);
      }
      hn::Store(a0, df, c + d);
      hn::Store(a1, df, c + d + N);
      hn::Store(a2, df, c + d + 2 * N);
      hn::Store(a3, df, c + d + 3 * N);
    }
    for (; d < dp; d += N) {
      VF a0 = hn::Load(df, c + d);
      for (std::int64_t j = 0; j < cols; ++j)
        a0 = hn::MulAdd(hn::Set(df, pr[j]), hn::Load(df, vt + j * dp + d), a0);
      hn::Store(a0, df, c + d);
    }
  }
}

// A unit's query rows and where their state lives: rows[r] (b is the same for all), q[r] the
// float32 query (plan.fast_dk floats), acc[r] (plan.fast_dv floats) and st[r] = {max, sum}.
// `after`: the first run of the unit the same worker computes next (empty if none), prefetched
// during this unit's last chunk so that a unit does not start on cold memory.
struct UnitRows {
  const Row* rows;
  float* const* q;
  float* const* acc;
  float* const* st;
  std::int64_t count;
  KvRun after;
};

// The slot's tiles: key and value tiles and the scores of up to kMaxUnitRows rows.
struct Tiles {
  float* k;
  float* v;
  float* score;
};

// The softmax step of one chunk for the `na` active rows idx[0..na) of `u` (their scores in
// sa[0..na)): updates each row's state, rescales its accumulator, and lists the rows that take part
// in P·V (acc_pv, p_pv); returns how many do.
template <class Units>
HWY_INLINE std::int64_t SoftmaxRows(const Launch& l, const Units& u, const std::int64_t* idx,
                                    std::int64_t na, std::int64_t j, std::int64_t cols,
                                    float* const* sa, std::int64_t dvp, float** acc_pv,
                                    const float** p_pv) {
  const DF df;
  std::int64_t npv = 0;
  for (std::int64_t a = 0; a < na; ++a) {
    const std::int64_t r = idx[a];
    float* st = u.st[r];
    SoftmaxState s{st[0], st[1]};
    bool skip = false;
    const float factor = SoftmaxChunk(l, u.rows[r], j, cols, sa[a], s, &skip);
    st[0] = s.max;
    st[1] = s.sum;
    if (skip) continue;
    float* acc = u.acc[r];
    if (factor != 1.0f) {
      const VF f = hn::Set(df, factor);
      for (std::int64_t d = 0; d < dvp; d += static_cast<std::int64_t>(hn::Lanes(df)))
        hn::Store(hn::Mul(hn::Load(df, acc + d), f), df, acc + d);
    }
    acc_pv[npv] = acc;
    p_pv[npv] = sa[a];
    ++npv;
  }
  return npv;
}

// Runs the rows of `u` (batch b, KV head h) over KV columns [c0, c1) in chunks of at most
// kFastChunk columns that never cross a paged block or the shared prefix.
template <class T, Dq KK, Dq VK>
void ProcessRows(const Launch& l, std::int64_t b, std::int64_t h, const UnitRows& u,
                 std::int64_t c0, std::int64_t c1, const Tiles& t) {
  DqRun kq, vq;
  const FiaWorkspacePlan& plan = l.p.plan;
  const std::int64_t dkp = plan.fast_dk, dvp = plan.fast_dv;
  const float* qa[kMaxUnitRows];
  float* sa[kMaxUnitRows];
  float* acc_pv[kMaxUnitRows];
  const float* p_pv[kMaxUnitRows];
  std::int64_t idx[kMaxUnitRows];
  if (c0 >= c1) return;
  KvRun run = l.run_at(b, h, c0, std::min(kFastChunk, c1 - c0));
  for (std::int64_t j = c0; j < c1;) {
    const std::int64_t cols = run.len, j1 = j + cols;
    // The next run, prefetched while this one is computed (DRAM latency, not bandwidth, limits
    // one thread's stream otherwise).
    KvRun next;
    if (j1 < c1) next = l.run_at(b, h, j1, std::min(kFastChunk, c1 - j1));
    const KvRun& pf = j1 < c1 ? next : u.after;
    std::int64_t na = 0;
    for (std::int64_t r = 0; r < u.count; ++r) {
      const Row& row = u.rows[r];
      if (row.lo < j1 && row.hi > j) {
        idx[na] = r;
        qa[na] = u.q[r];
        sa[na] = t.score + na * kFastChunk;
        ++na;
      }
    }
    if (na == 0) {
      j = j1;
      run = next;
      continue;
    }
    if constexpr (KK != Dq::none) l.dequant(l.kdq, run, h, cols, l.key.dk, kq);
    ConvertRows<T, KK>(run.k, run.k_stride, l.key.dk, run.kr, run.kr_stride, l.key.dr, cols, t.k,
                       dkp, pf.k, pf.k_stride, pf.len, &kq);
    ChunkScores(qa, na, t.k, dkp, cols, sa);
    const std::int64_t npv = SoftmaxRows(l, u, idx, na, j, cols, sa, dvp, acc_pv, p_pv);
    if (npv > 0) {
      if constexpr (VK != Dq::none) l.dequant(l.vdq, run, h, cols, l.key.dv, vq);
      ConvertRows<T, VK>(run.v, run.v_stride, l.key.dv, nullptr, 0, 0, cols, t.v, dvp, pf.v,
                         pf.v_stride, pf.len, &vq);
      AccumulatePV(acc_pv, p_pv, npv, t.v, dvp, cols);
    }
    j = j1;
    run = next;
  }
}

// Selects the rows of `u` that see some of the columns [j, j1): their indices, queries and
// score rows (t.score, kFastChunk floats each). Returns how many.
HWY_INLINE std::int64_t ActiveRows(const UnitRows& u, std::int64_t j, std::int64_t j1,
                                   const Tiles& t, std::int64_t* idx, const float** qa,
                                   float** sa) {
  std::int64_t na = 0;
  for (std::int64_t r = 0; r < u.count; ++r) {
    const Row& row = u.rows[r];
    if (row.lo < j1 && row.hi > j) {
      idx[na] = r;
      qa[na] = u.q[r];
      sa[na] = t.score + na * kFastChunk;
      ++na;
    }
  }
  return na;
}

// The cache lines of `rows` rows (`row_bytes` each) from `base`, one row per `stride` bytes.
// Locality hint 2 (x86: prefetcht1, into L2): a run is consumed a chunk later, and leaving L1's
// miss buffers to the demand loads measured a few percent faster than hwy::Prefetch's hint 3
// (prefetcht0) on the benchmark's decode cases.
HWY_INLINE void PrefetchRows(const std::byte* base, std::int64_t stride, std::int64_t rows,
                             std::int64_t row_bytes) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = 0; o < row_bytes; o += 64)
      __builtin_prefetch(base + r * stride + o, 0, 2);
}

// Q·K of R query rows against `cols` KV rows of T converted in registers (no tile): scores
// s[r][c] = q_r · k_c, C columns at a time (R x C accumulators: 1 x 8 or 4 x 4, enough
// independent FMA chains to cover the FMA latency). The rows of `ahead` (the next run,
// `ahead_rows` rows) are prefetched as the columns are consumed, one row per column.
template <int R, int C, class T, Dq K>
HWY_INLINE void DirectScores(const float* const* q, const T* k, std::int64_t stride,
                             std::int64_t D, std::int64_t cols, const DqRun* dq,
                             const T* ahead, std::int64_t ahead_stride, std::int64_t ahead_rows,
                             float* const* s) {
  static_assert(C % 4 == 0);
  const DF df;
  const auto N = static_cast<std::int64_t>(hn::Lanes(df));
  const auto es = static_cast<std::int64_t>(sizeof(T));
  for (std::int64_t j = 0; j < cols; j += C) {
    if (ahead && j < ahead_rows)
      PrefetchRows(reinterpret_cast<const std::byte*>(ahead + j * ahead_stride),
                   ahead_stride * es, std::min<std::int64_t>(C, ahead_rows - j), D * es);
    // Past the run's end the last column is computed again and dropped.
    const T* kc[C];
    VF rs[C], ro[C];
    for (int c = 0; c < C; ++c) {
      const std::int64_t col = std::min(j + c, cols - 1);
      kc[c] = k + col * stride;
      RowDq<K>(dq, col, rs[c], ro[c]);
    }
    VF a[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) a[r][c] = hn::Zero(df);
    for (std::int64_t d = 0; d < D; d += N) {
      VF x[C];
      for (int c = 0; c < C; ++c) x[c] = LoadKv<T, K>(kc[c], d, dq, rs[c], ro[c]);
      for (int r = 0; r < R; ++r) {
        const VF y = hn::Load(df, q[r] + d);
        for (int c = 0; c < C; ++c) a[r][c] = hn::MulAdd(y, x[c], a[r][c]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int c0 = 0; c0 < C; c0 += 4) {
        HWY_ALIGN float out[4];
        Reduce4(a[r][c0], a[r][c0 + 1], a[r][c0 + 2], a[r][c0 + 3], out);
        for (int c = 0; c < 4 && j + c0 + c < cols; ++c) s[r][j + c0 + c] = out[c];
      }
  }
}

// acc_r += sum_c p_r[c] * v_c for R rows, V rows of T converted in registers, W vectors of D
// at a time (R x W accumulators: 1 x 8 or 4 x 4); `ahead` as in DirectScores, prefetched by the
// first block. D is a multiple of the vector length.
template <int R, int W, class T, Dq K>
HWY_INLINE void DirectPV(float* const* acc, const float* const* p, const T* v,
                         std::int64_t stride, std::int64_t D, std::int64_t cols, const DqRun* dq,
                         const T* ahead, std::int64_t ahead_stride, std::int64_t ahead_rows) {
  const DF df;
  const auto N = static_cast<std::int64_t>(hn::Lanes(df));
  const auto es = static_cast<std::int64_t>(sizeof(T));
  std::int64_t d0 = 0;
  // Blocks of W vectors, then single vectors.
  for (; d0 + W * N <= D; d0 += W * N) {
    VF a[R][W];
    for (int r = 0; r < R; ++r)
      for (int x = 0; x < W; ++x) a[r][x] = hn::Load(df, acc[r] + d0 + x * N);
    for (std::int64_t c = 0; c < cols; ++c) {
      if (d0 == 0 && ahead && c < ahead_rows)
        PrefetchRows(reinterpret_cast<const std::byte*>(ahead + c * ahead_stride), 0, 1, D * es);
      VF rs, ro;
      RowDq<K>(dq, c, rs, ro);
      const T* vc = v + c * stride;
      VF x[W];
      for (int i = 0; i < W; ++i) x[i] = LoadKv<T, K>(vc, d0 + i * N, dq, rs, ro);
      for (int r = 0; r < R; ++r) {
        const VF w = hn::Set(df, p[r][c]);
        for (int i = 0; i < W; ++i) a[r][i] = hn::MulAdd(w, x[i], a[r][i]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int x = 0; x < W; ++x) hn::Store(a[r][x], df, acc[r] + d0 + x * N);
  }
  for (; d0 < D; d0 += N) {
    VF a[R];
    for (int r = 0; r < R; ++r) a[r] = hn::Load(df, acc[r] + d0);
    for (std::int64_t c = 0; c < cols; ++c) {
      if (d0 == 0 && ahead && c < ahead_rows)
        PrefetchRows(reinterpret_cast<const std::byte*>(ahead + c * ahead_stride), 0, 1, D * es);
      VF rs, ro;
      RowDq<K>(dq, c, rs, ro);
      const VF x = LoadKv<T, K>(v + c * stride, d0, dq, rs, ro);
      for (int r = 0; r < R; ++r) a[r] = hn::MulAdd(hn::Set(df, p[r][c]), x, a[r]);
    }
    for (int r = 0; r < R; ++r) hn::Store(a[r], df, acc[r] + d0);
  }
}

// ProcessRows for units of at most kDirectRows query rows (decode at small GQA groups): K and V
// are converted in registers as they are used instead of through float32 tiles, and the next
// run's rows are prefetched while each phase streams (K during Q·K, V during P·V), so the loads
// stay evenly spread over the chunk. Rows are computed in blocks of R (1 or 4; 2 and 3 rows
// run as 4 with the extra rows discarded).
inline constexpr std::int64_t kDirectRows = 4;

template <class T, Dq KK, Dq VK>
void DirectRows(const Launch& l, std::int64_t b, std::int64_t h, const UnitRows& u,
                std::int64_t c0, std::int64_t c1, const Tiles& t) {
  const FiaWorkspacePlan& plan = l.p.plan;
  const std::int64_t dvp = plan.fast_dv;
  DqRun kq, vq;
  const float* qa[kDirectRows];
  float* sa[kDirectRows];
  float* acc_pv[kDirectRows];
  const float* p_pv[kDirectRows];
  std::int64_t idx[kDirectRows];
  // Spare rows of a 4-row block: a zero query, scores and an accumulator that are dropped.
  float* spare_acc = t.v;          // the value tile is unused here (dvp floats)
  float* spare_s = t.k;            // the key tile is unused here (kFastChunk floats)
  const float* zero_q = t.k + kFastChunk;  // fast_dk zero floats after it
  std::fill(t.k, t.k + kFastChunk + plan.fast_dk, 0.0f);
  std::fill(spare_acc, spare_acc + dvp, 0.0f);
  if (c0 >= c1) return;
  KvRun run = l.run_at(b, h, c0, std::min(kFastChunk, c1 - c0));
  for (std::int64_t j = c0; j < c1;) {
    const std::int64_t cols = run.len, j1 = j + cols;
    KvRun next;
    if (j1 < c1) next = l.run_at(b, h, j1, std::min(kFastChunk, c1 - j1));
    const KvRun& pf = j1 < c1 ? next : u.after;
    const std::int64_t na = ActiveRows(u, j, j1, t, idx, qa, sa);
    if (na == 0) {
      j = j1;
      run = next;
      continue;
    }
    if constexpr (KK != Dq::none) l.dequant(l.kdq, run, h, cols, l.key.dk, kq);
    const T* k = reinterpret_cast<const T*>(run.k);
    const T* nk = reinterpret_cast<const T*>(pf.k);
    if (na == 1) {
      DirectScores<1, 8, T, KK>(qa, k, run.k_stride, l.key.dk, cols, &kq, nk, pf.k_stride,
                             pf.len, sa);
    } else {
      for (std::int64_t a = na; a < kDirectRows; ++a) {
        qa[a] = zero_q;
        sa[a] = spare_s;
      }
      DirectScores<4, 4, T, KK>(qa, k, run.k_stride, l.key.dk, cols, &kq, nk, pf.k_stride,
                             pf.len, sa);
    }
    const std::int64_t npv = SoftmaxRows(l, u, idx, na, j, cols, sa, dvp, acc_pv, p_pv);
    const T* nv = reinterpret_cast<const T*>(pf.v);
    if (npv > 0) {
      if constexpr (VK != Dq::none) l.dequant(l.vdq, run, h, cols, l.key.dv, vq);
      const T* v = reinterpret_cast<const T*>(run.v);
      if (npv == 1) {
        DirectPV<1, 8, T, VK>(acc_pv, p_pv, v, run.v_stride, l.key.dv, cols, &vq, nv, pf.v_stride,
                           pf.len);
      } else {
        for (std::int64_t a = npv; a < kDirectRows; ++a) {
          acc_pv[a] = spare_acc;
          p_pv[a] = spare_s;
        }
        DirectPV<4, 4, T, VK>(acc_pv, p_pv, v, run.v_stride, l.key.dv, cols, &vq, nv, pf.v_stride,
                           pf.len);
      }
    } else if (nv) {
      // Nothing to accumulate here: still fetch the next run's values.
      const auto es = static_cast<std::int64_t>(sizeof(T));
      PrefetchRows(pf.v, pf.v_stride * es, pf.len, l.key.dv * es);
    }
    j = j1;
    run = next;
  }
}

// True when DirectRows serves a unit of `rows` query rows of this launch.
HWY_INLINE bool UseDirect(const Launch& l, std::int64_t rows) {
  const auto N = static_cast<std::int64_t>(hn::Lanes(DF()));
  return rows <= kDirectRows && l.key.dr == 0 && l.key.dk % N == 0 && l.key.dv % N == 0;
}

template <class T, Dq KK, Dq VK>
void RunRows(const Launch& l, std::int64_t b, std::int64_t h, const UnitRows& u,
             std::int64_t c0, std::int64_t c1, const Tiles& t) {
  if (UseDirect(l, u.count)) DirectRows<T, KK, VK>(l, b, h, u, c0, c1, t);
  else ProcessRows<T, KK, VK>(l, b, h, u, c0, c1, t);
}

// ProcessRows (or DirectRows) for the launch's KV dtype and antiquant kinds.
inline void ProcessRowsAny(const Launch& l, std::int64_t b, std::int64_t h, const UnitRows& u,
                           std::int64_t c0, std::int64_t c1, const Tiles& t) {
  switch (l.kv_t) {
    case DType::f16: return RunRows<half, Dq::none, Dq::none>(l, b, h, u, c0, c1, t);
    case DType::bf16: return RunRows<bfloat16, Dq::none, Dq::none>(l, b, h, u, c0, c1, t);
    case DType::i8: {
      const bool kc = l.kdq.per_channel(), vc = l.vdq.per_channel();
      using I8 = std::int8_t;
      if (kc && vc) return RunRows<I8, Dq::channel, Dq::channel>(l, b, h, u, c0, c1, t);
      if (kc) return RunRows<I8, Dq::channel, Dq::token>(l, b, h, u, c0, c1, t);
      if (vc) return RunRows<I8, Dq::token, Dq::channel>(l, b, h, u, c0, c1, t);
      return RunRows<I8, Dq::token, Dq::token>(l, b, h, u, c0, c1, t);
    }
    default: return RunRows<float, Dq::none, Dq::none>(l, b, h, u, c0, c1, t);
  }
}

// The slot `slot`'s scratch (Note [FIA workspace]).
inline std::byte* SlotBase(const Launch& l, std::int64_t slot) {
  return l.base + slot * l.p.plan.fast_slot_bytes;
}

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops::attention::fast
HWY_AFTER_NAMESPACE();

#endif  // NPUGRAPH_OPS_ATTENTION_FIA_SIMD_INL_H_
