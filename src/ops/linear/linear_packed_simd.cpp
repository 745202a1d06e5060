// The GEMV of row-interleaved (QuantLayout::rows16) weights against q8-quantised activations,
// compiled once per Highway target.
//
// Note [Packed weights]
// A rows16 weight (ops::pack_rows16) stores each group of 16 rows block by block: for block b of
// rows 16g..16g+15, the 16 rows' scales (Q4_1: then their minimums), each a run of 16 halves
// (Q5_0: then their fifth bits, the 4 bytes of qh, row r at bytes 4r..4r+3 of a 64-byte vector), then
// their quants as vectors of 64 bytes, vector j holding bytes 4j..4j+3 of every row's qs, row r at
// bytes 4r..4r+3 (Q4 formats and Q5_0: j < 4, the bytes' low nibbles are elements 4j.., the high
// ones 16 + 4j..; Q8_0: j < 8). Q5_0's values n + 16 h (0..31; h the element's bit of qh) are
// unpacked like a Q4 format's nibbles, each vector's 4 fifth bits of a lane spread to its bytes by
// one multiply (FifthBits), and its -16 rides in the record's start integer as Q4_0's -8 does (on
// targets without VNNI, pmaddubsw's int16 sums take 4 products at a time, not 8: 2 * 31 * 127 per
// pair). A group takes 16 rows' bytes of the ggml layout; rows past the last are
// zero. So one 32-bit lane of a vector is one row, and a SIMD register of L lanes holds L rows:
// the integer dot product of x's block with L rows is pmaddubsw (weight nibbles or |w| against x's
// quants broadcast 4 at a time) summed in int16 — 8 products of at most 2 * 15 * 127 = 3810 stay
// below 2^15 — then one pmaddwd; Q8_0 adds each quad's pmaddwd in int32. Scales are vectors
// (16 halves converted at once) and there is no horizontal sum: with the row layout (Note [Q8
// activations]) every block and row paid scalar scale loads, broadcasts and a lane sum.
// With AVX512-VNNI (Highway's AVX3_DL target: Ice Lake, Zen 4 and later) one vpdpbusd per quad
// replaces pmaddubsw + the int16 add + pmaddwd, and Q8_0's bytes become unsigned as w + 128 (once per
// block, for every row of x), its sum corrected by 128 S; the integers are the same, so are the
// outputs. There a tile is up to 8 rows of x (4 on AVX3, 2 on AVX2): each block of 16 weight rows
// is unpacked once per tile and dotted into the tile's rows of x, whose accumulators stay in
// registers; T not a multiple of the tile ends with one tile of the rest (T:5 is one tile of 5, not
// five of 1). Measured (bench_linear gemv_q8p_hot/Q4_1/1536x576/T:8, AMD EPYC Zen 5, 2 threads):
// 22.6 us on AVX3, 16.9 us on AVX3_DL; Q8_0 49152x576 T:8 1265 -> 780-880 us.
//
// Note [Packed x records]
// x's quantised blocks are laid out for the tiles (issue 45): block-major, one 48-byte record per
// (block b, row t) at (b T + t) 48 — the 32 quants, then d, float(S) * d and the integer the block's
// dot product starts from (Q4_0: -8 S; Q5_0: -16 S; Q8_0 on AVX3_DL: -128 S, the w + 128 bytes' correction;
// otherwise 0) — so a tile reads every row's block through one pointer and fixed offsets, and the
// correction is a broadcast load instead of arithmetic per block and row. The integers and floats
// are those above, in the same order; only where they are read from moved. (The first layout, row-
// major with the sums in arrays beside it, kept 8 pointers and the accumulators of a tile of 8 rows
// spilling out of registers on AVX3_DL.) From 4 rows the tile's vpdpbusd chains are interleaved
// (Unpacked::DotRows), so independent ones are always ready; fewer rows take 2 chains each.
//
// The ceiling with these sums: per (16 rows, block, row of x) 8 vpdpbusd and 3 float operations
// (Q4_1: 4; convert, multiply by d, fma by d_w) share the two 512-bit ports of an Intel core, plus
// the unpacking (Q4: 12 operations a block, 1.5 a row of x at T:8), so T:8 tops out near 8 / 13 of
// the vpdpbusd peak. Measured (Xeon family 6 model 207, one thread timed by its CPU time, hot
// 1536x576): Q4_0 T:8 48.3 -> 37.3 us (0.39 -> 0.50 of 752 GOPS), Q4_1 45.6 -> 41.6 us (0.45),
// T:4 1.75x faster (one tile of 4 instead of four of 1).
//
// Every row count of x runs it, prefill's chunks too (its tiles of 8 rows of x reuse each unpacked
// block, the group's bytes staying in L1 and x's records in L2): bench_linear hot Q4_1 T:128 on the
// Xeon (family 6 model 207, 2 threads), 1536x576 0.42 ms and 576x1536 0.48 ms against the float32
// GEMM's 1.14 and 1.00 ms (0.58-0.67 of the float32 FMA peak). The row layout's q8 GEMV stays at
// T <= 16: above, its tiles decode every block once per 4 rows of x and lose to the GEMM (1.94 ms).
//
// What it computes (q8 activations only; float32 activations unpack the weight first and run Note
// [Linear kernels] on the ggml bytes, so those results equal the row layout's bit for bit): with x's blocks quantised as Note [Q8 activations] says
// (quants q, scale d, S = sum of the block's quants), per row n, over the blocks in ascending order,
//     Q4_0  acc = fma(float(sum n_j q_j - 8 S) * d, d_w, acc)
//     Q5_0  acc = fma(float(sum (n_j + 16 h_j) q_j - 16 S) * d, d_w, acc)
//     Q4_1  acc = fma(float(sum n_j q_j) * d, d_w, acc);  acc = fma(float(S) * d, m_w, acc)
//     Q8_0  acc = fma(float(sum w_j q_j) * d, d_w, acc)
// y[t, n] = acc (+ bias): whole-block integer sums, one float32 chain per output, no lanes. fma is
// one rounding on targets with FMA (x86 AVX2 and AVX3) and a multiply then an add elsewhere, so
// AVX2 and AVX3 agree bitwise. As everywhere, y[t, n] depends on x[t], w[n] and the SIMD target only.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/linear/linear_packed_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "hwy/highway.h"
#include "npugraph/error.hpp"
#include "npugraph/kernel.hpp"
#include "ops/linear/linear_common.hpp"
#include "ops/linear/linear_params.hpp"

