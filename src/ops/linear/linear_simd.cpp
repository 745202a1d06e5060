// The linear kernels' SIMD code, compiled once per Highway target (Note [Linear kernels] in
// linear_params.hpp): weight sources that turn one block of a weight row into float32 vectors,
// the R x TB register tile that accumulates them against rows of x, and the GEMV / GEMM drivers.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/linear/linear_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "hwy/highway.h"
#include "ops/convert/float_convert-inl.h"
#include "npugraph/error.hpp"
#include "npugraph/kernel.hpp"
#include "ops/linear/linear_common.hpp"
#include "ops/linear/linear_params.hpp"
#include "ops/linear/quant_pack.hpp"

HWY_BEFORE_NAMESPACE();
namespace npugraph::ops::linear_impl {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using DI = hn::RebindToSigned<DF>;
using VI = hn::Vec<DI>;
using DU8 = hn::Rebind<std::uint8_t, DI>;
using DI8 = hn::Rebind<std::int8_t, DI>;

constexpr std::int64_t kL = static_cast<std::int64_t>(hn::MaxLanes(DF()));
// The lookup-table dequantisation needs 16 float lanes (one per nibble value).
constexpr bool kLut = kL == 16;
// Register tile: R weight rows x TB rows of x (accumulators R * TB; 32 vector registers on the
// 16-lane targets, 16 on the others). Tile shapes change only the speed, never the values. (A 2 x 8
// tile for T >= 8 compiles to a clean loop but ran 1.4x slower than two passes of 4 x 4 on the
// Xeon development VM: 32 memory-operand FMAs per block saturate the 512-bit load ports.)
struct Narrow {
  static constexpr int kR = 4;
  static constexpr int kTB = kL >= 16 ? 4 : 2;
};

inline std::uint16_t load_u16(const std::byte* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// lut[nibble v of each packed byte in q] (v = 0: the low nibbles, 1: the high ones).
HWY_INLINE VF Lookup(VF lut, VI q, int v) {
  const DF df;
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)
  // vpermps reads bits 3:0 of each index (Intel SDM), so the low nibbles need no mask: one vector
  // instruction less per block (about 12 % of the GEMV's vector work), without the range check
  // IndicesFromVec makes in debug and sanitizer builds.
  if (v == 0) return hn::TableLookupLanes(lut, hn::Indices512<float>{q.raw});
#else
  if (v == 0) return hn::TableLookupLanes(lut, hn::IndicesFromVec(df, hn::And(q, hn::Set(DI(), 15))));
#endif
  return hn::TableLookupLanes(lut, hn::IndicesFromVec(df, hn::ShiftRight<4>(q)));
}

// ---- weight sources: one block of a row -> kVecs float32 vectors -----------------------------------
// Prepare(block) reads what the whole block shares (scales, packed quants); Get(state, block, v)
// gives vector v (elements [v * kL, (v + 1) * kL) of the block), each element exactly ggml's
// dequantised value.

template <GgmlType F>
struct Src;

template <>
struct Src<GgmlType::Q4_1> {
  static constexpr std::int64_t kElems = 32;
  static constexpr std::int64_t kBytes = 20;
  static constexpr int kVecs = static_cast<int>(kElems / kL);
  const float* table;
  struct State {
    VF a, b;  // LUT: a = the 16 values n * d + m; else a = d, b = m
    VI q;     // LUT: the 16 packed bytes, widened
  };
  HWY_INLINE State Prepare(const std::byte* blk) const {
    const DF df;
    State s;
    const VF d = hn::Set(df, table[load_u16(blk)]);
    const VF m = hn::Set(df, table[load_u16(blk + 2)]);
    if constexpr (kLut) {
      s.a = hn::Add(hn::Mul(hn::Iota(df, 0.0f), d), m);
      s.q = hn::PromoteTo(DI(), hn::LoadU(DU8(), reinterpret_cast<const std::uint8_t*>(blk + 4)));
      s.b = m;
    } else {
      s.a = d;
      s.b = m;
      s.q = hn::Zero(DI());
    }
    return s;
  }
  HWY_INLINE VF Get(const State& s, const std::byte* blk, int v) const {
    const DF df;
    const DI di;
    if constexpr (kLut) {
      return Lookup(s.a, s.q, v);
    } else {
      const std::int64_t e0 = v * kL;
      const VI q = hn::PromoteTo(
          di, hn::LoadU(DU8(), reinterpret_cast<const std::uint8_t*>(blk + 4) + e0 % 16));
      const VI n = e0 < 16 ? hn::And(q, hn::Set(di, 15)) : hn::ShiftRight<4>(q);
      return hn::Add(hn::Mul(hn::ConvertTo(df, n), s.a), s.b);
    }
  }
};

template <>
struct Src<GgmlType::Q4_0> {
  static constexpr std::int64_t kElems = 32;
  static constexpr std::int64_t kBytes = 18;
  static constexpr int kVecs = static_cast<int>(kElems / kL);
  const float* table;
  struct State {
    VF a;  // LUT: the 16 values (n - 8) * d; else d
    VI q;
  };
  HWY_INLINE State Prepare(const std::byte* blk) const {
    const DF df;
    State s;
    const VF d = hn::Set(df, table[load_u16(blk)]);
    if constexpr (kLut) {
      s.a = hn::Mul(hn::Iota(df, -8.0f), d);
      s.q = hn::PromoteTo(DI(), hn::LoadU(DU8(), reinterpret_cast<const std::uint8_t*>(blk + 2)));
    } else {
      s.a = d;
      s.q = hn::Zero(DI());
    }
    return s;
  }
  HWY_INLINE VF Get(const State& s, const std::byte* blk, int v) const {
    const DF df;
    const DI di;
    if constexpr (kLut) {
      return Lookup(s.a, s.q, v);
    } else {
      const std::int64_t e0 = v * kL;
      const VI q = hn::PromoteTo(
          di, hn::LoadU(DU8(), reinterpret_cast<const std::uint8_t*>(blk + 2) + e0 % 16));
      const VI n = e0 < 16 ? hn::And(q, hn::Set(di, 15)) : hn::ShiftRight<4>(q);
      return hn::Mul(hn::ConvertTo(df, hn::Sub(n, hn::Set(di, 8))), s.a);
    }
  }
};

template <>
struct Src<GgmlType::Q8_0> {
  static constexpr std::int64_t kElems = 32;
  static constexpr std::int64_t kBytes = 34;
  static constexpr int kVecs = static_cast<int>(kElems / kL);
  const float* table;
  struct State {
    VF d;
  };
  HWY_INLINE State Prepare(const std::byte* blk) const {
    return State{hn::Set(DF(), table[load_u16(blk)])};
  }
  HWY_INLINE VF Get(const State& s, const std::byte* blk, int v) const {
    const VI q = hn::PromoteTo(
        DI(), hn::LoadU(DI8(), reinterpret_cast<const std::int8_t*>(blk + 2) + v * kL));
    return hn::Mul(hn::ConvertTo(DF(), q), s.d);
  }
};

// Float rows: a "block" is one vector; K % kL trailing elements are handled by the tile's tail.
template <class T>
struct FloatSrc {
  static constexpr std::int64_t kElems = kL;
  static constexpr std::int64_t kBytes = kL * static_cast<std::int64_t>(sizeof(T));
  static constexpr int kVecs = 1;
  const float* table;
  struct State {};
  HWY_INLINE State Prepare(const std::byte*) const { return {}; }
  HWY_INLINE VF Get(const State&, const std::byte* blk, int) const { return Load(blk); }
  static HWY_INLINE VF Load(const std::byte* p) {
    // Exact on every target (float_convert-inl.h).
    return convert::HWY_NAMESPACE::LoadAsFloat(DF(), reinterpret_cast<const T*>(p));
  }
  static float Scalar(const std::byte* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return static_cast<float>(v);
  }
};
template <> struct Src<GgmlType::F32> : FloatSrc<float> {};
template <> struct Src<GgmlType::F16> : FloatSrc<half> {};
template <> struct Src<GgmlType::BF16> : FloatSrc<bfloat16> {};

// Q5_0 and the K-quants: each vector's quants assembled from their bytes in integer lanes, then
// converted and scaled with the block's (sub-block's) float scale, the values of
// quant_formats.cpp bit for bit (exact products; Q4_K / Q5_K subtract the minimum in one rounding).
// A vector never straddles a 16-element half or sub-block: kL divides 16.
static_assert(16 % kL == 0);

inline VI LoadBytes(const std::byte* p) {
  return hn::PromoteTo(DI(), hn::LoadU(DU8(), reinterpret_cast<const std::uint8_t*>(p)));
}

#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)
// 32-entry lookups on AVX-512: vpermt2ps reads bits 4:0 of each index (lo for 0-15, hi for 16-31).
constexpr bool kLut32 = true;
HWY_INLINE VF Lookup32(VF lo, VF hi, VI idx) { return VF{_mm512_permutex2var_ps(lo.raw, idx.raw, hi.raw)}; }
// idx | 16 in the lanes whose bit is set in `bits`.
HWY_INLINE VI OrBit4(VI idx, std::uint32_t bits) {
  return VI{_mm512_mask_or_epi32(idx.raw, static_cast<__mmask16>(bits), idx.raw, _mm512_set1_epi32(16))};
}
// Bit b of each of 16 bytes at p, as a lane mask.
HWY_INLINE std::uint32_t ByteBits(const std::byte* p, int b) {
  return _mm_test_epi8_mask(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), _mm_set1_epi8(static_cast<char>(1 << b)));
}
#else
constexpr bool kLut32 = false;
#endif

