// The tile path of the fast FIA kernels (Note [FIA fast kernels] in fia_fast.hpp): key/value
// runs converted to zero-padded float32 tiles (ConvertRows), Q·K of a set of query rows against a
// key tile, 4 rows x 4 columns (AVX-512) or 4 x 2 register-blocked (1 row x 4 columns for the
// rest), four horizontal sums folded into one (ChunkScores), and acc += P·V, 4 rows x 4 (AVX-512)
// or 2 vectors register-blocked (AccumulatePV). Every function does the same float operations in
// the same order for the same inputs, whatever thread runs it (Note [FIA workspace]).
//
// Include guard for per-target re-inclusion (Highway's convention).
#if defined(NPUGRAPH_OPS_ATTENTION_FIA_SIMD_TILES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NPUGRAPH_OPS_ATTENTION_FIA_SIMD_TILES_INL_H_
#undef NPUGRAPH_OPS_ATTENTION_FIA_SIMD_TILES_INL_H_
#else
#define NPUGRAPH_OPS_ATTENTION_FIA_SIMD_TILES_INL_H_
#endif

#include <algorithm>
#include <cstdint>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "ops/attention/fia_simd_core-inl.h"

HWY_BEFORE_NAMESPACE();
namespace npugraph::ops::attention::fast {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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

// The tile path of the run walker (WalkRuns in fia_simd-inl.h): each run's keys (with the key
// rope) and values converted once to float32 tiles, shared by all the unit's rows; the next run is
// prefetched during the conversions.
template <class T, Dq KK, Dq VK>
struct TilePath {
  const FiaLaunch& l;
  const Tiles& t;
  std::int64_t h;
  DqRun kq, vq;

  TilePath(const FiaLaunch& launch, const Tiles& tiles, std::int64_t head)
      : l(launch), t(tiles), h(head) {}

  // s[a] = q[a] · k for the `na` active rows, over the run's columns.
  HWY_INLINE void Scores(const KvRun& run, const KvRun& pf, const float** qa, std::int64_t na,
                         float** sa) {
    if constexpr (KK != Dq::none) dequant(l.kdq, run, h, run.len, l.key.dk, kq);
    ConvertRows<T, KK>(run.k, run.k_stride, l.key.dk, run.kr, run.kr_stride, l.key.dr, run.len,
                       t.k, l.p.plan.fast_dk, pf.k, pf.k_stride, pf.len, &kq);
    ChunkScores(qa, na, t.k, l.p.plan.fast_dk, run.len, sa);
  }
  // acc[a] += p[a] · v for the `npv` rows that take part.
  HWY_INLINE void PV(const KvRun& run, const KvRun& pf, float** acc, const float** p,
                     std::int64_t npv) {
    if constexpr (VK != Dq::none) dequant(l.vdq, run, h, run.len, l.key.dv, vq);
    ConvertRows<T, VK>(run.v, run.v_stride, l.key.dv, nullptr, 0, 0, run.len, t.v,
                       l.p.plan.fast_dv, pf.v, pf.v_stride, pf.len, &vq);
    AccumulatePV(acc, p, npv, t.v, l.p.plan.fast_dv, run.len);
  }
  // No row takes part in P·V: the values are neither converted nor prefetched.
  HWY_INLINE void NoPV(const KvRun&) {}
};

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops::attention::fast
HWY_AFTER_NAMESPACE();

#endif  // NPUGRAPH_OPS_ATTENTION_FIA_SIMD_TILES_INL_H_
