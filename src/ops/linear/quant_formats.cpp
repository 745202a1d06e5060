// Note [Quantisation table]
// Each ggml type is one row of kGgmlTypes (npugraph/ops/quant_table.hpp), indexed by its type
// number, in the shape of ggml's type traits: name, elements and bytes per block, where the quants
// start, its dequantiser and quantiser, and which kernels it has. A row of a type npugraph reads is
// made from its block struct (npugraph/ops/quant_blocks.hpp), whose static members are the block
// functions (defined here for the types npugraph computes on, in quant_formats_read.cpp for the
// float types and the dequantise-only ones); the other ggml types have rows that only size them.
// Nothing switches on the type: QuantWeight's checks, quantize / dequantize_blocks, the GGUF
// reader's sizes and dequantize_row, the model loader, the Python bindings and the kernels'
// dispatch (built from the rows' flags at compile time: linear_simd.cpp, linear_q8_simd.cpp,
// linear_packed_simd.cpp, each static_asserting that a flagged row has its kernel) all look up the
// row. A new type is a row, its block struct and functions and, to compute on it, its kernels
// (docs/architecture.md, "Adding a quantisation type"); a kernel a type lacks is refused by name
// (weight_quant_linear with Activations::q8 or on cuda, pack_rows16), never run on the wrong bytes.
//
// Dequantisers are ggml's dequantize_row_* value for value: exact products, then one rounding
// add (quant.hpp). The 32-element quantisers are ggml's quantize_row_*_ref; the K-quant ones are a
// plain min/max quantiser written here (ggml's make_qkx2_quants searches the scales; any valid
// block is what the tests and the tiny models need, and files come quantised already).
//
// K-quant layouts (ggml-common.h), element e of a 256-element super-block:
//   Q4_K / Q5_K: sub-block s = e / 32 (8 of them), l = e % 32; quant = nibble (s % 2) of
//     qs[32 * (s / 2) + l] (| bit s of qh[l] << 4 for Q5_K); scale sc_s and minimum m_s are 6-bit
//     values in scales[12]: s < 4: scales[s] & 63 and scales[s + 4] & 63; s >= 4: the low nibble
//     (scale) and high nibble (minimum) of scales[s + 4], their high 2 bits in the top bits of
//     scales[s - 4] (scale) and scales[s] (minimum).  x = (d * sc_s) * q - (dmin * m_s).
//   Q6_K: h = e / 128, r = e % 128; low 4 bits: nibble (r / 64) of ql[64 * h + r % 64]; high 2
//     bits: bits 2 * (r / 32) of qh[32 * h + r % 32]; q = low | high << 4, in [0, 64);
//     x = (d * scales[e / 16]) * (q - 32).
#include "npugraph/ops/quant.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "npugraph/dtype.hpp"

namespace npugraph::ops::quant_formats {
namespace {

template <class Block>
Block load_block(const std::byte* p) {
  Block b;
  std::memcpy(&b, p, sizeof(Block));
  return b;
}
template <class Block>
void store_block(std::byte* p, const Block& b) {
  std::memcpy(p, &b, sizeof(Block));
}

float half(std::uint16_t bits) { return f16_bits_to_f32(bits); }
std::uint16_t to_half(float v) { return f32_to_f16_bits(v); }

constexpr int B = static_cast<int>(kQuantBlock);
constexpr int K = static_cast<int>(kQuantBlockK);

// ---- 32-element formats -------------------------------------------------------------------------

void dq_q4_0(const std::byte* src, float* y, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i, y += B) {
    const auto b = load_block<BlockQ4_0>(src + i * sizeof(BlockQ4_0));
    const float d = half(b.d);
    for (int j = 0; j < B / 2; ++j) {
      y[j] = static_cast<float>((b.qs[j] & 0x0f) - 8) * d;
      y[j + B / 2] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
    }
  }
}

void dq_q4_1(const std::byte* src, float* y, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i, y += B) {
    const auto b = load_block<BlockQ4_1>(src + i * sizeof(BlockQ4_1));
    const float d = half(b.d), m = half(b.m);
    for (int j = 0; j < B / 2; ++j) {
      const float p0 = static_cast<float>(b.qs[j] & 0x0f) * d;
      const float p1 = static_cast<float>(b.qs[j] >> 4) * d;
      y[j] = p0 + m;
      y[j + B / 2] = p1 + m;
    }
  }
}