// Q5_0: with kLut32, the 32 values (n - 16) * d as two 16-lane tables indexed by nibble | bit << 4;
// else the quants assembled and converted.
template <>
struct Src<GgmlType::Q5_0> {
  static constexpr std::int64_t kElems = 32;
  static constexpr std::int64_t kBytes = 22;
  static constexpr int kVecs = static_cast<int>(kElems / kL);
  const float* table;
  struct State {
    VF d, hi;  // kLut32: d = the table for n < 16, hi for n >= 16; else d
    VI q;      // kLut32: the 16 packed bytes, widened; else the 32 fifth bits, broadcast
    std::uint32_t qh;
  };
  HWY_INLINE State Prepare(const std::byte* blk) const {
    const DF df;
    State s;
    std::memcpy(&s.qh, blk + 2, 4);
    const VF d = hn::Set(df, table[load_u16(blk)]);
    if constexpr (kLut32) {
      s.d = hn::Mul(hn::Iota(df, -16.0f), d);
      s.hi = hn::Mul(hn::Iota(df, 0.0f), d);
      s.q = LoadBytes(blk + 6);
    } else {
      s.d = d;
      s.hi = d;
      s.q = hn::Set(DI(), static_cast<std::int32_t>(s.qh));
    }
    return s;
  }
  HWY_INLINE VF Get(const State& s, const std::byte* blk, int v) const {
    const DI di;
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)
    const VI idx = v == 0 ? hn::And(s.q, hn::Set(di, 15)) : hn::ShiftRight<4>(s.q);
    return Lookup32(s.d, s.hi, OrBit4(idx, v == 0 ? s.qh & 0xffffu : s.qh >> 16));
#else
    const int e0 = v * static_cast<int>(kL);
    const VI q = LoadBytes(blk + 6 + e0 % 16);
    const VI low = e0 < 16 ? hn::And(q, hn::Set(di, 15)) : hn::ShiftRight<4>(q);
    const VI high = hn::And(hn::Shr(s.q, hn::Iota(di, e0)), hn::Set(di, 1));  // bit e of qh
    const VI n = hn::Or(low, hn::ShiftLeft<4>(high));
    return hn::Mul(hn::ConvertTo(DF(), hn::Sub(n, hn::Set(di, 16))), s.d);
#endif
  }
};

