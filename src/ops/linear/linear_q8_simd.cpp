// The GEMV of quantised weights against q8-quantised activations, compiled once per Highway target.
//
// Note [Q8 activations]
// weight_quant_linear with activations = q8 (T <= kGemvMaxRows rows of x on the rows layout; more
// rows take the float32 GEMM of Note [Linear kernels]; rows16 weights every T, Note [Packed
// weights]) computes as llama.cpp's CPU backend does for these
// formats: each block of 32 values of a row of x becomes 32 int8 quants and a float32 scale,
//     amax = max |x_j|,  d = amax / 127,  q_j = round-to-nearest-even(x_j * (1 / d))   (float32)
// (ggml's quantize_row_q8_0 with the scale kept in float32 and ties to even). A block with
// amax < 127 * 2^-126 (1 / d would overflow) is all zero quants with d = 0; a block holding an
// infinity or a NaN has d = NaN, so the outputs of its row are NaN. A weight block against it is
// an exact integer dot product, then float32, lane by lane (a lane: a group of the block's 32
// positions, 4 consecutive ones on x86; the target decides the groups):
//     Q4_0  acc += (float(sum_lane (n_j - 8) q_j) * d) * d_w
//     Q4_1  acc += (float(sum_lane n_j q_j) * d) * d_w;  acc += (float(sum_lane q_j) * d) * m_w
//     Q8_0  acc += (float(sum_lane w_j q_j) * d) * d_w
//     Q5_0  acc += (float(sum_lane (n_j + 16 h_j - 16) q_j) * d) * d_w   (h_j: element j's fifth bit)
//     Q4_K, Q5_K: each 32-element sub-block s of a 256-element super-block pairs with one block of
//           x:  acc += (float(sum_lane n_j q_j) * d) * (d_w * sc_s);
//               acc += (float(sum_lane q_j) * d) * -(dmin_w * m_s)      (n_j: Q5_K's 5-bit quant)
//     Q6_K  acc += (float(sum_lane sc_j * (n_j - 32) * q_j) * d) * d_w   (sc_j: the int8 scale of
//           element j's 16-element group, n_j its 6-bit quant)
// (each += one multiply-add after one float32 product), over the blocks in ascending order;
// y[t, n] = the horizontal sum of the lanes, plus the bias. 16-lane targets (AVX3) take the blocks
// two at a time in 512-bit vectors (each lane still one block's group) and an odd last block in a
// second accumulator: y = the pairs' lane sum + the last block's lane sum; there the K-quants and
// Q6_K take a super-block at a time instead (Note [Q8 super-blocks] in linear_q8_super-inl.h), as
// they do on AVX2 (Note [Q8 super-blocks on AVX2], there).
// So, as in the float32 GEMV, y[t, n] depends on x[t], w[n] and the SIMD target only — not on the
// other rows, the chunking or the thread count — and eager, replayed and updated runs agree
// bitwise. Against the float32 result it differs by the quantisation of x: at most half a step
// (d / 2) per value of x.
//
// Why: the float32 GEMV converts every weight to float32 before its multiply-add, which on 8-lane
// targets (AVX2) costs about 24 vector instructions per block and weight row and keeps it at a
// third of the memory bandwidth; the integer dot product is about 8 (x86: the weight's nibbles
// unpacked to 32 bytes, pmaddubsw against the quants, pmaddwd, one convert, one multiply-add).
// Measured on the Xeon development VM, one thread, hot Q4_1 weights: 6.8 ns per block and row for
// the AVX2 float32 loop, 1.8 ns for the integer one; the AVX3 lookup-table float32 loop is 1.7 ns,
// so on 16-lane targets q8 gains through the 512-bit pairs and the Q8_0 format, and loses for
// 8 rows of x at a time (the float32 GEMV reuses a dequantised weight vector for 4 rows there).
//
// Weights in the rows16 layout take a kernel of their own with the same quantisation of x and
// whole-block sums instead of lanes (Note [Packed weights] in linear_packed_simd.cpp).
//
// Layout: every row of x is quantised once per call (on the launching thread, before the chunks
// start) into a buffer that thread keeps; the chunks walk the weight rows as the float32 GEMV does
// (R rows x TB rows of x per tile, the weights prefetched kPrefetchAhead ahead).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/linear/linear_q8_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "hwy/highway.h"
#include "npugraph/error.hpp"
#include "npugraph/kernel.hpp"
#include "npugraph/ops/quant.hpp"
#include "ops/linear/linear_common.hpp"
#include "ops/linear/linear_params.hpp"