void dq_q5_0(const std::byte* src, float* y, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i, y += B) {
    const auto b = load_block<BlockQ5_0>(src + i * sizeof(BlockQ5_0));
    const float d = half(b.d);
    std::uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    for (int j = 0; j < B / 2; ++j) {
      const int x0 = (b.qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int x1 = (b.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      y[j] = static_cast<float>(x0 - 16) * d;
      y[j + B / 2] = static_cast<float>(x1 - 16) * d;
    }
  }
}

void dq_q8_0(const std::byte* src, float* y, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i, y += B) {
    const auto b = load_block<BlockQ8_0>(src + i * sizeof(BlockQ8_0));
    const float d = half(b.d);
    for (int j = 0; j < B; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
  }
}

// The block's value of largest magnitude, sign kept (the first of equals), as ggml's quantisers
// find it.
float extreme(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < B; ++j)
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  return max;
}

// ggml's quantize_row_q4_0_ref: d = the value of largest magnitude / -8.
void q_q4_0(const float* x, std::byte* out, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i, x += B) {
    const float max = extreme(x);
    const float d = max / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_0 b{};
    b.d = to_half(d);
    for (int j = 0; j < B / 2; ++j) {
      const float x0 = x[j] * id, x1 = x[j + B / 2] * id;
      const auto q0 = static_cast<std::uint8_t>(std::min(15, static_cast<int>(static_cast<std::int8_t>(x0 + 8.5f))));
      const auto q1 = static_cast<std::uint8_t>(std::min(15, static_cast<int>(static_cast<std::int8_t>(x1 + 8.5f))));
      b.qs[j] = static_cast<std::uint8_t>(q0 | (q1 << 4));
    }
    store_block(out + i * sizeof b, b);
  }
}

// ggml's quantize_row_q4_1_ref: the block's range in 15 steps from its minimum.
void q_q4_1(const float* x, std::byte* out, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i, x += B) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < B; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_1 b{};
    b.d = to_half(d);
    b.m = to_half(min);
    for (int j = 0; j < B / 2; ++j) {
      const float x0 = (x[j] - min) * id, x1 = (x[j + B / 2] - min) * id;
      const auto q0 = static_cast<std::uint8_t>(std::min(15, static_cast<int>(static_cast<std::int8_t>(x0 + 0.5f))));
      const auto q1 = static_cast<std::uint8_t>(std::min(15, static_cast<int>(static_cast<std::int8_t>(x1 + 0.5f))));
      b.qs[j] = static_cast<std::uint8_t>(q0 | (q1 << 4));
    }
    store_block(out + i * sizeof b, b);
  }
}

// ggml's quantize_row_q5_0_ref: d = the value of largest magnitude / -16.
void q_q5_0(const float* x, std::byte* out, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i, x += B) {
    const float max = extreme(x);
    const float d = max / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ5_0 b{};
    b.d = to_half(d);
    std::uint32_t qh = 0;
    for (int j = 0; j < B / 2; ++j) {
      const float x0 = x[j] * id, x1 = x[j + B / 2] * id;
      const int q0 = std::min(31, static_cast<int>(static_cast<std::int8_t>(x0 + 16.5f)));
      const int q1 = std::min(31, static_cast<int>(static_cast<std::int8_t>(x1 + 16.5f)));
      b.qs[j] = static_cast<std::uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<std::uint32_t>((q0 & 0x10) >> 4) << j;
      qh |= static_cast<std::uint32_t>((q1 & 0x10) >> 4) << (j + B / 2);
    }
    std::memcpy(b.qh, &qh, 4);
    store_block(out + i * sizeof b, b);
  }
}

// ggml's quantize_row_q8_0_ref: d = the largest magnitude / 127, quants rounded.
void q_q8_0(const float* x, std::byte* out, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i, x += B) {
    float amax = 0.0f;
    for (int j = 0; j < B; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 b{};
    b.d = to_half(d);
    for (int j = 0; j < B; ++j) b.qs[j] = static_cast<std::int8_t>(std::round(x[j] * id));
    store_block(out + i * sizeof b, b);
  }
}