// Q4_K (kFive false) and Q5_K: 8 sub-blocks of 32, each x = (d * sc) * q - dmin * m. With the
// lookup tables, each sub-block's 16 (Q5_K: 32) values are computed once per block.
template <bool kFive>
struct KQuant45Src {
  static constexpr std::int64_t kElems = 256;
  static constexpr std::int64_t kBytes = kFive ? 176 : 144;
  static constexpr int kVecs = static_cast<int>(kElems / kL);
  static constexpr std::int64_t kQs = kFive ? 48 : 16;  // where the nibbles start
  static constexpr bool kTables = kFive ? kLut32 : kLut;
  const float* table;
  struct Scalars {
    float dl[8], ml[8];
  };
  struct Tables {
    VF lo[8], hi[kFive ? 8 : 1];
  };
  using State = std::conditional_t<kTables, Tables, Scalars>;
  HWY_INLINE State Prepare(const std::byte* blk) const {
    State st;
    const float d = table[load_u16(blk)], dmin = table[load_u16(blk + 2)];
    const auto* sc = reinterpret_cast<const std::uint8_t*>(blk + 4);
    for (int j = 0; j < 8; ++j) {
      const int scale = j < 4 ? sc[j] & 63 : (sc[j + 4] & 0xf) | ((sc[j - 4] >> 6) << 4);
      const int min = j < 4 ? sc[j + 4] & 63 : (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
      const float dl = d * static_cast<float>(scale), ml = dmin * static_cast<float>(min);
      if constexpr (kTables) {
        const DF df;
        st.lo[j] = hn::Sub(hn::Mul(hn::Iota(df, 0.0f), hn::Set(df, dl)), hn::Set(df, ml));
        if constexpr (kFive) st.hi[j] = hn::Sub(hn::Mul(hn::Iota(df, 16.0f), hn::Set(df, dl)), hn::Set(df, ml));
      } else {
        st.dl[j] = dl;
        st.ml[j] = ml;
      }
    }
    return st;
  }
  HWY_INLINE VF Get(const State& st, const std::byte* blk, int v) const {
    const DI di;
    const int e0 = v * static_cast<int>(kL), sub = e0 / 32, l0 = e0 % 32;
    const VI q = LoadBytes(blk + kQs + 32 * (sub / 2) + l0);
    if constexpr (kTables) {
      if constexpr (kFive) {
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)
        const VI idx = sub % 2 == 0 ? hn::And(q, hn::Set(di, 15)) : hn::ShiftRight<4>(q);
        return Lookup32(st.lo[sub], st.hi[sub], OrBit4(idx, ByteBits(blk + 16 + l0, sub)));
#endif
      } else {
        return Lookup(st.lo[sub], q, sub % 2);
      }
    } else {
      VI n = sub % 2 == 0 ? hn::And(q, hn::Set(di, 15)) : hn::ShiftRight<4>(q);
      if constexpr (kFive) {
        const VI h = LoadBytes(blk + 16 + l0);  // qh[l]: bit `sub` is element (sub, l)'s fifth bit
        n = hn::Or(n, hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, sub), hn::Set(di, 1))));
      }
      const VF p = hn::Mul(hn::ConvertTo(DF(), n), hn::Set(DF(), st.dl[sub]));
      return hn::Sub(p, hn::Set(DF(), st.ml[sub]));
    }
  }
};

