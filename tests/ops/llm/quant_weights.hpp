// Random block-quantised weights for the linear tests (test_linear.cpp, test_linear_q8.cpp).
#pragma once

#include <cstring>
#include <random>
#include <vector>

#include "npugraph/ops/quant.hpp"
#include "ops/llm/llm_ops_util.hpp"

namespace llm_ops_test {

inline std::uint16_t half_bits(float f) { return ng::f32_to_f16_bits(f); }

// Random blocks of `type` with finite half scales (any bit pattern for the quants).
inline std::vector<std::byte> random_blocks(ng::ops::QuantType type, std::int64_t blocks, std::uint32_t seed) {
  std::mt19937 gen(seed);
  const std::size_t bb = ng::ops::quant_block_bytes(type);
  std::vector<std::byte> out(static_cast<std::size_t>(blocks) * bb);
  for (auto& b : out) b = static_cast<std::byte>(gen() & 0xff);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (std::int64_t i = 0; i < blocks; ++i) {
    std::byte* blk = out.data() + i * static_cast<std::int64_t>(bb);
    const std::uint16_t d = half_bits(scale(gen)), m = half_bits(scale(gen) * 10);
    std::memcpy(blk, &d, 2);
    if (type == ng::ops::QuantType::q4_1) std::memcpy(blk + 2, &m, 2);
  }
  return out;
}

// A QuantWeight over a copy of `size` bytes.
inline ng::ops::QuantWeight weight_from(ng::ops::QuantType type, const void* bytes, std::size_t size,
                                        std::int64_t rows, std::int64_t cols) {
  Tensor t = ng::empty({static_cast<std::int64_t>(size)}, DType::u8);
  std::memcpy(t.data(), bytes, size);
  return ng::ops::QuantWeight(t, type, rows, cols);
}

inline ng::ops::QuantWeight random_weight(ng::ops::QuantType type, std::int64_t rows, std::int64_t cols,
                                          std::uint32_t seed) {
  const std::vector<std::byte> b = random_blocks(type, rows * cols / 32, seed);
  return weight_from(type, b.data(), b.size(), rows, cols);
}

}  // namespace llm_ops_test
