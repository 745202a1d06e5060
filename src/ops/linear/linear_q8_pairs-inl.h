// The q8-activation GEMV of the 32-element formats (Q4_0, Q4_1, Q5_0, Q8_0) on 16-lane x86 targets
// (AVX-512): two blocks per 512-bit vector (Note [Q8 activations] in linear_q8_simd.cpp). Included
// by linear_q8_simd.cpp inside its per-target namespace, after Layout and load_u16 (it includes
// nothing itself).

#if defined(NPUGRAPH_OPS_LINEAR_Q8_PAIRS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NPUGRAPH_OPS_LINEAR_Q8_PAIRS_INL_H_
#undef NPUGRAPH_OPS_LINEAR_Q8_PAIRS_INL_H_
#else
#define NPUGRAPH_OPS_LINEAR_Q8_PAIRS_INL_H_
#endif

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
// 16-lane targets: two blocks per 512-bit vector. Q4 formats: the pair's 64 quants of x are stored
// as [b: 0-15 | b+1: 0-15 | b: 16-31 | b+1: 16-31] (PairLayout swaps the middle quarters after
// quantising), so that the weights' packed bytes of both blocks, and the same shifted right by 4,
// make one vector; Q8_0: [b | b+1]. A pair's lanes 4-7 and 12-15 (Q4) or 8-15 (Q8_0) are block b+1.
using DP8 = hn::ScalableTag<std::uint8_t>;
using DPS8 = hn::RebindToSigned<DP8>;
using DP32 = hn::ScalableTag<std::int32_t>;
using DPF = hn::ScalableTag<float>;
using VP32 = hn::Vec<DP32>;
using VPF = hn::Vec<DPF>;
static_assert(hn::MaxLanes(DP8()) == 64);

HWY_INLINE VP32 MaddPair(hn::Vec<DP8> u, hn::Vec<DPS8> s) {
  return VP32{_mm512_madd_epi16(_mm512_maddubs_epi16(u.raw, s.raw), _mm512_set1_epi16(1))};
}

template <GgmlType F>
HWY_INLINE hn::Vec<DP8> PairBytes(const std::byte* blk0, const std::byte* blk1) {
  using Lay = Layout<F>;
  const DP8 d8;
  const hn::Full256<std::uint8_t> d256;
  const auto* q0 = reinterpret_cast<const std::uint8_t*>(blk0 + Lay::kQs);
  const auto* q1 = reinterpret_cast<const std::uint8_t*>(blk1 + Lay::kQs);
  if constexpr (F == GgmlType::Q8_0) {
    return hn::Combine(d8, hn::LoadU(d256, q1), hn::LoadU(d256, q0));
  } else {
    const hn::Full128<std::uint8_t> d128;
    const auto both = hn::Combine(d256, hn::LoadU(d128, q1), hn::LoadU(d128, q0));
    const auto high = hn::BitCast(d256, hn::ShiftRight<4>(hn::BitCast(hn::Full256<std::uint16_t>(), both)));
    const auto nibbles = hn::And(hn::Combine(d8, high, both), hn::Set(d8, 0x0F));
    if constexpr (F != GgmlType::Q5_0) return nibbles;
    // Q5_0: the fifth bits in the pair's byte order [b: 0-15 | b+1: 0-15 | b: 16-31 | b+1: 16-31].
    std::uint32_t h0, h1;
    std::memcpy(&h0, blk0 + 2, 4);
    std::memcpy(&h1, blk1 + 2, 4);
    const std::uint64_t bits = (h0 & 0xffffull) | (std::uint64_t{h1 & 0xffffu} << 16) |
                               (std::uint64_t{h0 >> 16} << 32) | (std::uint64_t{h1 >> 16} << 48);
    return hn::Vec<DP8>{_mm512_mask_add_epi8(nibbles.raw, static_cast<__mmask64>(bits), nibbles.raw, _mm512_set1_epi8(16))};
  }
}