HWY_BEFORE_NAMESPACE();
namespace npugraph::ops::linear_q8_impl {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using linear_impl::LinearParams;
using linear_impl::QuantRows;
using ops::GgmlType;
using ops::BlockQ4_0;
using ops::BlockQ4_1;
using ops::BlockQ5_0;
using ops::BlockQ8_0;

constexpr std::int64_t kBlock = 32;

// The K-quants with a scale and a minimum per 32-element sub-block (each pairs with one block of x).
template <GgmlType F>
constexpr bool kKQuant = F == GgmlType::Q4_K || F == GgmlType::Q5_K;
// Every 256-element super-block format: the above and Q6_K (a signed scale per 16 elements).
template <GgmlType F>
constexpr bool kSuper = kKQuant<F> || F == GgmlType::Q6_K;

// ---- quantising x -----------------------------------------------------------------------------------

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;

// round-to-nearest-even(v) as int32 (|v| <= 127.5 here). Highway's scalar NearestInt adds 0.5 in
// float, which rounds 0.49999997 up; the scalar target uses nearbyint instead.
HWY_INLINE hn::Vec<DI> RoundToInt(hn::Vec<DF> v) {
#if HWY_TARGET == HWY_SCALAR
  return hn::Set(DI(), static_cast<std::int32_t>(std::nearbyint(hn::GetLane(v))));
#else
  return hn::NearestInt(v);
#endif
}

// Blocks whose scale would be below the smallest normal float32 (amax < 127 * 2^-126) quantise to
// zero: 1 / d would overflow.
constexpr float kMinScale = std::numeric_limits<float>::min();

void QuantizeRowsQ8(const float* x, std::int64_t T, std::int64_t K, std::int64_t x_stride,
                    const QuantRows& out) {
  const DF df;
  const hn::Rebind<std::int8_t, DI> d8;
  const auto L = static_cast<std::int64_t>(hn::Lanes(df));
  const std::int64_t nb = K / kBlock;
  for (std::int64_t t = 0; t < T; ++t) {
    for (std::int64_t b = 0; b < nb; ++b) {
      const float* xb = x + t * x_stride + b * kBlock;
      std::int8_t* q = out.q + (t * nb + b) * kBlock;
      auto amax = hn::Zero(df);
      auto finite = hn::Zero(df);  // x * 0 summed: 0 unless some x is an infinity or a NaN
      for (std::int64_t i = 0; i < kBlock; i += L) {
        const auto v = hn::LoadU(df, xb + i);
        amax = hn::Max(amax, hn::Abs(v));
        finite = hn::Add(finite, hn::Mul(v, hn::Zero(df)));
      }
      const std::int64_t k = t * nb + b;
      const float d = hn::GetLane(hn::MaxOfLanes(df, amax)) / 127.0f;
      if (!(hn::GetLane(hn::SumOfLanes(df, finite)) == 0.0f) || d < kMinScale) {
        std::memset(q, 0, kBlock);
        out.d[k] = d < kMinScale ? 0.0f : std::numeric_limits<float>::quiet_NaN();
        continue;
      }
      const auto id = hn::Set(df, 1.0f / d);
      for (std::int64_t i = 0; i < kBlock; i += L)
        hn::StoreU(hn::DemoteTo(d8, RoundToInt(hn::Mul(hn::LoadU(df, xb + i), id))), d8, q + i);
      out.d[k] = d;
    }
  }
}

// ---- one block's integer dot products -----------------------------------------------------------
// Bytes(blk) holds a weight block's 32 values in integer form; Dot(w, q, c) gives the exact sums of
// w_j * q_j over each lane's group of j, as int32 lanes (c: Ones(q), needed by Q4_0 and Q8_0 on x86).

#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
// pmaddubsw multiplies unsigned by signed bytes and adds pairs into int16 (saturating): Q4 weights
// enter as their nibbles n (Q4_0's offset comes back as 8 * sum q), Q8_0 weights as |w| against
// the quants with w's sign (psignb; |w| <= 128). No pair sum reaches int16's limit
// (2 * 128 * 127 at most).
using D8 = hn::CappedTag<std::uint8_t, 32>;  // 32 lanes on AVX2 / AVX3, 16 on SSE4
using DS8 = hn::RebindToSigned<D8>;
using D32 = hn::Repartition<std::int32_t, D8>;
using DF32 = hn::Repartition<float, D8>;
constexpr int kParts = static_cast<int>(kBlock / hn::MaxLanes(D8()));
using V8 = hn::Vec<D8>;
using VS8 = hn::Vec<DS8>;
using V32 = hn::Vec<D32>;

struct Bytes {
  V8 part[kParts];
};
struct Quants {
  VS8 part[kParts];
};

// pmaddubsw, then pmaddwd against per-pair int16 multipliers (ones: the plain lane sums).
using D16 = hn::Repartition<std::int16_t, D8>;
HWY_INLINE V32 MaddScaled(V8 u, VS8 s, hn::Vec<D16> sc) {
#if HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3
  return V32{_mm_madd_epi16(_mm_maddubs_epi16(u.raw, s.raw), sc.raw)};
#else
  return V32{_mm256_madd_epi16(_mm256_maddubs_epi16(u.raw, s.raw), sc.raw)};
#endif
}

HWY_INLINE V32 MaddBytes(V8 u, VS8 s) { return MaddScaled(u, s, hn::Set(D16(), 1)); }

HWY_INLINE Quants LoadQuants(const std::int8_t* q) {
  Quants x;
  for (int i = 0; i < kParts; ++i) x.part[i] = hn::LoadU(DS8(), q + i * hn::MaxLanes(D8()));
  return x;
}

HWY_INLINE V32 DotBytes(const Bytes& w, const Quants& x) {
  V32 acc = MaddBytes(w.part[0], x.part[0]);
  for (int i = 1; i < kParts; ++i) acc = hn::Add(acc, MaddBytes(w.part[i], x.part[i]));
  return acc;
}

// The 16 packed bytes of a Q4 block as 32 nibbles, element order (low nibbles, then high).
HWY_INLINE Bytes Nibbles(const std::byte* qs) {
  const hn::Full128<std::uint8_t> d128;
  const hn::Full128<std::uint16_t> d16;
  const auto lo = hn::LoadU(d128, reinterpret_cast<const std::uint8_t*>(qs));
  const auto hi = hn::BitCast(d128, hn::ShiftRight<4>(hn::BitCast(d16, lo)));
  Bytes w;
#if HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3  // two 16-byte parts
  w.part[0] = hn::And(lo, hn::Set(d128, 0x0F));
  w.part[1] = hn::And(hi, hn::Set(d128, 0x0F));
#else
  w.part[0] = hn::And(hn::Combine(D8(), hi, lo), hn::Set(D8(), 0x0F));
#endif
  return w;
}

// psignb: s negated where w < 0, zeroed where w = 0.
HWY_INLINE VS8 SignOf(VS8 s, VS8 w) {
#if HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3
  return VS8{_mm_sign_epi8(s.raw, w.raw)};
#else
  return VS8{_mm256_sign_epi8(s.raw, w.raw)};
#endif
}

// Q5_0: the nibbles with 16 added where the block's fifth bit is set (its qh, the 4 bytes before
// qs, bit j for element j: one mask bit per byte lane, in element order).
template <GgmlType F>
HWY_INLINE Bytes LoadBytes(const std::byte* qs) {
  if constexpr (F == GgmlType::Q8_0) {  // the signed weights, as bytes
    Bytes w;
    for (int i = 0; i < kParts; ++i)
      w.part[i] = hn::LoadU(D8(), reinterpret_cast<const std::uint8_t*>(qs) + i * hn::MaxLanes(D8()));
    return w;
  } else if constexpr (F == GgmlType::Q5_0) {
    Bytes w = Nibbles(qs);
    const auto* qh = reinterpret_cast<const std::uint8_t*>(qs) - 4;
    for (int i = 0; i < kParts; ++i) {
      const auto high = hn::LoadMaskBits(D8(), qh + i * hn::MaxLanes(D8()) / 8);
      w.part[i] = hn::Or(w.part[i], hn::IfThenElseZero(high, hn::Set(D8(), 0x10)));
    }
    return w;
  } else {
    return Nibbles(qs);
  }
}

// Per (row of x, block): the lane sums of the quants (Q4_0's offset, Q4_1's minimum).
// Sub-block s of the K-quant super-block at sb: its 32 quants in element order.
template <GgmlType F>
HWY_INLINE Bytes LoadBytesK(const std::byte* sb, int s) {
  constexpr std::int64_t qs_at = F == GgmlType::Q5_K ? 48 : 16;
  const auto* qs = reinterpret_cast<const std::uint8_t*>(sb + qs_at + 32 * (s / 2));
  const auto* qh = reinterpret_cast<const std::uint8_t*>(sb + 16);
  const hn::Repartition<std::uint16_t, D8> d16;
  Bytes w;
  for (int i = 0; i < kParts; ++i) {
    const auto* p = qs + i * hn::MaxLanes(D8());
    auto v = hn::LoadU(D8(), p);
    if (s % 2) v = hn::BitCast(D8(), hn::ShiftRight<4>(hn::BitCast(d16, v)));
    w.part[i] = hn::And(v, hn::Set(D8(), 0x0F));
    if constexpr (F == GgmlType::Q5_K) {
      const auto h = hn::LoadU(D8(), qh + i * hn::MaxLanes(D8()));
      const auto bit = hn::TestBit(h, hn::Set(D8(), static_cast<std::uint8_t>(1u << s)));
      w.part[i] = hn::Or(w.part[i], hn::IfThenElseZero(bit, hn::Set(D8(), 0x10)));
    }
  }
  return w;
}

// Q6_K's sub-block s (0-7) of the super-block at sb: its 32 6-bit quants (0-63), element order.
HWY_INLINE Bytes LoadBytesQ6K(const std::byte* sb, int s) {
  const int h = s / 4, part = s % 4;
  const auto* ql = reinterpret_cast<const std::uint8_t*>(sb) + 64 * h + 32 * (part % 2);
  const auto* qh = reinterpret_cast<const std::uint8_t*>(sb) + 128 + 32 * h;
  const hn::Repartition<std::uint16_t, D8> d16;
  Bytes w;
  for (int i = 0; i < kParts; ++i) {
    auto lo = hn::LoadU(D8(), ql + i * hn::MaxLanes(D8()));
    if (part >= 2) lo = hn::BitCast(D8(), hn::ShiftRight<4>(hn::BitCast(d16, lo)));
    const auto hi = hn::BitCast(D8(), hn::ShiftRightSame(hn::BitCast(d16, hn::LoadU(D8(), qh + i * hn::MaxLanes(D8()))), 2 * part));
    // bits 0-1 of each byte after the shift; << 4 within 16-bit lanes moves no bit across a byte
    const auto high = hn::BitCast(D8(), hn::ShiftLeft<4>(hn::BitCast(d16, hn::And(hi, hn::Set(D8(), 3)))));
    w.part[i] = hn::Or(hn::And(lo, hn::Set(D8(), 0x0F)), high);
  }
  return w;
}

// Q6_K's two 16-element scales of a sub-block as int16 lanes beside each pmaddubsw pair (pairs
// never straddle the two halves).
struct Scales16 {
  hn::Vec<D16> part[kParts];
};
HWY_INLINE Scales16 LoadScalesQ6K(const std::int8_t* sc) {
  Scales16 s;
  if constexpr (kParts == 1) {
    const hn::Half<D16> dh;
    s.part[0] = hn::Combine(D16(), hn::Set(dh, sc[1]), hn::Set(dh, sc[0]));
  } else {
    for (int i = 0; i < kParts; ++i) s.part[i] = hn::Set(D16(), sc[i]);  // 16 elements a part
  }
  return s;
}

// sum_j sc_j * (q6_j - 32) * q_j over each lane's elements (exact: |.| < 2^22).
HWY_INLINE V32 DotQ6K(const Bytes& w, const Quants& x, const Scales16& sc) {
  V32 wq = hn::Zero(D32()), q = hn::Zero(D32());
  for (int i = 0; i < kParts; ++i) {
    wq = hn::Add(wq, MaddScaled(w.part[i], x.part[i], sc.part[i]));
    q = hn::Add(q, MaddScaled(hn::Set(D8(), 1), x.part[i], sc.part[i]));
  }
  return hn::Sub(wq, hn::ShiftLeft<5>(q));
}

template <GgmlType F>
HWY_INLINE V32 QuantSums(const Quants& x) {
  if constexpr (F == GgmlType::Q8_0 || F == GgmlType::Q6_K) {
    return hn::Zero(D32());
  } else {
    Bytes ones;
    for (int i = 0; i < kParts; ++i) ones.part[i] = hn::Set(D8(), 1);
    return DotBytes(ones, x);
  }
}

template <GgmlType F>
HWY_INLINE V32 Dot(const Bytes& w, const Quants& x, V32 qsum) {
  if constexpr (F == GgmlType::Q8_0) {
    Bytes a;
    Quants s;
    for (int i = 0; i < kParts; ++i) {
      const VS8 wi = hn::BitCast(DS8(), w.part[i]);
      a.part[i] = hn::BitCast(D8(), hn::Abs(wi));
      s.part[i] = SignOf(x.part[i], wi);
    }
    return DotBytes(a, s);
  }
  const V32 s = DotBytes(w, x);
  if constexpr (F == GgmlType::Q4_0) return hn::Sub(s, hn::ShiftLeft<3>(qsum));
  if constexpr (F == GgmlType::Q5_0) return hn::Sub(s, hn::ShiftLeft<4>(qsum));
  return s;
}
#else
// Other targets: the weights as signed values (Q4_0: n - 8), widened to int32 lanes.
using D32 = hn::CappedTag<std::int32_t, 8>;
using DF32 = hn::Rebind<float, D32>;
using V32 = hn::Vec<D32>;
constexpr std::int64_t kL32 = static_cast<std::int64_t>(hn::MaxLanes(D32()));

struct Bytes {
  std::int8_t v[kBlock];
};
struct Quants {
  const std::int8_t* q;
};

HWY_INLINE Quants LoadQuants(const std::int8_t* q) { return Quants{q}; }

template <GgmlType F>
HWY_INLINE Bytes LoadBytes(const std::byte* qs) {
  Bytes w;
  const auto* u = reinterpret_cast<const std::uint8_t*>(qs);
  if constexpr (F == GgmlType::Q8_0) {
    std::memcpy(w.v, qs, kBlock);
  } else if constexpr (F == GgmlType::Q5_0) {
    std::uint32_t qh;
    std::memcpy(&qh, qs - 4, 4);
    for (int j = 0; j < 16; ++j) {
      w.v[j] = static_cast<std::int8_t>(((u[j] & 15) | (((qh >> j) & 1u) << 4)) - 16);
      w.v[j + 16] = static_cast<std::int8_t>(((u[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - 16);
    }
  } else {
    const int off = F == GgmlType::Q4_0 ? 8 : 0;
    for (int j = 0; j < 16; ++j) {
      w.v[j] = static_cast<std::int8_t>((u[j] & 15) - off);
      w.v[j + 16] = static_cast<std::int8_t>((u[j] >> 4) - off);
    }
  }
  return w;
}

template <GgmlType F>
HWY_INLINE V32 QuantSums(const Quants& x) {
  const D32 d32;
  const hn::Rebind<std::int8_t, D32> d8;
  V32 acc = hn::Zero(d32);
  if constexpr (F == GgmlType::Q4_1 || kKQuant<F>)
    for (std::int64_t j = 0; j < kBlock; j += kL32) acc = hn::Add(acc, hn::PromoteTo(d32, hn::LoadU(d8, x.q + j)));
  return acc;
}

template <GgmlType F>
HWY_INLINE Bytes LoadBytesK(const std::byte* sb, int s) {
  constexpr std::int64_t qs_at = F == GgmlType::Q5_K ? 48 : 16;
  const auto* qs = reinterpret_cast<const std::uint8_t*>(sb + qs_at + 32 * (s / 2));
  const auto* qh = reinterpret_cast<const std::uint8_t*>(sb + 16);
  Bytes w;
  for (int j = 0; j < 32; ++j) {
    int q = (qs[j] >> (4 * (s % 2))) & 15;
    if constexpr (F == GgmlType::Q5_K) q |= ((qh[j] >> s) & 1) << 4;
    w.v[j] = static_cast<std::int8_t>(q);
  }
  return w;
}

HWY_INLINE Bytes LoadBytesQ6K(const std::byte* sb, int s) {
  const int h = s / 4, part = s % 4;
  const auto* ql = reinterpret_cast<const std::uint8_t*>(sb) + 64 * h + 32 * (part % 2);
  const auto* qh = reinterpret_cast<const std::uint8_t*>(sb) + 128 + 32 * h;
  Bytes w;
  for (int j = 0; j < 32; ++j)
    w.v[j] = static_cast<std::int8_t>((((ql[j] >> (4 * (part / 2))) & 15) | (((qh[j] >> (2 * part)) & 3) << 4)) - 32);
  return w;
}

struct Scales16 {
  std::int32_t sc[2];
};
HWY_INLINE Scales16 LoadScalesQ6K(const std::int8_t* sc) { return Scales16{{sc[0], sc[1]}}; }

// sum_j sc_j * (q6_j - 32) * q_j over each lane's elements (lanes of kL32 <= 16 elements: one scale).
HWY_INLINE V32 DotQ6K(const Bytes& w, const Quants& x, const Scales16& sc) {
  const D32 d32;
  const hn::Rebind<std::int8_t, D32> d8;
  V32 acc = hn::Zero(d32);
  for (std::int64_t j = 0; j < kBlock; j += kL32)
    acc = hn::Add(acc, hn::Mul(hn::Set(d32, sc.sc[j / 16]),
                               hn::Mul(hn::PromoteTo(d32, hn::LoadU(d8, w.v + j)),
                                       hn::PromoteTo(d32, hn::LoadU(d8, x.q + j)))));
  return acc;
}

template <GgmlType F>
HWY_INLINE V32 Dot(const Bytes& w, const Quants& x, V32) {
  const D32 d32;
  const hn::Rebind<std::int8_t, D32> d8;
  V32 acc = hn::Zero(d32);
  for (std::int64_t j = 0; j < kBlock; j += kL32)
    acc = hn::Add(acc, hn::Mul(hn::PromoteTo(d32, hn::LoadU(d8, w.v + j)),
                               hn::PromoteTo(d32, hn::LoadU(d8, x.q + j))));
  return acc;
}
#endif

using VF32 = hn::Vec<DF32>;

// ---- the tile ---------------------------------------------------------------------------------------

template <GgmlType F>
struct Layout {  // a block's size and where its quants start: the type's row (quant_table.hpp)
  static constexpr std::int64_t kBytes = static_cast<std::int64_t>(kGgmlTypes[static_cast<std::size_t>(F)].block_bytes);
  static constexpr std::int64_t kQs = static_cast<std::int64_t>(kGgmlTypes[static_cast<std::size_t>(F)].quants_at);
};

inline std::uint16_t load_u16(const std::byte* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The super-block formats on AVX-512 and AVX2 (TileSuper; a textual part of this namespace, no
// includes).
#include "ops/linear/linear_q8_super-inl.h"  // NOLINT(build/include)

// res[r][t] += the lane sums over blocks [b_begin, b_end) of weight rows w[r] against row t0 + t
// of x, as Note [Q8 activations] defines them (x's quants in block order).
template <GgmlType F, int R, int TB>
HWY_INLINE void TileBlocks(const LinearParams& p, const QuantRows& xq, const std::byte* const* w,
                           std::int64_t t0, std::int64_t b_begin, std::int64_t b_end, float (&res)[R][TB]) {
  using Lay = Layout<F>;
  const DF32 df;
  const float* table = p.half_table;
  const std::int64_t nb = p.K / kBlock;
  VF32 acc[R][TB];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TB; ++t) acc[r][t] = hn::Zero(df);
  for (std::int64_t b = b_begin; b < b_end; ++b) {
    Bytes wb[R];
    VF32 dw[R], mw[R];
    Scales16 sc6[R];
    for (int r = 0; r < R; ++r) {
      if constexpr (F == GgmlType::Q6_K) {  // sub-block b % 8 of super-block b / 8
        const std::byte* sb = w[r] + b / 8 * Lay::kBytes;
        const int j = static_cast<int>(b % 8);
        dw[r] = hn::Set(df, table[load_u16(sb + 208)]);
        sc6[r] = LoadScalesQ6K(reinterpret_cast<const std::int8_t*>(sb + 192) + 2 * j);
        wb[r] = LoadBytesQ6K(sb, j);
        continue;
      } else if constexpr (kKQuant<F>) {  // sub-block b % 8 of super-block b / 8
        const std::byte* sb = w[r] + b / 8 * Lay::kBytes;
        const auto* sc = reinterpret_cast<const std::uint8_t*>(sb + 4);
        const int j = static_cast<int>(b % 8);
        const int scale = j < 4 ? sc[j] & 63 : (sc[j + 4] & 0xf) | ((sc[j - 4] >> 6) << 4);
        const int min = j < 4 ? sc[j + 4] & 63 : (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
        dw[r] = hn::Set(df, table[load_u16(sb)] * static_cast<float>(scale));
        mw[r] = hn::Set(df, -(table[load_u16(sb + 2)] * static_cast<float>(min)));
        wb[r] = LoadBytesK<F>(sb, j);
        continue;
      } else {
        const std::byte* blk = w[r] + b * Lay::kBytes;
        dw[r] = hn::Set(df, table[load_u16(blk)]);
        if constexpr (F == GgmlType::Q4_1) mw[r] = hn::Set(df, table[load_u16(blk + 2)]);
        wb[r] = LoadBytes<F>(blk + Lay::kQs);
      }
    }
    for (int t = 0; t < TB; ++t) {
      const std::int64_t k = (t0 + t) * nb + b;
      const Quants x = LoadQuants(xq.q + k * kBlock);
      const V32 qsum = QuantSums<F>(x);
      const VF32 d = hn::Set(df, xq.d[k]);
      constexpr bool kMin = F == GgmlType::Q4_1 || kKQuant<F>;
      VF32 xs;  // Q4_1, K-quants: float(sum of the lane's quants) * d
      if constexpr (kMin) xs = hn::Mul(hn::ConvertTo(df, qsum), d);
      for (int r = 0; r < R; ++r) {
        if constexpr (F == GgmlType::Q6_K) {
          acc[r][t] = hn::MulAdd(hn::Mul(hn::ConvertTo(df, DotQ6K(wb[r], x, sc6[r])), d), dw[r], acc[r][t]);
          continue;
        }
        acc[r][t] = hn::MulAdd(hn::Mul(hn::ConvertTo(df, Dot<F>(wb[r], x, qsum)), d), dw[r], acc[r][t]);
        if constexpr (kMin) acc[r][t] = hn::MulAdd(xs, mw[r], acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TB; ++t) res[r][t] += hn::GetLane(hn::SumOfLanes(df, acc[r][t]));
}

// The 32-element formats on AVX-512, two blocks a vector (TilePairs, PairLayout; a textual part of
// this namespace, no includes).
#include "ops/linear/linear_q8_pairs-inl.h"  // NOLINT(build/include)

// Outputs [t0, t0 + TB) x [n0, n0 + R) (weight rows w[r]): 16-lane targets take the blocks in
// pairs and a last odd block alone (its lane sums added to the pairs'), the others block by block.
template <GgmlType F, int R, int TB>
HWY_INLINE void Tile(const LinearParams& p, const QuantRows& xq, const std::byte* const* w,
                     std::int64_t n0, std::int64_t t0) {
  const std::int64_t nb = p.K / kBlock;
  float res[R][TB] = {};
  std::int64_t b0 = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  if constexpr (kSuper<F>) {
    TileSuper<F, R, TB>(p, xq, w, t0, res);
    b0 = nb;
  }
#if HWY_TARGET <= HWY_AVX3
  if constexpr (!kSuper<F>) {
    TilePairs<F, R, TB>(p, xq, w, t0, res);
    b0 = nb / 2 * 2;
  }
#endif
#endif
  if (b0 < nb) TileBlocks<F, R, TB>(p, xq, w, t0, b0, nb, res);
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TB; ++t) linear_impl::store_out(p, t0 + t, n0 + r, res[r][t]);
}

// Weight rows and rows of x per tile: the accumulators R * TB stay in registers (32 of them on
// AVX3, 16 elsewhere); T not a multiple of TB ends with one tile of the rest, not rest tiles of 1.
// The super-block formats on AVX3 and AVX2 (TileSuper) decode a super-block once per weight row and
// tile of up to 8 rows of x (issue 45: T:8 decodes each super-block once; on AVX3 the decoded
// super-block takes 10 registers, the accumulators 8); a chunk runs its rows for rows 0-7 of x, then for 8-15, so that
// the 8 rows' quants and sums (27 KB at K = 1536) stay in L1 (all 16 rows of x for each weight row
// stream 54 KB from L2 per row: T:16 took 3.5x T:8), and at large K fewer rows a tile for the same
// reason (K = 4096: 4 rows, 37 KB; 8 rows took Q4_K 16384x4096 T:8 from 36 to 52 ms).
constexpr int kTB = HWY_TARGET <= HWY_AVX3 ? 4 : 2;
constexpr bool kSuperTiles = HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && HWY_TARGET != HWY_SCALAR &&
                             HWY_TARGET != HWY_EMU128;
constexpr int kSuperTB = 8;
constexpr std::int64_t kSuperXBytes = 40 << 10;
// AVX2 (Note [Q8 super-blocks on AVX2]): Q4_K and Q5_K at up to kSuperFewRows rows of x take
// kSuperWideR weight rows a tile; Q6_K, and AVX3 (a whole super-block decoded per weight row), 1.
template <GgmlType F>
constexpr int kSuperFewRows = HWY_TARGET == HWY_AVX2 && F != GgmlType::Q6_K ? 2 : 0;
constexpr int kSuperWideR = 4;

// The last tile, of `rest` (<= TB) rows of x: Tile<F, R, rest>.
template <GgmlType F, int R, int TB>
HWY_INLINE void LastTile(const LinearParams& p, const QuantRows& xq, const std::byte* const* w,
                         std::int64_t n0, std::int64_t t0, std::int64_t rest) {
  if constexpr (TB > 0) {
    if (rest == TB) return Tile<F, R, TB>(p, xq, w, n0, t0);
    LastTile<F, R, TB - 1>(p, xq, w, n0, t0, rest);
  }
}

template <GgmlType F, int R, int TB>
HWY_INLINE void AllRowsOfX(const LinearParams& p, const QuantRows& xq, const std::byte* const* w,
                           std::int64_t n0) {
  std::int64_t t0 = 0;
  for (; t0 + TB <= p.T; t0 += TB) Tile<F, R, TB>(p, xq, w, n0, t0);
  if (t0 < p.T) LastTile<F, R, TB - 1>(p, xq, w, n0, t0, p.T - t0);
}

template <GgmlType F, int kR, int TB>
void GemvTiles(const LinearParams& p, const QuantRows& xq, const ExecContext& ctx) {
  ctx.parallel_for(p.N, p.chunk_rows, [&](std::int64_t n_begin, std::int64_t n_end) {
    const auto row = [&](std::int64_t n) { return p.w + n * p.w_row_bytes; };
    // Prefetching stops at the chunk's end: other chunks may run on other threads.
    const std::byte* const end = row(n_end);
    std::int64_t n = n_begin;
    linear_impl::prefetch_range(row(n), std::min(end, row(n) + linear_impl::kPrefetchAhead));
    for (; n + kR <= n_end; n += kR) {
      const std::byte* w[kR];
      for (int r = 0; r < kR; ++r) w[r] = row(n + r);
      const std::byte* ahead = w[0] + linear_impl::kPrefetchAhead;
      if (ahead < end) linear_impl::prefetch_range(ahead, std::min(end, ahead + kR * p.w_row_bytes));
      AllRowsOfX<F, kR, TB>(p, xq, w, n);
    }
    for (; n < n_end; ++n) {
      const std::byte* w[1] = {row(n)};
      AllRowsOfX<F, 1, TB>(p, xq, w, n);
    }
  });
}

// The super-block formats on AVX3 and AVX2: tiles of 1 weight row x kSuperTB rows of x (AVX2 at
// T <= 2: kSuperWideR weight rows), the tiles of rows of x outermost in a chunk (whose weights, <= 256 KiB, stay in L2 for the second tile of T > 8).
template <GgmlType F>
void GemvSuperTiles(const LinearParams& p, const QuantRows& xq, const ExecContext& ctx) {
  ctx.parallel_for(p.N, p.chunk_rows, [&](std::int64_t n_begin, std::int64_t n_end) {
    const auto row = [&](std::int64_t n) { return p.w + n * p.w_row_bytes; };
    const std::byte* const end = row(n_end);
    linear_impl::prefetch_range(row(n_begin), std::min(end, row(n_begin) + linear_impl::kPrefetchAhead));
    // Rows of x per tile: as many as keep their quants and sums (2.25 K bytes a row) within
    // kSuperXBytes of L1, at most kSuperTB (K = 1536, 2048: 8; K = 4096: 4).
    const std::int64_t tb = std::clamp<std::int64_t>(kSuperXBytes / (p.K * 9 / 4), 1, kSuperTB);
    for (std::int64_t t0 = 0; t0 < p.T; t0 += tb) {
      const std::int64_t rows = std::min(tb, p.T - t0);
      std::int64_t n = n_begin;
      if (rows <= kSuperFewRows<F>)  // kSuperWideR weight rows a tile: that many chains in flight
        for (; n + kSuperWideR <= n_end; n += kSuperWideR) {
          const std::byte* w[kSuperWideR];
          for (int r = 0; r < kSuperWideR; ++r) w[r] = row(n + r);
          const std::byte* ahead = w[0] + linear_impl::kPrefetchAhead;
          if (t0 == 0 && ahead < end)
            linear_impl::prefetch_range(ahead, std::min(end, ahead + kSuperWideR * p.w_row_bytes));
          LastTile<F, kSuperWideR, kSuperFewRows<F>>(p, xq, w, n, t0, rows);
        }
      for (; n < n_end; ++n) {
        const std::byte* w[1] = {row(n)};
        const std::byte* ahead = w[0] + linear_impl::kPrefetchAhead;
        if (t0 == 0 && ahead < end) linear_impl::prefetch_range(ahead, std::min(end, ahead + p.w_row_bytes));
        if (rows == kSuperTB) Tile<F, 1, kSuperTB>(p, xq, w, n, t0);
        else LastTile<F, 1, kSuperTB - 1>(p, xq, w, n, t0, rows);
      }
    }
  });
}

template <GgmlType F>
void Gemv(const LinearParams& p, const QuantRows& xq, const ExecContext& ctx) {
  if constexpr (kSuperTiles && kSuper<F>) return GemvSuperTiles<F>(p, xq, ctx);
  GemvTiles<F, 4, kTB>(p, xq, ctx);
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
// The launching thread's buffer of the super-block sums (one for every type).
std::vector<float>& SuperBuffer() {
  thread_local std::vector<float> super;
  return super;
}
#endif

// x's quants prepared as type F's tile reads them, then the GEMV.
template <GgmlType F>
void RunType(const LinearParams& p, QuantRows xq, const ExecContext& ctx) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  if constexpr (F == GgmlType::Q4_0 || F == GgmlType::Q4_1 || F == GgmlType::Q5_0)
    PairLayout(xq, p.T, p.K / kBlock);
#endif
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  if constexpr (kKQuant<F>) PrepareSuperRows<GgmlType::Q4_K>(xq, p.T, p.K, SuperBuffer());
  if constexpr (F == GgmlType::Q6_K) PrepareSuperRows<GgmlType::Q6_K>(xq, p.T, p.K, SuperBuffer());
#endif
  Gemv<F>(p, xq, ctx);
}

// The q8-activation GEMV of every row with q8_kernel.
using RunFn = void (*)(const LinearParams&, QuantRows, const ExecContext&);
constexpr linear_impl::KernelTable<RunFn> kRun = linear_impl::make_kernel_table<RunFn>([](auto i) -> RunFn {
  constexpr QuantTraits row = kGgmlTypes[i];
  if constexpr (row.q8_kernel) {
    static_assert(Layout<row.type>::kBytes == static_cast<std::int64_t>(row.block_bytes));
    return &RunType<row.type>;
  } else {
    return nullptr;
  }
});

void RunLinearQ8(const LinearParams& p, const ExecContext& ctx) {
  const RunFn run = linear_impl::kernel_for(kRun, p.type, "linear kernel with q8 activations");
  const std::int64_t blocks = p.T * (p.K / kBlock);
  // The launching thread's buffer; the chunks only read it, and parallel_for returns after them.
  thread_local std::vector<std::int8_t> q;
  thread_local std::vector<float> d;
  q.resize(static_cast<std::size_t>(blocks * kBlock));
  d.resize(static_cast<std::size_t>(blocks));
  QuantRows xq{q.data(), d.data()};
  QuantizeRowsQ8(p.x, p.T, p.K, p.x_stride, xq);
  run(p, xq, ctx);
}

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops::linear_q8_impl
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace npugraph::ops::linear_q8_impl {

HWY_EXPORT(RunLinearQ8);
HWY_EXPORT(QuantizeRowsQ8);

void run(const linear_impl::LinearParams& p, const ExecContext& ctx) {
  HWY_DYNAMIC_DISPATCH(RunLinearQ8)(p, ctx);
}

void quantize(const float* x, std::int64_t T, std::int64_t K, std::int64_t x_stride,
              const linear_impl::QuantRows& out) {
  HWY_DYNAMIC_DISPATCH(QuantizeRowsQ8)(x, T, K, x_stride, out);
}

}  // namespace npugraph::ops::linear_q8_impl

namespace npugraph::ops::linear_impl {

void run_linear_q8(const LinearParams& p, const ExecContext& ctx) { linear_q8_impl::run(p, ctx); }

void quantize_rows_q8(const float* x, std::int64_t T, std::int64_t K, std::int64_t x_stride,
                      const QuantRows& out) {
  linear_q8_impl::quantize(x, T, K, x_stride, out);
}

}  // namespace npugraph::ops::linear_impl
#endif  // HWY_ONCE
