// The q8-activation GEMV of the 256-element super-block formats (Q4_K, Q5_K, Q6_K) on 16-lane x86
// targets (AVX-512): a super-block at a time, its scales decoded once per weight row and kept as
// int16 multipliers inside the integer dot product. Included by linear_q8_simd.cpp inside its
// per-target namespace, after Layout and load_u16 (it includes nothing itself).
//
// Note [Q8 super-blocks]
// x is quantised in blocks of 32 as for every other format (Note [Q8 activations]); before the
// chunks start, each super-block's 8 blocks of each row of x also give
//     dxe[64]: lanes 16v + l  = d_b  with b = 2v + (l >= 8)   (the scale of the block behind lane l
//                                                            of the v-th 64-element product below)
//     xs[16]:  Q4_K, Q5_K: lane s < 8 = d_s * sum_{j in block s} q_j, lanes 8-15 = 0;
//              Q6_K:       lane g     = d_{g/2} * sum_{j in 16-group g} q_j
// (each one float32 product). A weight super-block gives its quants n_j as unsigned bytes, the
// multiplier of each element (Q4_K, Q5_K: the 6-bit scale sc_s of its 32-element sub-block; Q6_K:
// the int8 scale of its 16-element group) and the offset of each lane
//     mn: Q4_K, Q5_K: lane s = -(dmin * float(m_s)), lanes 8-15 = 0;  Q6_K: lane g = d * float(-32 * sc_g)
// and per row t of x, for v = 0..3 (elements 64v .. 64v + 63):
//     i_v = the 16 int32 lanes sum over 4 consecutive elements of mult_j * n_j * q_j   (exact:
//           pmaddubsw pairs, then pmaddwd against the multipliers)
//     f = float(i_0) * dxe_0;  f = fma(float(i_v), dxe_v, f)  for v = 1, 2, 3
//     acc = fma(f, d, acc);  acc = fma(mn, xs, acc)
// over the super-blocks in order; y = the sum of acc's lanes (Highway's SumOfLanes) plus the bias.
// As everywhere in the q8 GEMV, y[t, n] depends on x[t], w[n] and the target only.
//
// Why: the 32-element path (TileBlocks) decodes a sub-block's 6-bit scale and minimum with scalar
// code for every row of x and reaches a fifth to a third of the read bandwidth; here the decode is
// vector code once per super-block and row, and a row of x costs 4 x (pmaddubsw, pmaddwd, convert,
// multiply-add) + 2 multiply-adds per 256 elements.

#if defined(NPUGRAPH_OPS_LINEAR_Q8_SUPER_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NPUGRAPH_OPS_LINEAR_Q8_SUPER_INL_H_
#undef NPUGRAPH_OPS_LINEAR_Q8_SUPER_INL_H_
#else
#define NPUGRAPH_OPS_LINEAR_Q8_SUPER_INL_H_
#endif

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128

// xs (and on AVX-512 dxe) of every (row of x, super-block) (Note [Q8 super-blocks]); 16 (+ 64)
// floats each. AVX2 reads the blocks' scales d from xq.d itself.
template <GgmlType F>
void PrepareSuperRows(QuantRows& xq, std::int64_t T, std::int64_t K, std::vector<float>& buf) {
  constexpr bool kDxe = HWY_TARGET <= HWY_AVX3;
  const std::int64_t nb = K / kBlock, nsb = K / 256;
  buf.resize(static_cast<std::size_t>(T * nsb * (kDxe ? 80 : 16)));
  float* dxe = kDxe ? buf.data() : nullptr;
  float* xs = buf.data() + (kDxe ? T * nsb * 64 : 0);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t sb = 0; sb < nsb; ++sb) {
      const std::int64_t b0 = t * nb + 8 * sb;
      if constexpr (kDxe) {
        float* e = dxe + (t * nsb + sb) * 64;
        for (int v = 0; v < 4; ++v)
          for (int l = 0; l < 16; ++l) e[16 * v + l] = xq.d[b0 + 2 * v + (l >= 8)];
      }
      float* s = xs + (t * nsb + sb) * 16;
      const std::int8_t* q = xq.q + b0 * kBlock;
      constexpr int kGroup = F == GgmlType::Q6_K ? 16 : 32;
      for (int g = 0; g < 16; ++g) {
        if (g * kGroup >= 256) {
          s[g] = 0.0f;
          continue;
        }
        std::int32_t sum = 0;
        for (int j = 0; j < kGroup; ++j) sum += q[g * kGroup + j];
        s[g] = xq.d[b0 + g * kGroup / kBlock] * static_cast<float>(sum);
      }
    }
  xq.super_dxe = dxe;
  xq.super_xs = xs;
}

