// The SIMD building blocks of the fast FIA kernels (Note [FIA fast kernels] in fia_fast.hpp),
// shared by the tile path (fia_simd_tiles-inl.h) and the direct path (fia_simd_direct-inl.h):
// loads of key/value rows as float32 (float16, bfloat16, int8 dequantised), the horizontal sums,
// and the slot's tiles. Compiled once per Highway target, like every -inl.h here.
//
// Include guard for per-target re-inclusion (Highway's convention).
#if defined(NPUGRAPH_OPS_ATTENTION_FIA_SIMD_CORE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NPUGRAPH_OPS_ATTENTION_FIA_SIMD_CORE_INL_H_
#undef NPUGRAPH_OPS_ATTENTION_FIA_SIMD_CORE_INL_H_
#else
#define NPUGRAPH_OPS_ATTENTION_FIA_SIMD_CORE_INL_H_
#endif

#include <cstdint>
#include <type_traits>

#include "hwy/highway.h"
#include "ops/convert/float_convert-inl.h"
#include "ops/attention/fia_fast.hpp"

HWY_BEFORE_NAMESPACE();
namespace npugraph::ops::attention::fast {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Vector registers of the target, for register blocking: 16 below AVX-512 on x86 (ymm/xmm0-15),
// 32 on AVX-512 and elsewhere. A block that needs more than the target has spills an accumulator
// to the stack, and its FMA chain then waits on a store and a reload every step.
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
inline constexpr int kVecRegs = 16;
#else
inline constexpr int kVecRegs = 32;
#endif

// Query rows one unit holds at most (decode: a GQA group of 64 heads x kDecodeMaxSeq rows).
inline constexpr std::int64_t kMaxUnitRows = 64 * kDecodeMaxSeq;
static_assert(kPrefillRows <= kMaxUnitRows);

// How rows are dequantised as they are loaded (int8 KV, DqRun): not at all (float types), with
// per-channel vectors, or with one scale/offset per row.
enum class Dq { none, channel, token };

// N elements of T at p as float32 (exact on every target: float_convert-inl.h).
template <class T>
HWY_INLINE VF LoadAsFloat(const T* HWY_RESTRICT p) {
  return convert::HWY_NAMESPACE::LoadAsFloat(DF(), p);
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

// The slot's tiles: key and value tiles and the scores of up to kMaxUnitRows rows.
struct Tiles {
  float* k;
  float* v;
  float* score;
};

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops::attention::fast
HWY_AFTER_NAMESPACE();

#endif  // NPUGRAPH_OPS_ATTENTION_FIA_SIMD_CORE_INL_H_