// ---- K-quants -----------------------------------------------------------------------------------

void scale_min_k4(const std::uint8_t* sc, int j, int& scale, int& min) {
  if (j < 4) {
    scale = sc[j] & 63;
    min = sc[j + 4] & 63;
  } else {
    scale = (sc[j + 4] & 0xf) | ((sc[j - 4] >> 6) << 4);
    min = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
  }
}

void set_scale_min_k4(std::uint8_t* sc, int j, int scale, int min) {
  if (j < 4) {
    sc[j] = static_cast<std::uint8_t>((sc[j] & 0xc0) | scale);
    sc[j + 4] = static_cast<std::uint8_t>((sc[j + 4] & 0xc0) | min);
  } else {
    sc[j + 4] = static_cast<std::uint8_t>((scale & 0xf) | ((min & 0xf) << 4));
    sc[j - 4] = static_cast<std::uint8_t>(sc[j - 4] | ((scale >> 4) << 6));
    sc[j] = static_cast<std::uint8_t>(sc[j] | ((min >> 4) << 6));
  }
}

template <bool kFive>
void dq_q45_k(const std::byte* src, float* y, std::int64_t blocks) {
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
  for (std::int64_t i = 0; i < blocks; ++i, y += K) {
    const auto b = load_block<Block>(src + i * sizeof(Block));
    const float d = half(b.d), dmin = half(b.dmin);
    for (int s = 0; s < 8; ++s) {
      int sc, mn;
      scale_min_k4(b.scales, s, sc, mn);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(mn);
      for (int l = 0; l < 32; ++l) {
        int q = (b.qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0xf;
        if constexpr (kFive) q |= ((b.qh[l] >> s) & 1) << 4;
        const float p = dl * static_cast<float>(q);
        y[32 * s + l] = p - ml;
      }
    }
  }
}

void dq_q6_k(const std::byte* src, float* y, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i, y += K) {
    const auto b = load_block<BlockQ6_K>(src + i * sizeof(BlockQ6_K));
    const float d = half(b.d);
    for (int e = 0; e < K; ++e) {
      const int h = e / 128, r = e % 128;
      const int low = (b.ql[64 * h + r % 64] >> (4 * (r / 64))) & 0xf;
      const int high = (b.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
      const float dl = d * static_cast<float>(b.scales[e / 16]);
      y[e] = dl * static_cast<float>((low | (high << 4)) - 32);
    }
  }
}

int nearest(float v) { return static_cast<int>(std::lround(v)); }

// Q4_K / Q5_K: each sub-block's range [min(0, lowest), highest] in (2^bits - 1) steps; the 8
// step sizes and the 8 minimums quantised to 6 bits against the super-block's d and dmin; the
// quants then rounded against the stored (dequantised) scale and minimum.
template <bool kFive>
void q_q45_k(const float* x, std::byte* out, std::int64_t blocks) {
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
  constexpr int kMax = kFive ? 31 : 15;
  for (std::int64_t i = 0; i < blocks; ++i, x += K) {
    float step[8], low[8];
    float max_step = 0.0f, max_low = 0.0f;
    for (int s = 0; s < 8; ++s) {
      float lo = 0.0f, hi = 0.0f;
      for (int l = 0; l < 32; ++l) {
        lo = std::min(lo, x[32 * s + l]);
        hi = std::max(hi, x[32 * s + l]);
      }
      step[s] = (hi - lo) / kMax;
      low[s] = -lo;
      max_step = std::max(max_step, step[s]);
      max_low = std::max(max_low, low[s]);
    }
    Block b{};
    b.d = to_half(max_step / 63);
    b.dmin = to_half(max_low / 63);
    const float d = half(b.d), dmin = half(b.dmin);
    for (int s = 0; s < 8; ++s) {
      const int sc = d > 0.0f ? std::clamp(nearest(step[s] / d), 0, 63) : 0;
      const int mn = dmin > 0.0f ? std::clamp(nearest(low[s] / dmin), 0, 63) : 0;
      set_scale_min_k4(b.scales, s, sc, mn);
      const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(mn);
      for (int l = 0; l < 32; ++l) {
        const int q = dl > 0.0f ? std::clamp(nearest((x[32 * s + l] + ml) / dl), 0, kMax) : 0;
        b.qs[32 * (s / 2) + l] = static_cast<std::uint8_t>(b.qs[32 * (s / 2) + l] | ((q & 0xf) << (4 * (s % 2))));
        if constexpr (kFive) b.qh[l] = static_cast<std::uint8_t>(b.qh[l] | (((q >> 4) & 1) << s));
      }
    }
    store_block(out + i * sizeof(Block), b);
  }
}

// Q6_K: each 16-element sub-block's step = its largest magnitude / 32, the 16 steps as int8
// multiples of d = the largest step / 127, the quants rounded against the stored step.
void q_q6_k(const float* x, std::byte* out, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i, x += K) {
    float step[16], max_step = 0.0f;
    for (int s = 0; s < 16; ++s) {
      float amax = 0.0f;
      for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * s + l]));
      step[s] = amax / 32;
      max_step = std::max(max_step, step[s]);
    }
    BlockQ6_K b{};
    b.d = to_half(max_step / 127);
    const float d = half(b.d);
    for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<std::int8_t>(d > 0.0f ? std::clamp(nearest(step[s] / d), 0, 127) : 0);
    for (int e = 0; e < K; ++e) {
      const float dl = d * static_cast<float>(b.scales[e / 16]);
      const int q = (dl > 0.0f ? std::clamp(nearest(x[e] / dl), -32, 31) : 0) + 32;
      const int h = e / 128, r = e % 128;
      b.ql[64 * h + r % 64] = static_cast<std::uint8_t>(b.ql[64 * h + r % 64] | ((q & 0xf) << (4 * (r / 64))));
      b.qh[32 * h + r % 32] = static_cast<std::uint8_t>(b.qh[32 * h + r % 32] | ((q >> 4) << (2 * (r / 32))));
    }
    store_block(out + i * sizeof b, b);
  }
}

}  // namespace
}  // namespace npugraph::ops::quant_formats