// Q4_K / Q5_K: the 8 6-bit scales and 8 minimums of scales[12] (ggml's get_scale_min_k4) as bytes
// 0-7 and 8-15 of a vector, from a 16-byte load at scales (the last 4 bytes, quants, unused):
//   s < 4: scale = b[s] & 63,  min = b[s + 4] & 63
//   s >= 4: scale = (b[s + 4] & 15) | (b[s - 4] >> 6) << 4,  min = (b[s + 4] >> 4) | (b[s] >> 6) << 4
HWY_INLINE __m128i ScalesMinsK4(const std::byte* scales) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales));
  // low bits from b[0-3], b[8-11] (scales), b[4-7], b[8-11] (minimums); high bits from b[0-3], b[4-7]
  const __m128i lo_src = _mm_shuffle_epi8(b, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i hi_src = _mm_shuffle_epi8(b, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
  const __m128i lo = _mm_or_si128(
      _mm_and_si128(lo_src, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0)),
      _mm_and_si128(_mm_srli_epi16(lo_src, 4), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15)));
  // (x >> 6) << 4 = (x & 0xC0) >> 2: bits 6-7 of each byte to 4-5 (a 16-bit shift moves only zeros across)
  const __m128i hi = _mm_srli_epi16(_mm_and_si128(hi_src, _mm_set1_epi8(static_cast<char>(0xC0))), 2);
  return _mm_or_si128(lo, hi);
}

#endif  // AVX2 and the 16-lane x86 targets

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128

// One weight super-block as the products take it.
struct SuperWeights {
  __m512i n[4];    // elements 64v .. 64v + 63: unsigned quants
  __m512i mult[4]; // int16 lanes: the multiplier of each pmaddubsw pair
  __m512 mn, d;
};

template <GgmlType F>
HWY_INLINE void LoadSuper(const std::byte* sb, const float* table, SuperWeights& o) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  // 16-bit lanes 0-15 (bytes 0-31) shift by a, lanes 16-31 by b
  const auto shifts = [](int a, int b) {
    return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(a)), _mm256_set1_epi16(static_cast<short>(b)), 1);
  };
  if constexpr (F == GgmlType::Q6_K) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 192)));
    const __m512i sc512 = _mm512_castsi256_si512(sc16);
    for (int v = 0; v < 4; ++v) {  // pair k of the 64 elements: group 4v + k / 8
      const __m512i pair = hn::Iota(hn::ScalableTag<std::int16_t>(), 0).raw;
      const __m512i idx = _mm512_add_epi16(_mm512_set1_epi16(static_cast<short>(4 * v)), _mm512_srli_epi16(pair, 3));
      o.mult[v] = _mm512_permutexvar_epi16(idx, sc512);
    }
    const float d = table[load_u16(sb + 208)];
    o.d = _mm512_set1_ps(d);
    o.mn = _mm512_mul_ps(_mm512_set1_ps(-32.0f * d),
                         _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 192)))));
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(sb + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 128 + 32 * h)));
      for (int odd = 0; odd < 2; ++odd) {  // parts 0, 1 (low nibbles) or 2, 3 (high nibbles)
        const __m512i lo = _mm512_and_si512(odd ? _mm512_srli_epi16(ql, 4) : ql, low4);
        const __m512i hi = _mm512_and_si512(_mm512_srlv_epi16(qh, shifts(4 * odd, 4 * odd + 2)), _mm512_set1_epi8(3));
        o.n[2 * h + odd] = _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
      }
    }
  } else {
    const __m128i sm = ScalesMinsK4(sb + 4);  // scales in bytes 0-7, minimums in 8-15
    const __m512i sc512 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm));
    for (int v = 0; v < 4; ++v)  // pair k: sub-block 2v + (k >= 16)
      o.mult[v] = _mm512_permutexvar_epi16(shifts(2 * v, 2 * v + 1), sc512);
    o.d = _mm512_set1_ps(table[load_u16(sb)]);
    o.mn = _mm512_mul_ps(_mm512_set1_ps(-table[load_u16(sb + 2)]),
                         _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_srli_si128(sm, 8))));
    constexpr std::int64_t qs_at = F == GgmlType::Q5_K ? 48 : 16;
    const __m512i qh = F == GgmlType::Q5_K
                           ? _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 16)))
                           : _mm512_setzero_si512();
    for (int v = 0; v < 4; ++v) {  // sub-blocks 2v (low nibbles of qs[32v, 32v + 32)) and 2v + 1 (high)
      const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + qs_at + 32 * v)));
      o.n[v] = _mm512_and_si512(_mm512_srlv_epi16(q, shifts(0, 4)), low4);
      if constexpr (F == GgmlType::Q5_K) {
        const __m512i bit = _mm512_and_si512(_mm512_srlv_epi16(qh, shifts(2 * v, 2 * v + 1)), _mm512_set1_epi8(1));
        o.n[v] = _mm512_or_si512(o.n[v], _mm512_slli_epi16(bit, 4));
      }
    }
  }
}

