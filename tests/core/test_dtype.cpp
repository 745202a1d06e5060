// f16 / bf16 conversions checked against the compiler's own _Float16 and against hand-made cases.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "npugraph/dtype.hpp"

using namespace npugraph;

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(f32), 4u);
  EXPECT_EQ(dtype_size(f16), 2u);
  EXPECT_EQ(dtype_size(bf16), 2u);
  EXPECT_EQ(dtype_size(i8), 1u);
  EXPECT_EQ(dtype_size(i64), 8u);
  EXPECT_EQ(dtype_size(boolean), 1u);
  EXPECT_EQ(dtype_name(bf16), "bfloat16");
}

TEST(Half, EveryBitPatternWidensLikeTheCompiler) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float mine = f16_bits_to_f32(static_cast<std::uint16_t>(b));
    const float ref = static_cast<float>(std::bit_cast<_Float16>(static_cast<std::uint16_t>(b)));
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(mine)) << b;
    } else {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(mine), std::bit_cast<std::uint32_t>(ref)) << b;
    }
  }
}

TEST(Half, NarrowingRoundsToNearestEvenLikeTheCompiler) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 2'000'000; ++i) {
    // Random bit patterns cover subnormals, overflow and ties; bias half of them towards f16's range.
    std::uint32_t x = bits(rng);
    if (i & 1) x = (x & 0x807fffffu) | ((100u + (x >> 23) % 50u) << 23);
    const float f = std::bit_cast<float>(x);
    const std::uint16_t ref = std::bit_cast<std::uint16_t>(static_cast<_Float16>(f));
    const std::uint16_t mine = f32_to_f16_bits(f);
    if (std::isnan(f)) {
      ASSERT_EQ(mine & 0x7c00u, 0x7c00u);
      ASSERT_NE(mine & 0x3ffu, 0u);
    } else {
      ASSERT_EQ(mine, ref) << std::hex << x;
    }
  }
}

TEST(Half, HandCases) {
  EXPECT_EQ(f32_to_f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7c00);          // halfway to the next: rounds to inf
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: zero
  EXPECT_EQ(f32_to_f16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
  EXPECT_EQ(f32_to_f16_bits(-2.0f), 0xc000);
  EXPECT_EQ(static_cast<float>(half(0.1f)), 0.0999755859375f);
}

TEST(BFloat16, RoundTripAndRounding) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_bits_to_f32(static_cast<std::uint16_t>(b));
    if (!std::isnan(f)) {
      ASSERT_EQ(f32_to_bf16_bits(f), b);
    }
  }
  EXPECT_EQ(f32_to_bf16_bits(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16_bits(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16_bits(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(bf16_bits_to_f32(f32_to_bf16_bits(std::numeric_limits<float>::max()))));
}