// Defined below for AVX3_DL only: this file is compiled once per target, so forget the last pass's.
#undef NPUGRAPH_PACKED_VNNI

HWY_BEFORE_NAMESPACE();
namespace npugraph::ops::linear_packed_impl {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using linear_impl::kPackRows;
using linear_impl::LinearParams;
using linear_impl::QuantRows;
using ops::GgmlType;

constexpr std::int64_t kBlock = 32;

// QuantLayout::rows16: each block of a group `block_bytes` long (scales, then quants from
// `quants_offset`), each group `group_bytes` (= kPackRows * w_row_bytes).
struct PackedGeometry {
  std::int64_t block_bytes = 0, quants_offset = 0, group_bytes = 0;
};

PackedGeometry packed_geometry(const LinearParams& p) {
  const std::int64_t nb = p.K / kBlock;
  const std::int64_t block = nb > 0 ? p.w_row_bytes / nb : 0;  // one ggml block's bytes
  PackedGeometry g;
  g.block_bytes = kPackRows * block;
  g.quants_offset = kPackRows * static_cast<std::int64_t>(ggml_traits(p.type).quants_at);  // after d (and m)
  g.group_bytes = kPackRows * p.w_row_bytes;
  return g;
}

inline std::int32_t load_i32(const std::int8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// x's blocks as Note [Packed x records] lays them out.
constexpr std::int64_t kRecord = 48;
constexpr std::int64_t kRecD = 32, kRecSD = 36, kRecInit = 40;
struct XRecords {
  const std::byte* base;  // record (b, t) at (b * T + t) * kRecord
  std::int64_t T;
  HWY_INLINE const std::byte* at(std::int64_t b, std::int64_t t) const { return base + (b * T + t) * kRecord; }
};
inline float rec_f32(const std::byte* r, std::int64_t off) {
  float v;
  std::memcpy(&v, r + off, sizeof v);
  return v;
}
inline std::int32_t rec_i32(const std::byte* r, std::int64_t off) {
  std::int32_t v;
  std::memcpy(&v, r + off, sizeof v);
  return v;
}

#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
using DF = hn::ScalableTag<float>;  // L lanes: L rows of a group
using DI = hn::RebindToSigned<DF>;
using DU8 = hn::Repartition<std::uint8_t, DF>;
using DS8 = hn::Repartition<std::int8_t, DF>;
using DU16 = hn::Repartition<std::uint16_t, DF>;
using DI16 = hn::Repartition<std::int16_t, DF>;
using DH = hn::Rebind<hwy::float16_t, DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;
using VU8 = hn::Vec<DU8>;
using VS8 = hn::Vec<DS8>;
using VI16 = hn::Vec<DI16>;
constexpr std::int64_t kL = static_cast<std::int64_t>(hn::MaxLanes(DF()));
static_assert(kPackRows % kL == 0);

// pmaddubsw: u8 x s8, adjacent pairs summed into int16 (saturating; see the Note for why it does not).
HWY_INLINE VI16 Maddubs(VU8 u, VS8 s) {
#if HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3
  return VI16{_mm_maddubs_epi16(u.raw, s.raw)};
#elif HWY_TARGET == HWY_AVX2
  return VI16{_mm256_maddubs_epi16(u.raw, s.raw)};
#else
  return VI16{_mm512_maddubs_epi16(u.raw, s.raw)};
#endif
}

// pmaddwd against ones: the int16 pairs of each 32-bit lane summed.
HWY_INLINE VI PairSums(VI16 v) {
#if HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3
  return VI{_mm_madd_epi16(v.raw, _mm_set1_epi16(1))};
#elif HWY_TARGET == HWY_AVX2
  return VI{_mm256_madd_epi16(v.raw, _mm256_set1_epi16(1))};
#else
  return VI{_mm512_madd_epi16(v.raw, _mm512_set1_epi16(1))};
#endif
}

// s with w's sign (psignb).
HWY_INLINE VS8 SignOf(VS8 s, VS8 w) {
#if HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3
  return VS8{_mm_sign_epi8(s.raw, w.raw)};
#elif HWY_TARGET == HWY_AVX2
  return VS8{_mm256_sign_epi8(s.raw, w.raw)};
#else  // no vpsignb: negated where w < 0 only (where w = 0 the product is 0 anyway)
  return VS8{_mm512_mask_sub_epi8(s.raw, _mm512_movepi8_mask(w.raw), _mm512_setzero_si512(), s.raw)};
#endif
}

// x's quants 4j..4j+3 of a block in every lane.
HWY_INLINE VS8 Quad(const std::int8_t* q, int j) {
  return hn::BitCast(DS8(), hn::Set(DI(), load_i32(q + 4 * j)));
}

#if HWY_TARGET <= HWY_AVX3_DL
// vpdpbusd (AVX512-VNNI, which Highway's AVX3_DL requires of the CPU): acc + the sums of each 32-bit
// lane's four u8 x s8 products, in int32 and exact (no int16 step), so it adds the same integers as
// pmaddubsw + pmaddwd. x's quants 4j..4j+3 are broadcast from memory by the instruction itself.
// Inline assembly: Highway 1.0's AVX3_DL attribute names avxvnni, not avx512vnni, so the intrinsic
// does not compile there.
#define NPUGRAPH_PACKED_VNNI 1
using I32Alias = std::int32_t __attribute__((may_alias));
HWY_INLINE VI DotQuad(VI acc, VU8 u, const std::int8_t* q, int j) {
  __m512i a = acc.raw;
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(a) : "v"(u.raw), "m"(*reinterpret_cast<const I32Alias*>(q + 4 * j)));
  return VI{a};
}
#endif

// The L rows' block (quants at qs: vector j at qs + 64 j + 4 L s for sub-group s) as unsigned
// bytes: Q4: lo[j] the low nibbles, hi[j] the high ones; Q8_0: the signed bytes in lo[0..8).
// Q5_0's fifth bits for one vector of quants: lane bits [k0, k0 + 4) of qh (bit k0 + i: the
// element in byte i of the lane) as 16 in those bytes. The multiply puts bit i of the 4-bit value
// at bits 8 i + 4 (shifts 4, 11, 18, 25: bit i lands at 8 i + 4 from the i-th only), the mask
// keeps those (Note [Packed weights]).
HWY_INLINE VU8 FifthBits(VI qh, int k0) {
  const DI di;
  const VI four = hn::And(hn::ShiftRightSame(qh, k0), hn::Set(di, 0xF));
  return hn::BitCast(DU8(), hn::And(hn::Mul(four, hn::Set(di, 0x02040810)), hn::Set(di, 0x10101010)));
}

template <GgmlType F>
struct Unpacked {
  static constexpr int kVecs = F == GgmlType::Q8_0 ? 8 : 4;
  VU8 lo[kVecs];
  VU8 hi[F == GgmlType::Q8_0 ? 1 : 4];