// res[r][t] = the lane sum over every super-block of weight rows w[r] against row t0 + t of x.
template <GgmlType F, int R, int TB>
HWY_INLINE void TileSuper(const LinearParams& p, const QuantRows& xq, const std::byte* const* w,
                          std::int64_t t0, float (&res)[R][TB]) {
  const std::int64_t nb = p.K / kBlock, nsb = p.K / 256;
  __m512 acc[R][TB];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TB; ++t) acc[r][t] = _mm512_setzero_ps();
  for (std::int64_t sb = 0; sb < nsb; ++sb) {
    for (int r = 0; r < R; ++r) {
      SuperWeights s;
      LoadSuper<F>(w[r] + sb * Layout<F>::kBytes, p.half_table, s);
      for (int t = 0; t < TB; ++t) {
        const std::int64_t k = (t0 + t) * nsb + sb;
        const std::int8_t* q = xq.q + ((t0 + t) * nb + 8 * sb) * kBlock;
        const float* dxe = xq.super_dxe + k * 64;
        __m512 f = _mm512_setzero_ps();
        for (int v = 0; v < 4; ++v) {
          const __m512i i = _mm512_madd_epi16(_mm512_maddubs_epi16(s.n[v], _mm512_loadu_si512(q + 64 * v)), s.mult[v]);
          f = v == 0 ? _mm512_mul_ps(_mm512_cvtepi32_ps(i), _mm512_loadu_ps(dxe))
                     : _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), _mm512_loadu_ps(dxe + 16 * v), f);
        }
        acc[r][t] = _mm512_fmadd_ps(f, s.d, acc[r][t]);
        acc[r][t] = _mm512_fmadd_ps(s.mn, _mm512_loadu_ps(xq.super_xs + k * 16), acc[r][t]);
      }
    }
  }
  const hn::ScalableTag<float> df;
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TB; ++t) res[r][t] += hn::GetLane(hn::SumOfLanes(df, hn::Vec<decltype(df)>{acc[r][t]}));
}

#endif  // 16-lane x86 targets

