// The SIMD core of the fast FIA kernels (Note [FIA fast kernels] in fia_fast.hpp), compiled once
// per Highway target by the files that include it after hwy/foreach_target.h (fia_fast_decode.cpp,
// fia_fast_prefill.cpp): the softmax step (scale, band/mask/pse, the online-softmax update,
// vectorised exp) and the one run walker (WalkRuns) that drives a unit's query rows over its KV
// columns with either path, tiles (fia_simd_tiles-inl.h) or direct (fia_simd_direct-inl.h).
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
#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "ops/attention/fia_simd_direct-inl.h"
#include "ops/attention/fia_simd_tiles-inl.h"
#include "ops/attention/softmax_state.hpp"

HWY_BEFORE_NAMESPACE();
namespace npugraph::ops::attention::fast {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One row's chunk of scores s[0..cols) (columns j0..j0+cols): scaled, masked outside the row's
// band [lo, hi) and by the mask, pse added, then turned into probabilities exp(s - max) in place
// (padding up to whole vectors is set to 0). Updates the row's state; returns the factor the
// accumulator must be scaled by, or 0 with *skip set when the row is still empty.
HWY_INLINE float SoftmaxChunk(const FiaLaunch& l, const Row& row, std::int64_t j0, std::int64_t cols,
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
    bias(l, row, j0 + a, b - a, s + a);
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

// The softmax step of one chunk for the `na` active rows idx[0..na) of `u` (their scores in
// sa[0..na)): updates each row's state, rescales its accumulator, and lists the rows that take part
// in P·V (acc_pv, p_pv); returns how many do.
template <class Units>
HWY_INLINE std::int64_t SoftmaxRows(const FiaLaunch& l, const Units& u, const std::int64_t* idx,
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

// The run walker: the rows of `u` (batch b, KV head h) over KV columns [c0, c1) in runs of at
// most kFastChunk columns that never cross a paged block or the shared prefix. Per run that some
// row sees: the path's scores, the softmax step, then the path's P·V (or NoPV when no row takes
// part); the next run (or the worker's next unit's first, u.after) is what the path prefetches.
// One function per path (not inlined into its caller): the path object is a local, so its
// members stay in registers across the loop, and each path's loops are compiled on their own.
template <class Path>
HWY_NOINLINE void WalkRuns(const FiaLaunch& l, std::int64_t b, std::int64_t h, const UnitRows& u,
                           std::int64_t c0, std::int64_t c1, const Tiles& t) {
  Path path(l, t, h);
  const std::int64_t dvp = l.p.plan.fast_dv;
  const float* qa[kMaxUnitRows];
  float* sa[kMaxUnitRows];
  float* acc_pv[kMaxUnitRows];
  const float* p_pv[kMaxUnitRows];
  std::int64_t idx[kMaxUnitRows];
  if (c0 >= c1) return;
  KvRun run = run_at(l, b, h, c0, std::min(kFastChunk, c1 - c0));
  for (std::int64_t j = c0; j < c1;) {
    const std::int64_t cols = run.len, j1 = j + cols;
    // The next run, prefetched while this one is computed (DRAM latency, not bandwidth, limits
    // one thread's stream otherwise).
    KvRun next;
    if (j1 < c1) next = run_at(l, b, h, j1, std::min(kFastChunk, c1 - j1));
    const KvRun& pf = j1 < c1 ? next : u.after;
    const std::int64_t na = ActiveRows(u, j, j1, t, idx, qa, sa);
    if (na > 0) {
      path.Scores(run, pf, qa, na, sa);
      const std::int64_t npv = SoftmaxRows(l, u, idx, na, j, cols, sa, dvp, acc_pv, p_pv);
      if (npv > 0) path.PV(run, pf, acc_pv, p_pv, npv);
      else path.NoPV(pf);
    }
    j = j1;
    run = next;
  }
}

// True when the direct path serves a unit of `rows` query rows of this launch.
HWY_INLINE bool UseDirect(const FiaLaunch& l, std::int64_t rows) {
  const auto N = static_cast<std::int64_t>(hn::Lanes(DF()));
  return rows <= kDirectRows && l.key.dr == 0 && l.key.dk % N == 0 && l.key.dv % N == 0;
}

template <class T, Dq KK, Dq VK>
void RunRows(const FiaLaunch& l, std::int64_t b, std::int64_t h, const UnitRows& u,
             std::int64_t c0, std::int64_t c1, const Tiles& t) {
  if (UseDirect(l, u.count)) WalkRuns<DirectPath<T, KK, VK>>(l, b, h, u, c0, c1, t);
  else WalkRuns<TilePath<T, KK, VK>>(l, b, h, u, c0, c1, t);
}

// The unit's rows over [c0, c1) for the launch's KV dtype and antiquant kinds.
inline void ProcessRowsAny(const FiaLaunch& l, std::int64_t b, std::int64_t h, const UnitRows& u,
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
inline std::byte* SlotBase(const FiaLaunch& l, std::int64_t slot) {
  return l.base + slot * l.p.plan.fast_slot_bytes;
}

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops::attention::fast
HWY_AFTER_NAMESPACE();

#endif  // NPUGRAPH_OPS_ATTENTION_FIA_SIMD_INL_H_
