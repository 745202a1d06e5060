// The block functions of the types npugraph reads but does not compute on as blocks (Note
// [Quantisation table] in quant_formats.cpp): the float types' conversions and the dequantise-only
// formats Q5_1, Q2_K and Q3_K, for the GGUF reader's dequantize_row.
//
// Each value is computed as ggml's reference dequantize_row_* computes it, one float multiply (and
// one float add or subtract for the formats with a minimum), so results are bitwise equal to ggml's
// and to gguf-py's numpy code. This file must not be built with -ffp-contract=fast: GCC contracts
// C++ by default even in ISO mode, and a baseline with FMA (aarch64) would fuse; CMakeLists.txt
// builds it with -ffp-contract=off.
#include <cstring>

#include "npugraph/dtype.hpp"
#include "npugraph/ops/quant_blocks.hpp"

namespace npugraph::ops {
namespace {

float half(std::uint16_t bits) { return f16_bits_to_f32(bits); }

template <class Block>
Block load_block(const std::byte* p) {
  Block b;
  std::memcpy(&b, p, sizeof(Block));
  return b;
}

constexpr int kQK_K = static_cast<int>(kQuantBlockK);

}  // namespace

void BlockF32::dequantize(const std::byte* s, float* y, std::int64_t n) {
  if (n > 0) std::memcpy(y, s, static_cast<std::size_t>(n) * sizeof(float));
}

void BlockF16::dequantize(const std::byte* s, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint16_t h;
    std::memcpy(&h, s + 2 * i, 2);
    y[i] = half(h);
  }
}

void BlockBF16::dequantize(const std::byte* s, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint16_t h;
    std::memcpy(&h, s + 2 * i, 2);
    y[i] = bf16_bits_to_f32(h);
  }
}

void BlockQ5_1::dequantize(const std::byte* src, float* y, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i, y += 32) {
    const auto b = load_block<BlockQ5_1>(src + i * sizeof(BlockQ5_1));
    const float d = half(b.d), m = half(b.m);
    std::uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    for (int j = 0; j < 16; ++j) {
      const int x0 = (b.qs[j] & 0x0f) | (static_cast<int>((qh >> j) & 1u) << 4);
      const int x1 = (b.qs[j] >> 4) | (static_cast<int>((qh >> (j + 16)) & 1u) << 4);
      const float p0 = static_cast<float>(x0) * d;
      const float p1 = static_cast<float>(x1) * d;
      y[j] = p0 + m;
      y[j + 16] = p1 + m;
    }
  }
}

// ---- K-quants: 256-element super-blocks of 16 sub-blocks, each with its own scale -----------------
// Element e of a super-block; the layouts are ggml-common.h's block_q2_K / block_q3_K. Each value is
// the sub-block's scale (a float product) times the quant, minus the sub-block's float minimum.

void BlockQ2_K::dequantize(const std::byte* src, float* y, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i, y += kQK_K) {
    const auto b = load_block<BlockQ2_K>(src + i * sizeof(BlockQ2_K));
    const float d = half(b.d), dmin = half(b.dmin);
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, s = (e % 128) / 32, l = e % 32, sub = e / 16;
      const int q = (b.qs[32 * h + l] >> (2 * s)) & 3;
      const float dl = d * static_cast<float>(b.scales[sub] & 0xf);
      const float ml = dmin * static_cast<float>(b.scales[sub] >> 4);
      const float p = dl * static_cast<float>(q);
      y[e] = p - ml;
    }
  }
}

void BlockQ3_K::dequantize(const std::byte* src, float* y, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i, y += kQK_K) {
    const auto b = load_block<BlockQ3_K>(src + i * sizeof(BlockQ3_K));
    const float d = half(b.d);
    float dl[16];
    for (int k = 0; k < 16; ++k) {  // 6-bit scales: low nibbles in bytes 0-7, high 2 bits in 8-11
      const int low = k < 8 ? (b.scales[k] & 0xf) : (b.scales[k - 8] >> 4);
      const int high = (b.scales[8 + k % 4] >> (2 * (k / 4))) & 3;
      dl[k] = d * static_cast<float>(static_cast<std::int8_t>(low | (high << 4)) - 32);
    }
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, s = (e % 128) / 32, l = e % 32;
      const int low = (b.qs[32 * h + l] >> (2 * s)) & 3;
      const int bit = (b.hmask[l] >> (e / 32)) & 1;
      y[e] = dl[e / 16] * static_cast<float>(low - (bit ? 0 : 4));
    }
  }
}

}  // namespace npugraph::ops