#if HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
// Note [Q8 super-blocks on AVX2]
// 8-lane targets take a super-block at a time too, its 8 sub-blocks of 32 elements as 8 vectors of
// 32 bytes. With n_j, mult_j, mn, xs and d as Note [Q8 super-blocks] defines them (Q4_K, Q5_K: mn
// and xs lanes 0-7; Q6_K: lanes 0-7 and 8-15 as two vectors), per row t of x:
//     i_s = the 8 int32 lanes sum over 4 consecutive elements of sub-block s of mult_j * n_j * q_j
//           (pmaddubsw pairs, then pmaddwd against the multipliers; exact)
//     f = float(i_0) * d_b;  f = fma(float(i_s), d_{b+s}, f)  for s = 1..7   (b = 8 sb: x's blocks)
//     acc = fma(f, d, acc);  acc = fma(mn, xs, acc)   (Q6_K: lanes 0-7, then 8-15)
// over the super-blocks in order; y = the sum of acc's lanes plus the bias.
// Why: the 32-element path (TileBlocks) decodes each sub-block's scale and minimum with scalar code
// for every weight row and pays a float multiply-add pair per sub-block and row of x; here the
// decode is a few vector operations per super-block, shared by the tile's rows of x. A tile decodes
// two sub-blocks at a time and uses them at once (16 registers hold no more). At one or two rows of
// x, Q4_K and Q5_K take 4 weight rows a tile, so that 4 chains of f are in flight (AMD EPYC Zen 3,
// bench_linear gemv_q8_hot/Q4_K/576x1536/T:1: 36-38 -> 27-30 us); Q6_K keeps one (2 or 4 rows: its
// T:1 1.2-1.6x slower, its head and 3 loads a pair spilling).

// A weight super-block's scale, offsets and multipliers, once per super-block and weight row.
struct SuperHead {
  __m256i pairs[2];  // int16 multipliers, each in both halves of an int32 lane: Q4_K, Q5_K: the 8
                     // sub-blocks' (pairs[0]); Q6_K: groups 0-7 and 8-15
  __m256 mn[2], d;   // Q4_K, Q5_K: mn[0] only
};

// Each of 8 int16 values (zero-extended to int32 lanes) in both halves of its lane.
HWY_INLINE __m256i BothHalves(__m256i v32) { return _mm256_or_si256(v32, _mm256_slli_epi32(v32, 16)); }

template <GgmlType F>
HWY_INLINE void LoadHead(const std::byte* sb, const float* table, SuperHead& o) {
  if constexpr (F == GgmlType::Q6_K) {
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 192));
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);  // group g's int8 scale as int16 lane g
    o.pairs[0] = BothHalves(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(sc16)));
    o.pairs[1] = BothHalves(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(sc16, 1)));
    const float d = table[load_u16(sb + 208)];
    o.d = _mm256_set1_ps(d);
    // groups 0-7, then 8-15 (the byte shift's count must be an immediate: no loop, even at -O1)
    o.mn[0] = _mm256_mul_ps(_mm256_set1_ps(-32.0f * d), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc8)));
    o.mn[1] = _mm256_mul_ps(_mm256_set1_ps(-32.0f * d), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc8, 8))));
  } else {
    const __m128i sm = ScalesMinsK4(sb + 4);  // scales in bytes 0-7, minimums in 8-15
    o.pairs[0] = BothHalves(_mm256_cvtepu8_epi32(sm));
    o.d = _mm256_set1_ps(table[load_u16(sb)]);
    o.mn[0] = _mm256_mul_ps(_mm256_set1_ps(-table[load_u16(sb + 2)]), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8))));
  }
}

