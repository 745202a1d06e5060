// The direct path of the fast FIA kernels (Note [FIA fast kernels] in fia_fast.hpp): Q·K and
// P·V with K and V loaded and converted in registers (DirectScores, DirectPV) and the next run
// prefetched as the current one streams. Every function does the same float operations in the
// same order for the same inputs, whatever thread runs it (Note [FIA workspace]).
//
// Include guard for per-target re-inclusion (Highway's convention).
#if defined(NPUGRAPH_OPS_ATTENTION_FIA_SIMD_DIRECT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NPUGRAPH_OPS_ATTENTION_FIA_SIMD_DIRECT_INL_H_
#undef NPUGRAPH_OPS_ATTENTION_FIA_SIMD_DIRECT_INL_H_
#else
#define NPUGRAPH_OPS_ATTENTION_FIA_SIMD_DIRECT_INL_H_
#endif

#include <algorithm>
#include <cstdint>

#include "hwy/highway.h"
#include "ops/attention/fia_simd_core-inl.h"

HWY_BEFORE_NAMESPACE();
namespace npugraph::ops::attention::fast {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The cache lines of `rows` rows (`row_bytes` each) from `base`, one row per `stride` bytes.
// Locality hint 2 (x86: prefetcht1, into L2) rather than hwy::Prefetch's hint 3 (prefetcht0): a
// run is consumed a run later, so L2 is close enough, and L1's miss buffers stay free for the
// demand loads of the run being computed.
HWY_INLINE void PrefetchRows(const std::byte* base, std::int64_t stride, std::int64_t rows,
                             std::int64_t row_bytes) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = 0; o < row_bytes; o += 64)
      __builtin_prefetch(base + r * stride + o, 0, 2);
}

// Q·K of R query rows against `cols` KV rows of T converted in registers (no tile): scores
// s[r][c] = q_r · k_c, C columns at a time (R x C accumulators: 1 x 8, 3 x 4, 4 x 4, or 4 x 2 on 16 registers; enough
// independent FMA chains to cover the FMA latency). The rows of `ahead` (the next run,
// `ahead_rows` rows) are prefetched as the columns are consumed, one row per column.
template <int R, int C, class T, Dq K>
HWY_INLINE void DirectScores(const float* const* q, const T* k, std::int64_t stride,
                             std::int64_t D, std::int64_t cols, const DqRun* dq,
                             const T* ahead, std::int64_t ahead_stride, std::int64_t ahead_rows,
                             float* const* s) {
  static_assert((R * C) % 4 == 0);
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
      if constexpr (R == 1) {
        // Each column loaded into the FMA that uses it: C accumulators + 2 registers, where
        // loading every column first would need C more (17 for C = 8: one more than AVX2 has).
        const VF y = hn::Load(df, q[0] + d);
        for (int c = 0; c < C; ++c) a[0][c] = hn::MulAdd(y, LoadKv<T, K>(kc[c], d, dq, rs[c], ro[c]), a[0][c]);
      } else if constexpr (R * C + C + 1 > kVecRegs) {
        // Too many accumulators to hold every column too (3 x 4 on 16 registers): a column at a
        // time, the rows' queries read by the FMAs from memory (R C + 1 registers).
        for (int c = 0; c < C; ++c) {
          const VF x = LoadKv<T, K>(kc[c], d, dq, rs[c], ro[c]);
          for (int r = 0; r < R; ++r) a[r][c] = hn::MulAdd(hn::Load(df, q[r] + d), x, a[r][c]);
        }
      } else {
        VF x[C];
        for (int c = 0; c < C; ++c) x[c] = LoadKv<T, K>(kc[c], d, dq, rs[c], ro[c]);
        for (int r = 0; r < R; ++r) {
          const VF y = hn::Load(df, q[r] + d);
          for (int c = 0; c < C; ++c) a[r][c] = hn::MulAdd(y, x[c], a[r][c]);
        }
      }
    }
    // Four sums at a time over the accumulators in row-major order (a lane sum does not depend on
    // the vectors it is reduced beside, so every blocking gives the same scores).
    for (int i0 = 0; i0 < R * C; i0 += 4) {
      HWY_ALIGN float out[4];
      Reduce4(a[i0 / C][i0 % C], a[(i0 + 1) / C][(i0 + 1) % C], a[(i0 + 2) / C][(i0 + 2) % C],
              a[(i0 + 3) / C][(i0 + 3) % C], out);
      for (int i = i0; i < i0 + 4; ++i)
        if (j + i % C < cols) s[i / C][j + i % C] = out[i - i0];
    }
  }
}