  // qh: Q5_0's fifth bits, one 32-bit lane per row (null otherwise).
  HWY_INLINE explicit Unpacked(const std::uint8_t* qs, const std::uint8_t* qh = nullptr) {
    const DU8 d8;
    [[maybe_unused]] VI bits = hn::Zero(DI());
    if constexpr (F == GgmlType::Q5_0) bits = hn::LoadU(DI(), reinterpret_cast<const std::int32_t*>(qh));
    for (int j = 0; j < kVecs; ++j) {
      const VU8 v = hn::LoadU(d8, qs + 64 * j);
      if constexpr (F == GgmlType::Q8_0) {
#ifdef NPUGRAPH_PACKED_VNNI
        lo[j] = hn::Xor(v, hn::Set(d8, 0x80));  // w + 128 as unsigned bytes: see Dot
#else
        lo[j] = v;
#endif
      } else {
        lo[j] = hn::And(v, hn::Set(d8, 0x0F));
        hi[j] = hn::And(hn::BitCast(d8, hn::ShiftRight<4>(hn::BitCast(DU16(), v))), hn::Set(d8, 0x0F));
        if constexpr (F == GgmlType::Q5_0) {  // elements 4j.. and 16 + 4j..: 0..31
          lo[j] = hn::Or(lo[j], FifthBits(bits, 4 * j));
          hi[j] = hn::Or(hi[j], FifthBits(bits, 16 + 4 * j));
        }
      }
    }
  }

#ifdef NPUGRAPH_PACKED_VNNI
  // Dot for TB rows of x at once (their records rec + t * kRecord), quad by quad across the rows:
  // the TB chains' vpdpbusd come one after another in the instruction stream, so the scheduler
  // always has independent ones to issue (each chain alone waits its latency between them).
  template <int TB>
  HWY_INLINE void DotRows(const std::byte* rec, VI (&dots)[TB]) const {
    for (int t = 0; t < TB; ++t)
      dots[t] = F != GgmlType::Q4_1 ? hn::Set(DI(), rec_i32(rec + t * kRecord, kRecInit)) : hn::Zero(DI());
    for (int i = 0; i < 8; ++i) {
      const VU8 v = F == GgmlType::Q8_0 ? lo[i] : (i % 2 == 0 ? lo[i / 2] : hi[i / 2]);
      const int quad = F == GgmlType::Q8_0 ? i : (i % 2 == 0 ? i / 2 : 4 + i / 2);
      for (int t = 0; t < TB; ++t)
        dots[t] = DotQuad(dots[t], v, reinterpret_cast<const std::int8_t*>(rec + t * kRecord), quad);
    }
  }
#endif