// Sub-blocks 2v and 2v + 1 of the super-block at sb: their quants n (unsigned bytes) and the
// int16 multiplier of each pmaddubsw pair.
template <GgmlType F>
HWY_INLINE void LoadPair(const std::byte* sb, const SuperHead& head, int v, __m256i (&n)[2], __m256i (&mult)[2]) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const auto load = [&](std::int64_t at) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + at)); };
  if constexpr (F == GgmlType::Q6_K) {
    // Sub-block 4h + part: ql's low (parts 0, 1) or high (2, 3) nibbles, qh's bits 2 part and
    // 2 part + 1 as bits 4-5 (16-bit shifts: the bits that cross into the other byte are masked off).
    const int h = v / 2;
    const __m256i ql0 = load(64 * h), ql1 = load(64 * h + 32), qh = load(128 + 32 * h);
    const __m256i high2 = _mm256_set1_epi8(0x30);
    if (v % 2 == 0) {
      n[0] = _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), high2));
      n[1] = _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), high2));
    } else {
      n[0] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, high2));
      n[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                             _mm256_and_si256(_mm256_srli_epi16(qh, 2), high2));
    }
    for (int k = 0; k < 2; ++k) {  // sub-block s: pairs 0-7 (low 128 bits) group 2s, pairs 8-15 group 2s + 1
      const int g = 2 * ((2 * v + k) % 4);
      mult[k] = _mm256_permutevar8x32_epi32(head.pairs[v / 2], _mm256_setr_epi32(g, g, g, g, g + 1, g + 1, g + 1, g + 1));
    }
  } else {
    // Sub-blocks 2v (low nibbles of qs[32v, 32v + 32)) and 2v + 1 (high); Q5_K: bit s of qh[j] is
    // element j of sub-block s, as 16.
    constexpr std::int64_t qs_at = F == GgmlType::Q5_K ? 48 : 16;
    const __m256i q = load(qs_at + 32 * v);
    n[0] = _mm256_and_si256(q, low4);
    n[1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
    if constexpr (F == GgmlType::Q5_K) {
      const __m256i qh = load(16);
      for (int k = 0; k < 2; ++k) {
        const __m256i bit = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * v + k), _mm256_set1_epi8(1));
        n[k] = _mm256_or_si256(n[k], _mm256_slli_epi16(bit, 4));
      }
    }
    for (int k = 0; k < 2; ++k) mult[k] = _mm256_permutevar8x32_epi32(head.pairs[0], _mm256_set1_epi32(2 * v + k));
  }
}

// res[r][t] = the lane sum over every super-block of weight rows w[r] against row t0 + t of x.
template <GgmlType F, int R, int TB>
HWY_INLINE void TileSuper(const LinearParams& p, const QuantRows& xq, const std::byte* const* w,
                          std::int64_t t0, float (&res)[R][TB]) {
  const std::int64_t nb = p.K / kBlock, nsb = p.K / 256;
  __m256 acc[R][TB];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TB; ++t) acc[r][t] = _mm256_setzero_ps();
  for (std::int64_t sb = 0; sb < nsb; ++sb) {
    SuperHead head[R];
    for (int r = 0; r < R; ++r) LoadHead<F>(w[r] + sb * Layout<F>::kBytes, p.half_table, head[r]);
    __m256 f[R][TB];
    // Unrolled whole (GCC's own limits leave these loops rolled, f and the weights in memory).
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v)
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        __m256i n[2], mult[2];
        LoadPair<F>(w[r] + sb * Layout<F>::kBytes, head[r], v, n, mult);
#pragma GCC unroll 8
        for (int t = 0; t < TB; ++t) {
          const std::int64_t b = (t0 + t) * nb + 8 * sb + 2 * v;  // x's block behind sub-block 2v
#pragma GCC unroll 2
          for (int k = 0; k < 2; ++k) {
            const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.q + (b + k) * kBlock));
            const __m256 i = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(n[k], q8), mult[k]));
            const __m256 d = _mm256_broadcast_ss(xq.d + b + k);
            f[r][t] = v == 0 && k == 0 ? _mm256_mul_ps(i, d) : _mm256_fmadd_ps(i, d, f[r][t]);
          }
        }
      }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < TB; ++t) {
        const float* xs = xq.super_xs + ((t0 + t) * nsb + sb) * 16;
        acc[r][t] = _mm256_fmadd_ps(f[r][t], head[r].d, acc[r][t]);
        acc[r][t] = _mm256_fmadd_ps(head[r].mn[0], _mm256_loadu_ps(xs), acc[r][t]);
        if constexpr (F == GgmlType::Q6_K) acc[r][t] = _mm256_fmadd_ps(head[r].mn[1], _mm256_loadu_ps(xs + 8), acc[r][t]);
      }
  }
  const hn::Full256<float> df;
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TB; ++t) res[r][t] += hn::GetLane(hn::SumOfLanes(df, hn::Vec<decltype(df)>{acc[r][t]}));
}
#endif  // AVX2

#endif  // include guard