// Q6_K: 16 sub-blocks of 16, x = (d * sc) * (q - 32), q = 4 low bits | 2 high bits << 4.
template <>
struct Src<GgmlType::Q6_K> {
  static constexpr std::int64_t kElems = 256;
  static constexpr std::int64_t kBytes = 210;
  static constexpr int kVecs = static_cast<int>(kElems / kL);
  const float* table;
  struct State {
    float dl[16];
  };
  HWY_INLINE State Prepare(const std::byte* blk) const {
    State st;
    const float d = table[load_u16(blk + 208)];
    const auto* sc = reinterpret_cast<const std::int8_t*>(blk + 192);
    for (int j = 0; j < 16; ++j) st.dl[j] = d * static_cast<float>(sc[j]);
    return st;
  }
  HWY_INLINE VF Get(const State& st, const std::byte* blk, int v) const {
    const DI di;
    const int e0 = v * static_cast<int>(kL), h = e0 / 128, r0 = e0 % 128;
    const VI lo = LoadBytes(blk + 64 * h + r0 % 64);
    const VI hi = LoadBytes(blk + 128 + 32 * h + r0 % 32);
    const VI low = r0 < 64 ? hn::And(lo, hn::Set(di, 15)) : hn::ShiftRight<4>(lo);
    const VI high = hn::And(hn::ShiftRightSame(hi, 2 * (r0 / 32)), hn::Set(di, 3));
    const VI q = hn::Sub(hn::Or(low, hn::ShiftLeft<4>(high)), hn::Set(di, 32));
    return hn::Mul(hn::ConvertTo(DF(), q), hn::Set(DF(), st.dl[e0 / 16]));
  }
};
template <> struct Src<GgmlType::Q4_K> : KQuant45Src<false> {};
template <> struct Src<GgmlType::Q5_K> : KQuant45Src<true> {};