// Lanes of block b+1 in a pair (see above).
template <GgmlType F>
HWY_INLINE hn::Mask<DPF> SecondBlock() {
  const DP32 di;
  return hn::RebindMask(DPF(), hn::TestBit(hn::Iota(di, 0), hn::Set(di, F == GgmlType::Q8_0 ? 8 : 4)));
}

// The Q4 formats' pair layout of x's quants, from block order.
void PairLayout(const QuantRows& xq, std::int64_t T, std::int64_t nb) {
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t b = 0; b + 2 <= nb; b += 2) {
      std::int8_t* q = xq.q + (t * nb + b) * kBlock;
      std::int8_t tmp[16];
      std::memcpy(tmp, q + 16, 16);
      std::memcpy(q + 16, q + 32, 16);
      std::memcpy(q + 32, tmp, 16);
    }
}

// res[r][t] = the lane sums over the first 2 * (nb / 2) blocks, a pair at a time.
template <GgmlType F, int R, int TB>
HWY_INLINE void TilePairs(const LinearParams& p, const QuantRows& xq, const std::byte* const* w,
                          std::int64_t t0, float (&res)[R][TB]) {
  using Lay = Layout<F>;
  const DPF df;
  const DP8 d8;
  const DPS8 ds8;
  const float* table = p.half_table;
  const std::int64_t nb = p.K / kBlock;
  const auto second = SecondBlock<F>();
  VPF acc[R][TB];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TB; ++t) acc[r][t] = hn::Zero(df);
  for (std::int64_t b = 0; b + 2 <= nb; b += 2) {
    hn::Vec<DP8> wb[R];
    VPF dw[R], mw[R];
    for (int r = 0; r < R; ++r) {
      const std::byte* blk0 = w[r] + b * Lay::kBytes;
      const std::byte* blk1 = blk0 + Lay::kBytes;
      dw[r] = hn::IfThenElse(second, hn::Set(df, table[load_u16(blk1)]), hn::Set(df, table[load_u16(blk0)]));
      if constexpr (F == GgmlType::Q4_1)
        mw[r] = hn::IfThenElse(second, hn::Set(df, table[load_u16(blk1 + 2)]), hn::Set(df, table[load_u16(blk0 + 2)]));
      wb[r] = PairBytes<F>(blk0, blk1);
    }
    for (int t = 0; t < TB; ++t) {
      const std::int64_t k = (t0 + t) * nb + b;
      const auto x = hn::LoadU(ds8, xq.q + k * kBlock);
      const VPF d = hn::IfThenElse(second, hn::Set(df, xq.d[k + 1]), hn::Set(df, xq.d[k]));
      VP32 qsum;
      if constexpr (F != GgmlType::Q8_0) qsum = MaddPair(hn::Set(d8, 1), x);
      VPF xs;
      if constexpr (F == GgmlType::Q4_1) xs = hn::Mul(hn::ConvertTo(df, qsum), d);
      for (int r = 0; r < R; ++r) {
        VP32 isum;
        if constexpr (F == GgmlType::Q8_0) {
          const auto wi = hn::BitCast(ds8, wb[r]);
          isum = MaddPair(hn::BitCast(d8, hn::Abs(wi)),
                          hn::Vec<DPS8>{_mm512_mask_sub_epi8(x.raw, _mm512_movepi8_mask(wi.raw),
                                                             _mm512_setzero_si512(), x.raw)});
        } else {
          isum = MaddPair(wb[r], x);
          if constexpr (F == GgmlType::Q4_0) isum = hn::Sub(isum, hn::ShiftLeft<3>(qsum));
          if constexpr (F == GgmlType::Q5_0) isum = hn::Sub(isum, hn::ShiftLeft<4>(qsum));
        }
        acc[r][t] = hn::MulAdd(hn::Mul(hn::ConvertTo(df, isum), d), dw[r], acc[r][t]);
        if constexpr (F == GgmlType::Q4_1) acc[r][t] = hn::MulAdd(xs, mw[r], acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TB; ++t) res[r][t] = hn::GetLane(hn::SumOfLanes(df, acc[r][t]));
}
#endif

#endif  // include guard