// acc_r += sum_c p_r[c] * v_c for R rows, V rows of T converted in registers, W vectors of D
// at a time (R x W accumulators: 1 x 8, 3 x 4, 4 x 4, or 4 x 2 on 16 registers); `ahead` as in DirectScores, prefetched by the
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
      if constexpr (R == 1) {
        // As in DirectScores: each vector loaded into its FMA (W + 2 registers, not 2W + 1).
        const VF w = hn::Set(df, p[0][c]);
        for (int i = 0; i < W; ++i) a[0][i] = hn::MulAdd(w, LoadKv<T, K>(vc, d0 + i * N, dq, rs, ro), a[0][i]);
      } else if constexpr (R * W + W + 1 > kVecRegs) {
        // 3 x 4 on 16 registers: the rows' weights first, then a vector at a time (R W + R + 1).
        VF w[R];
        for (int r = 0; r < R; ++r) w[r] = hn::Set(df, p[r][c]);
        for (int i = 0; i < W; ++i) {
          const VF x = LoadKv<T, K>(vc, d0 + i * N, dq, rs, ro);
          for (int r = 0; r < R; ++r) a[r][i] = hn::MulAdd(w[r], x, a[r][i]);
        }
      } else {
        VF x[W];
        for (int i = 0; i < W; ++i) x[i] = LoadKv<T, K>(vc, d0 + i * N, dq, rs, ro);
        for (int r = 0; r < R; ++r) {
          const VF w = hn::Set(df, p[r][c]);
          for (int i = 0; i < W; ++i) a[r][i] = hn::MulAdd(w, x[i], a[r][i]);
        }
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

// The direct path of the run walker (WalkRuns in fia_simd-inl.h), for units of at most
// kDirectRows query rows (decode at small GQA groups): K and V are converted in registers as they
// are used instead of through float32 tiles, and the next run's rows are prefetched while each
// phase streams (K during Q·K, V during P·V), so the loads stay evenly spread over the run. Rows
// are computed in blocks of R (1, 3 or 4; 2 rows run as 4 with the extra rows discarded, 3 rows
// (GQA 3: SmolLM2) as 3, a quarter fewer FMAs than as 4: a row's scores and accumulator take the
// same operations in the same order whatever rows are blocked beside it).
inline constexpr std::int64_t kDirectRows = 4;

template <class T, Dq KK, Dq VK>
struct DirectPath {
  const FiaLaunch& l;
  std::int64_t h;
  DqRun kq, vq;
  // Spare rows of a 4-row block: a zero query, scores and an accumulator that are dropped. The
  // tiles are unused on this path: the value tile holds the accumulator (fast_dv floats), the key
  // tile the scores (kFastChunk floats) followed by the zero query (fast_dk floats).
  float* spare_acc;
  float* spare_s;
  const float* zero_q;

  DirectPath(const FiaLaunch& launch, const Tiles& t, std::int64_t head)
      : l(launch), h(head), spare_acc(t.v), spare_s(t.k), zero_q(t.k + kFastChunk) {
    std::fill(t.k, t.k + kFastChunk + l.p.plan.fast_dk, 0.0f);
    std::fill(spare_acc, spare_acc + l.p.plan.fast_dv, 0.0f);
  }

  HWY_INLINE void Scores(const KvRun& run, const KvRun& pf, const float** qa, std::int64_t na,
                         float** sa) {
    if constexpr (KK != Dq::none) dequant(l.kdq, run, h, run.len, l.key.dk, kq);
    const T* k = reinterpret_cast<const T*>(run.k);
    const T* nk = reinterpret_cast<const T*>(pf.k);
    if (na == 1) {
      DirectScores<1, 8, T, KK>(qa, k, run.k_stride, l.key.dk, run.len, &kq, nk, pf.k_stride,
                                pf.len, sa);
      return;
    }
    // 3 rows (GQA 3) x 4 columns: no spare row's FMAs (the same bits: a row's scores do not
    // depend on the rows beside it). On 16 registers its 12 accumulators leave room for one column.
    if (na == 3) {
      DirectScores<3, 4, T, KK>(qa, k, run.k_stride, l.key.dk, run.len, &kq, nk, pf.k_stride,
                                pf.len, sa);
      return;
    }
    for (std::int64_t a = na; a < kDirectRows; ++a) {
      qa[a] = zero_q;
      sa[a] = spare_s;
    }
    // 4 rows x C columns: 4C accumulators + C + 1 registers (C = 2 on 16 registers).
    constexpr int C = kVecRegs >= 32 ? 4 : 2;
    DirectScores<4, C, T, KK>(qa, k, run.k_stride, l.key.dk, run.len, &kq, nk, pf.k_stride,
                              pf.len, sa);
  }

  HWY_INLINE void PV(const KvRun& run, const KvRun& pf, float** acc, const float** p,
                     std::int64_t npv) {
    if constexpr (VK != Dq::none) dequant(l.vdq, run, h, run.len, l.key.dv, vq);
    const T* v = reinterpret_cast<const T*>(run.v);
    const T* nv = reinterpret_cast<const T*>(pf.v);
    if (npv == 1) {
      DirectPV<1, 8, T, VK>(acc, p, v, run.v_stride, l.key.dv, run.len, &vq, nv, pf.v_stride,
                            pf.len);
      return;
    }
    if (npv == 3) {  // GQA 3: 3 x 4 accumulators (no spare row)
      DirectPV<3, 4, T, VK>(acc, p, v, run.v_stride, l.key.dv, run.len, &vq, nv, pf.v_stride, pf.len);
      return;
    }
    for (std::int64_t a = npv; a < kDirectRows; ++a) {
      acc[a] = spare_acc;
      p[a] = spare_s;
    }
    // 4 rows x W vectors: 4W accumulators + W + 1 registers (W = 2 on 16 registers).
    constexpr int W = kVecRegs >= 32 ? 4 : 2;
    DirectPV<4, W, T, VK>(acc, p, v, run.v_stride, l.key.dv, run.len, &vq, nv, pf.v_stride,
                          pf.len);
  }

  // Nothing to accumulate here: still fetch the next run's values.
  HWY_INLINE void NoPV(const KvRun& pf) {
    if (!pf.v) return;
    const auto es = static_cast<std::int64_t>(sizeof(T));
    PrefetchRows(pf.v, pf.v_stride * es, pf.len, l.key.dv * es);
  }
};

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops::attention::fast
HWY_AFTER_NAMESPACE();

#endif  // NPUGRAPH_OPS_ATTENTION_FIA_SIMD_DIRECT_INL_H_