template <class S>
constexpr bool kIsFloat = S::kVecs == 1 && S::kElems == kL;

// ---- the register tile -----------------------------------------------------------------------------

// A quantised block on a target without the lookup table (8 lanes or fewer: 16 vector registers on
// x86) is computed one weight row at a time, its x vectors reloaded from L1 for each row: all R
// rows at once keep R block states (scale and min) and R dequantised vectors live beside the R x TB
// accumulators, more than 16 registers, and the spilled accumulators then wait on a store and a
// reload in every step. Each accumulator sees the same operations in the same order either way.
template <class S>
constexpr bool kRowAtATime = !kLut && S::kVecs > 1;

// res[r][t] = sum_k x[t * xs + k] * w_r[k] for R rows w[r] and TB rows of x, as Note [Linear
// kernels] defines the order: one MulAdd chain per output over the vectors of k, a zero-padded
// last vector for float rows whose K is not a multiple of kL, then one horizontal sum.
template <class S, int R, int TB>
HWY_INLINE void Tile(const S& s, const std::byte* const* w, const float* HWY_RESTRICT x,
                     std::int64_t xs, std::int64_t K, float (&res)[R][TB]) {
  const DF df;
  VF acc[R][TB];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TB; ++t) acc[r][t] = hn::Zero(df);
  const std::int64_t nb = K / S::kElems;
  for (std::int64_t b = 0; b < nb; ++b) {
    if constexpr (kRowAtATime<S>) {
      for (int r = 0; r < R; ++r) {
        const std::byte* blk = w[r] + b * S::kBytes;
        const typename S::State st = s.Prepare(blk);
        for (int v = 0; v < S::kVecs; ++v) {
          const VF wv = s.Get(st, blk, v);
          const float* xb = x + b * S::kElems + v * kL;
          for (int t = 0; t < TB; ++t) acc[r][t] = hn::MulAdd(hn::LoadU(df, xb + t * xs), wv, acc[r][t]);
        }
      }
      continue;
    }
    typename S::State st[R];
    const std::byte* blk[R];
    for (int r = 0; r < R; ++r) {
      blk[r] = w[r] + b * S::kBytes;
      st[r] = s.Prepare(blk[r]);
    }
    for (int v = 0; v < S::kVecs; ++v) {
      VF wv[R];
      for (int r = 0; r < R; ++r) wv[r] = s.Get(st[r], blk[r], v);
      const float* xb = x + b * S::kElems + v * kL;
      for (int t = 0; t < TB; ++t) {
        const VF xv = hn::LoadU(df, xb + t * xs);
        for (int r = 0; r < R; ++r) acc[r][t] = hn::MulAdd(xv, wv[r], acc[r][t]);
      }
    }
  }
  if constexpr (kIsFloat<S>) {
    const std::int64_t k0 = nb * kL, rem = K - k0;
    if (rem > 0) {
      constexpr std::int64_t es = S::kBytes / kL;
      HWY_ALIGN float wt[R][kL];
      HWY_ALIGN float xt[TB][kL];
      for (int r = 0; r < R; ++r)
        for (std::int64_t i = 0; i < kL; ++i) wt[r][i] = i < rem ? S::Scalar(w[r] + (k0 + i) * es) : 0.0f;
      for (int t = 0; t < TB; ++t)
        for (std::int64_t i = 0; i < kL; ++i) xt[t][i] = i < rem ? x[t * xs + k0 + i] : 0.0f;
      for (int t = 0; t < TB; ++t) {
        const VF xv = hn::Load(df, xt[t]);
        for (int r = 0; r < R; ++r) acc[r][t] = hn::MulAdd(xv, hn::Load(df, wt[r]), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TB; ++t) res[r][t] = hn::GetLane(hn::SumOfLanes(df, acc[r][t]));
}

// Rows [n0, n0 + R) against rows [t0, t0 + TB) of x, written to y.
template <class S, int R, int TB>
HWY_INLINE void TileOut(const LinearParams& p, const S& s, const std::byte* const* w,
                        std::int64_t n0, std::int64_t t0) {
  float res[R][TB];
  Tile<S, R, TB>(s, w, p.x + t0 * p.x_stride, p.x_stride, p.K, res);
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TB; ++t) store_out(p, t0 + t, n0 + r, res[r][t]);
}

// All T rows of x against the R weight rows w (n0 their first row), kTB rows at a time.
template <class S, int R, int kTB>
HWY_INLINE void RowsAllT(const LinearParams& p, const S& s, const std::byte* const* w,
                         std::int64_t n0) {
  std::int64_t t0 = 0;
  for (; t0 + kTB <= p.T; t0 += kTB) TileOut<S, R, kTB>(p, s, w, n0, t0);
  switch (p.T - t0) {
    case 0: return;
    case 1: return TileOut<S, R, 1>(p, s, w, n0, t0);
    case 2: if constexpr (kTB > 2) return TileOut<S, R, 2>(p, s, w, n0, t0); break;
    case 3: if constexpr (kTB > 3) return TileOut<S, R, 3>(p, s, w, n0, t0); break;
    case 4: if constexpr (kTB > 4) return TileOut<S, R, 4>(p, s, w, n0, t0); break;
    case 5: if constexpr (kTB > 5) return TileOut<S, R, 5>(p, s, w, n0, t0); break;
    case 6: if constexpr (kTB > 6) return TileOut<S, R, 6>(p, s, w, n0, t0); break;
    case 7: if constexpr (kTB > 7) return TileOut<S, R, 7>(p, s, w, n0, t0); break;
    default: break;
  }
}

// Weight rows [n_begin, n_end) (row pointers from `row`) against every row of x. With
// `contiguous` rows (the GEMV: row n at p.w + n * p.w_row_bytes), the chunk's first
// kPrefetchAhead bytes are prefetched at its start, then as each tile starts the bytes
// kPrefetchAhead past it, so memory and compute overlap (without: about 0.65 of one core's DRAM
// read rate on the Xeon development VM; with 4-8 KiB ahead: 0.93-0.98).
template <class Shape, bool contiguous = false, class S, class RowFn>
HWY_INLINE void RowRange(const LinearParams& p, const S& s, std::int64_t n_begin,
                         std::int64_t n_end, RowFn row) {
  std::int64_t n = n_begin;
  // The chunk's last byte: chunks may run on other threads, so prefetching stops at its end.
  const std::byte* const end = n_end > n_begin ? row(n_end - 1) + p.w_row_bytes : row(n_begin);
  if constexpr (contiguous)
    prefetch_range(row(n), std::min(end, row(n) + kPrefetchAhead));
  constexpr int kR = Shape::kR;
  for (; n + kR <= n_end; n += kR) {
    const std::byte* w[kR];
    for (int r = 0; r < kR; ++r) w[r] = row(n + r);
    if constexpr (contiguous) {
      const std::byte* ahead = w[0] + kPrefetchAhead;
      if (ahead < end) prefetch_range(ahead, std::min(end, ahead + kR * p.w_row_bytes));
    }
    RowsAllT<S, kR, Shape::kTB>(p, s, w, n);
  }
  for (; n < n_end; ++n) {
    const std::byte* w[1] = {row(n)};
    RowsAllT<S, 1, Shape::kTB>(p, s, w, n);
  }
}

// A rows16 weight's rows [b, e) (whole groups: chunks are multiples of 16 rows) in ggml's row
// layout, in the calling thread's buffer; the rows layout's weight rows as they are.
struct ChunkRows {
  const std::byte* base;
  std::int64_t first;
  const std::byte* operator()(std::int64_t n, std::int64_t row_bytes) const {
    return base + (n - first) * row_bytes;
  }
};

template <GgmlType F>
ChunkRows RowsOf(const LinearParams& p, std::int64_t b, std::int64_t e) {
  if constexpr (kGgmlTypes[static_cast<std::size_t>(F)].rows16) {
    if (p.packed) {
      constexpr auto type = static_cast<ops::QuantType>(F);
      thread_local std::vector<std::byte> rows;
      rows.resize(static_cast<std::size_t>((e - b) * p.w_row_bytes));
      quant_pack::unpack(type, p.w, p.K, b, e - b, rows.data());
      return {rows.data(), b};
    }
  }
  return {p.w, 0};
}

template <GgmlType F>
void Gemv(const LinearParams& p, const ExecContext& ctx) {
  const Src<F> s{{p.half_table}};
  ctx.parallel_for(p.N, p.chunk_rows, [&](std::int64_t b, std::int64_t e) {
    const ChunkRows rows = RowsOf<F>(p, b, e);
    RowRange<Narrow, true>(p, s, b, e, [&](std::int64_t n) { return rows(n, p.w_row_bytes); });
  });
}

// Prefill: each chunk converts its weight rows once into a float32 tile, then runs every row of x
// against it (float32 rows read in place).
template <GgmlType F>
void Gemm(const LinearParams& p, const ExecContext& ctx) {
  const Src<GgmlType::F32> f32src{{p.half_table}};
  if constexpr (F == GgmlType::F32) {
    ctx.parallel_for(p.N, p.chunk_rows, [&](std::int64_t b, std::int64_t e) {
      RowRange<Narrow>(p, f32src, b, e, [&](std::int64_t n) { return p.w + n * p.w_row_bytes; });
    });
  } else {
    const Src<F> s{{p.half_table}};
    const DF df;
    ctx.parallel_for(p.N, p.chunk_rows, [&](std::int64_t b, std::int64_t e) {
      // Rows padded to whole vectors so the tail of the float formats stays in bounds of the tile.
      const std::int64_t ld = (p.K + kL - 1) / kL * kL;
      thread_local std::vector<float> tile;
      tile.resize(static_cast<std::size_t>((e - b) * ld));
      const ChunkRows rows = RowsOf<F>(p, b, e);
      for (std::int64_t n = b; n < e; ++n) {
        const std::byte* row = rows(n, p.w_row_bytes);
        float* dst = tile.data() + (n - b) * ld;
        const std::int64_t nb = p.K / Src<F>::kElems;
        for (std::int64_t k = 0; k < nb; ++k) {
          const std::byte* blk = row + k * Src<F>::kBytes;
          const auto st = s.Prepare(blk);
          for (int v = 0; v < Src<F>::kVecs; ++v)
            hn::StoreU(s.Get(st, blk, v), df, dst + k * Src<F>::kElems + v * kL);
        }
        if constexpr (kIsFloat<Src<F>>) {
          constexpr std::int64_t es = Src<F>::kBytes / kL;
          for (std::int64_t k = nb * kL; k < p.K; ++k) dst[k] = Src<F>::Scalar(row + k * es);
        }
      }
      const auto* base = reinterpret_cast<const std::byte*>(tile.data());
      RowRange<Narrow>(p, f32src, b, e, [&](std::int64_t n) {
        return base + (n - b) * ld * static_cast<std::int64_t>(sizeof(float));
      });
    });
  }
}

template <GgmlType F>
void RunFormat(const LinearParams& p, const ExecContext& ctx) {
  if (p.T <= kGemvMaxRows) {
    Gemv<F>(p, ctx);
  } else {
    Gemm<F>(p, ctx);
  }
}

// The float32 paths of every row with a linear kernel (QuantTraits::linear), each a Src.
using RunFn = void (*)(const LinearParams&, const ExecContext&);
constexpr KernelTable<RunFn> kRun = make_kernel_table<RunFn>([](auto i) -> RunFn {
  constexpr QuantTraits row = kGgmlTypes[i];
  if constexpr (row.linear) {
    static_assert(requires { Src<row.type>::kBytes; }, "a row with linear = true needs its Src<type>");
    if constexpr (row.block > 1)
      static_assert(Src<row.type>::kElems == row.block && Src<row.type>::kBytes == row.block_bytes,
                    "Src<type> reads the row's blocks");
    return &RunFormat<row.type>;
  } else {
    return nullptr;
  }
});

void RunLinear(const LinearParams& p, const ExecContext& ctx) {
  kernel_for(kRun, p.type, "linear kernel")(p, ctx);
}

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops::linear_impl
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace npugraph::ops::linear_impl {

HWY_EXPORT(RunLinear);

void run_linear(const LinearParams& p, const ExecContext& ctx) {
  HWY_DYNAMIC_DISPATCH(RunLinear)(p, ctx);
}

}  // namespace npugraph::ops::linear_impl
#endif  // HWY_ONCE