  // The exact integer dot products with a block of x's quants q, one per row, plus `init` (the
  // record's start integer: Q4_0's -8 S, VNNI Q8_0's -128 S; Note [Packed x records]), in kChains
  // vpdpbusd chains (then added) with VNNI.
  template <int kChains>
  HWY_INLINE VI Dot(const std::int8_t* q, const std::byte* init) const {
#ifdef NPUGRAPH_PACKED_VNNI
    constexpr bool kInit = F != GgmlType::Q4_1;
    const VI start = kInit ? hn::Set(DI(), rec_i32(init, 0)) : hn::Zero(DI());
    // The 8 quads: Q8_0's lo[0..8), the Q4 formats' lo[j] with quad j and hi[j] with quad 4 + j.
    const auto vec = [&](int i) { return F == GgmlType::Q8_0 ? lo[i] : (i % 2 == 0 ? lo[i / 2] : hi[i / 2]); };
    const auto quad = [](int i) { return F == GgmlType::Q8_0 ? i : (i % 2 == 0 ? i / 2 : 4 + i / 2); };
    if constexpr (kChains == 1) {
      VI a = start;
      for (int i = 0; i < 8; ++i) a = DotQuad(a, vec(i), q, quad(i));
      return a;
    } else {
      VI a = DotQuad(start, vec(0), q, quad(0));
      VI b = DotQuad(hn::Zero(DI()), vec(1), q, quad(1));
      for (int i = 2; i < 8; i += 2) {
        a = DotQuad(a, vec(i), q, quad(i));
        b = DotQuad(b, vec(i + 1), q, quad(i + 1));
      }
      return hn::Add(a, b);
    }
#else
    (void)kChains;
    if constexpr (F == GgmlType::Q8_0) {
      VI acc = hn::Zero(DI());
      for (int j = 0; j < kVecs; ++j) {
        const VS8 w = hn::BitCast(DS8(), lo[j]);
        acc = hn::Add(acc, PairSums(Maddubs(hn::BitCast(DU8(), hn::Abs(w)), SignOf(Quad(q, j), w))));
      }
      return acc;
    } else if constexpr (F == GgmlType::Q5_0) {
      // Values up to 31: a pmaddubsw pair is at most 2 * 31 * 127 = 7874, so 4 of them per int16
      // sum (31496 < 2^15) before pmaddwd, twice.
      VI dot = hn::Set(DI(), rec_i32(init, 0));
      for (int h = 0; h < 2; ++h) {
        VI16 s = Maddubs(lo[2 * h], Quad(q, 2 * h));
        s = hn::Add(s, Maddubs(hi[2 * h], Quad(q, 4 + 2 * h)));
        s = hn::Add(s, Maddubs(lo[2 * h + 1], Quad(q, 2 * h + 1)));
        s = hn::Add(s, Maddubs(hi[2 * h + 1], Quad(q, 5 + 2 * h)));
        dot = hn::Add(dot, PairSums(s));
      }
      return dot;
    } else {
      VI16 s = Maddubs(lo[0], Quad(q, 0));
      s = hn::Add(s, Maddubs(hi[0], Quad(q, 4)));
      for (int j = 1; j < 4; ++j) {
        s = hn::Add(s, Maddubs(lo[j], Quad(q, j)));
        s = hn::Add(s, Maddubs(hi[j], Quad(q, 4 + j)));
      }
      const VI dot = PairSums(s);
      if constexpr (F == GgmlType::Q4_0) return hn::Add(dot, hn::Set(DI(), rec_i32(init, 0)));
      return dot;
    }
#endif
  }
};

// Outputs [t0, t0 + TB) x rows [n0, n0 + L) of one sub-group (its bytes from `group`, `sub` its
// index in the group).
template <GgmlType F, int TB>
HWY_INLINE void SubGroup(const LinearParams& p, const PackedGeometry& geo, const XRecords& xr,
                         const std::byte* group, std::int64_t sub, std::int64_t n0, std::int64_t t0) {
  const DF df;
  const DH dh;
  const std::int64_t nb = p.K / kBlock;
  VF acc[TB];
  for (int t = 0; t < TB; ++t) acc[t] = hn::Zero(df);
  const std::byte* rec = xr.at(0, t0);  // the tile's records of block b: rec + t * kRecord
  const std::int64_t rec_step = xr.T * kRecord;
  for (std::int64_t b = 0; b < nb; ++b, rec += rec_step) {
    const std::byte* gb = group + b * geo.block_bytes;
    const auto* scales = reinterpret_cast<const hwy::float16_t*>(gb) + sub * kL;
    const VF dw = hn::PromoteTo(df, hn::LoadU(dh, scales));
    VF mw;
    if constexpr (F == GgmlType::Q4_1) mw = hn::PromoteTo(df, hn::LoadU(dh, scales + kPackRows));
    const auto* qh = reinterpret_cast<const std::uint8_t*>(gb + 2 * kPackRows) + sub * 4 * kL;  // Q5_0
    const Unpacked<F> w(reinterpret_cast<const std::uint8_t*>(gb + geo.quants_offset) + sub * 4 * kL, qh);
    // With VNNI and 4 rows or more, the rows' chains interleaved (DotRows); fewer rows: 2 chains each.
#ifdef NPUGRAPH_PACKED_VNNI
    constexpr bool kRows = TB >= 4;
#else
    constexpr bool kRows = false;
#endif
    VI dots[TB];
    if constexpr (kRows) w.DotRows(rec, dots);
    for (int t = 0; t < TB; ++t) {
      const std::byte* r = rec + t * kRecord;
      if constexpr (!kRows) dots[t] = w.template Dot<2>(reinterpret_cast<const std::int8_t*>(r), r + kRecInit);
      const VI dot = dots[t];
      acc[t] = hn::MulAdd(hn::Mul(hn::ConvertTo(df, dot), hn::Set(df, rec_f32(r, kRecD))), dw, acc[t]);
      if constexpr (F == GgmlType::Q4_1) acc[t] = hn::MulAdd(hn::Set(df, rec_f32(r, kRecSD)), mw, acc[t]);
    }
  }
  const std::int64_t lanes = std::min<std::int64_t>(kL, p.N - n0);
  if (lanes == kL && p.y_dtype == DType::f32) {  // store_out's sums, a vector at a time
    for (int t = 0; t < TB; ++t) {
      VF v = acc[t];
      if (p.bias) v = hn::Add(v, hn::LoadU(df, p.bias + n0));
      hn::StoreU(v, df, static_cast<float*>(p.y) + (t0 + t) * p.y_stride + n0);
    }
    return;
  }
  HWY_ALIGN float out[kL];
  for (int t = 0; t < TB; ++t) {
    hn::Store(acc[t], df, out);
    for (std::int64_t r = 0; r < lanes; ++r) linear_impl::store_out(p, t0 + t, n0 + r, out[r]);
  }
}

// Rows of x per tile (their accumulators and the unpacked block stay in registers): with VNNI a
// block's dot product needs no int16 temporaries, so 8 rows share one unpacking.
constexpr int kTB = HWY_TARGET <= HWY_AVX3_DL ? 8 : HWY_TARGET <= HWY_AVX3 ? 4 : 2;

// The last tile of `rest` (< kTB) rows of x: SubGroup<F, rest>.
template <GgmlType F, int TB>
HWY_INLINE void LastTile(const LinearParams& p, const PackedGeometry& geo, const XRecords& xr,
                         const std::byte* group, std::int64_t sub, std::int64_t n0, std::int64_t t0,
                         std::int64_t rest) {
  if constexpr (TB > 0) {
    if (rest == TB) return SubGroup<F, TB>(p, geo, xr, group, sub, n0, t0);
    LastTile<F, TB - 1>(p, geo, xr, group, sub, n0, t0, rest);
  }
}

template <GgmlType F>
HWY_INLINE void Group(const LinearParams& p, const PackedGeometry& geo, const XRecords& xr, std::int64_t g) {
  const std::byte* group = p.w + g * geo.group_bytes;
  for (std::int64_t sub = 0; sub < kPackRows / kL; ++sub) {
    const std::int64_t n0 = g * kPackRows + sub * kL;
    if (n0 >= p.N) return;
    std::int64_t t0 = 0;
    for (; t0 + kTB <= p.T; t0 += kTB) SubGroup<F, kTB>(p, geo, xr, group, sub, n0, t0);
    if (t0 < p.T) LastTile<F, kTB - 1>(p, geo, xr, group, sub, n0, t0, p.T - t0);
  }
}
#else
// Other targets: the same sums, one row at a time, in scalar code.
template <GgmlType F>
HWY_INLINE void Group(const LinearParams& p, const PackedGeometry& geo, const XRecords& xr, std::int64_t g) {
  const std::int64_t nb = p.K / kBlock;
  const float* table = p.half_table;
  for (std::int64_t r = 0; r < kPackRows && g * kPackRows + r < p.N; ++r) {
    for (std::int64_t t = 0; t < p.T; ++t) {
      float acc = 0.0f;
      for (std::int64_t b = 0; b < nb; ++b) {
        const std::byte* gb = p.w + g * geo.group_bytes + b * geo.block_bytes;
        std::uint16_t dh, mh = 0;
        std::memcpy(&dh, gb + 2 * r, 2);
        if constexpr (F == GgmlType::Q4_1) std::memcpy(&mh, gb + 2 * (kPackRows + r), 2);
        const auto* qs = reinterpret_cast<const std::uint8_t*>(gb + geo.quants_offset);
        const std::byte* rec = xr.at(b, t);
        const auto* q = reinterpret_cast<const std::int8_t*>(rec);
        std::int32_t dot = rec_i32(rec, kRecInit);  // Q4_0: -8 S; Q5_0: -16 S; otherwise 0 here
        std::uint32_t qh = 0;  // Q5_0's fifth bits, row r's lane after the scales
        if constexpr (F == GgmlType::Q5_0) std::memcpy(&qh, gb + 2 * kPackRows + 4 * r, 4);
        if constexpr (F == GgmlType::Q8_0) {
          for (int i = 0; i < 32; ++i)
            dot += static_cast<std::int8_t>(qs[64 * (i / 4) + 4 * r + i % 4]) * q[i];
        } else {
          for (int i = 0; i < 16; ++i) {
            const std::uint8_t byte = qs[64 * (i / 4) + 4 * r + i % 4];
            const int lo = (byte & 15) | static_cast<int>((qh >> i) & 1) << 4;
            const int hi = (byte >> 4) | static_cast<int>((qh >> (16 + i)) & 1) << 4;
            dot += lo * q[i] + hi * q[i + 16];
          }
        }
        acc = std::fma(static_cast<float>(dot) * rec_f32(rec, kRecD), table[dh], acc);
        if constexpr (F == GgmlType::Q4_1) acc = std::fma(rec_f32(rec, kRecSD), table[mh], acc);
      }
      linear_impl::store_out(p, t, g * kPackRows + r, acc);
    }
  }
}
#endif

template <GgmlType F>
void Gemv(const LinearParams& p, const XRecords& xr, const ExecContext& ctx) {
  const PackedGeometry geo = packed_geometry(p);
  const std::int64_t groups = (p.N + kPackRows - 1) / kPackRows;
  ctx.parallel_for(groups, p.chunk_rows / kPackRows, [&](std::int64_t g_begin, std::int64_t g_end) {
    // The chunk's groups are contiguous: prefetched kPrefetchAhead ahead as each group starts.
    const std::byte* const end = p.w + g_end * geo.group_bytes;
    const std::byte* const begin = p.w + g_begin * geo.group_bytes;
    linear_impl::prefetch_range(begin, std::min(end, begin + linear_impl::kPrefetchAhead));
    for (std::int64_t g = g_begin; g < g_end; ++g) {
      const std::byte* ahead = p.w + g * geo.group_bytes + linear_impl::kPrefetchAhead;
      if (ahead < end) linear_impl::prefetch_range(ahead, std::min(end, ahead + geo.group_bytes));
      Group<F>(p, geo, xr, g);
    }
  });
}

// The packed GEMV of every row with rows16.
using RunFn = void (*)(const LinearParams&, const XRecords&, const ExecContext&);
constexpr linear_impl::KernelTable<RunFn> kRun = linear_impl::make_kernel_table<RunFn>([](auto i) -> RunFn {
  constexpr QuantTraits row = kGgmlTypes[i];
  if constexpr (row.rows16) {
    return &Gemv<row.type>;
  } else {
    return nullptr;
  }
});

void RunPackedQ8(const LinearParams& p, const ExecContext& ctx) {
  const std::int64_t nb = p.K / kBlock;
  const std::int64_t blocks = p.T * nb;
  // The launching thread's buffers; the chunks only read them, and parallel_for returns after them.
  thread_local std::vector<std::int8_t> q;
  thread_local std::vector<float> d;
  thread_local std::vector<std::byte> records;
  q.resize(static_cast<std::size_t>(blocks * kBlock));
  d.resize(static_cast<std::size_t>(blocks));
  records.resize(static_cast<std::size_t>(blocks * kRecord));
  const QuantRows xq{q.data(), d.data()};
  linear_impl::quantize_rows_q8(p.x, p.T, p.K, p.x_stride, xq);
  // The start integer of a block's dot product, per unit of S (Note [Packed x records]).
#ifdef NPUGRAPH_PACKED_VNNI
  const std::int32_t init_per_s = p.type == GgmlType::Q4_0   ? -8
                                  : p.type == GgmlType::Q5_0 ? -16
                                  : p.type == GgmlType::Q8_0 ? -128
                                                             : 0;
#else
  const std::int32_t init_per_s = p.type == GgmlType::Q4_0 ? -8 : p.type == GgmlType::Q5_0 ? -16 : 0;
#endif
  const XRecords xr{records.data(), p.T};
  for (std::int64_t t = 0; t < p.T; ++t)
    for (std::int64_t b = 0; b < nb; ++b) {
      const std::int64_t k = t * nb + b;  // x's block in quantize_rows_q8's row-major order
      const std::int8_t* qk = q.data() + k * kBlock;
      std::int32_t sum = 0;
      for (std::int64_t i = 0; i < kBlock; ++i) sum += qk[i];
      const float dk = d[static_cast<std::size_t>(k)];
      const float sd = static_cast<float>(sum) * dk;
      const std::int32_t init = init_per_s * sum;
      std::byte* rec = records.data() + (b * p.T + t) * kRecord;
      std::memcpy(rec, qk, kBlock);
      std::memcpy(rec + kRecD, &dk, sizeof dk);
      std::memcpy(rec + kRecSD, &sd, sizeof sd);
      std::memcpy(rec + kRecInit, &init, sizeof init);
      std::memset(rec + kRecInit + 4, 0, kRecord - kRecInit - 4);
    }
  linear_impl::kernel_for(kRun, p.type, "linear kernel with rows16 weights")(p, xr, ctx);
}

}  // namespace HWY_NAMESPACE
}  // namespace npugraph::ops::linear_packed_impl
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace npugraph::ops::linear_packed_impl {

HWY_EXPORT(RunPackedQ8);

void run(const linear_impl::LinearParams& p, const ExecContext& ctx) {
  HWY_DYNAMIC_DISPATCH(RunPackedQ8)(p, ctx);
}

}  // namespace npugraph::ops::linear_packed_impl

namespace npugraph::ops::linear_impl {

void run_linear_packed_q8(const LinearParams& p, const ExecContext& ctx) { linear_packed_impl::run(p, ctx); }

}  // namespace npugraph::ops::linear_impl
#endif  // HWY_ONCE