// The block structs' functions (quant_blocks.hpp), which the table's rows point at.
namespace npugraph::ops {
using namespace quant_formats;

void BlockQ4_0::dequantize(const std::byte* s, float* y, std::int64_t n) { dq_q4_0(s, y, n); }
void BlockQ4_1::dequantize(const std::byte* s, float* y, std::int64_t n) { dq_q4_1(s, y, n); }
void BlockQ5_0::dequantize(const std::byte* s, float* y, std::int64_t n) { dq_q5_0(s, y, n); }
void BlockQ8_0::dequantize(const std::byte* s, float* y, std::int64_t n) { dq_q8_0(s, y, n); }
void BlockQ4_K::dequantize(const std::byte* s, float* y, std::int64_t n) { dq_q45_k<false>(s, y, n); }
void BlockQ5_K::dequantize(const std::byte* s, float* y, std::int64_t n) { dq_q45_k<true>(s, y, n); }
void BlockQ6_K::dequantize(const std::byte* s, float* y, std::int64_t n) { dq_q6_k(s, y, n); }

void BlockQ4_0::quantize(const float* x, std::byte* out, std::int64_t n) { q_q4_0(x, out, n); }
void BlockQ4_1::quantize(const float* x, std::byte* out, std::int64_t n) { q_q4_1(x, out, n); }
void BlockQ5_0::quantize(const float* x, std::byte* out, std::int64_t n) { q_q5_0(x, out, n); }
void BlockQ8_0::quantize(const float* x, std::byte* out, std::int64_t n) { q_q8_0(x, out, n); }
void BlockQ4_K::quantize(const float* x, std::byte* out, std::int64_t n) { q_q45_k<false>(x, out, n); }
void BlockQ5_K::quantize(const float* x, std::byte* out, std::int64_t n) { q_q45_k<true>(x, out, n); }
void BlockQ6_K::quantize(const float* x, std::byte* out, std::int64_t n) { q_q6_k(x, out, n); }

}  // namespace npugraph::ops
