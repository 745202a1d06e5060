// load_row_f32 / store_row_f32 (src/ops/convert/float_rows.hpp): bit for bit the scalar
// conversions of npugraph/dtype.hpp, on every value of the 16-bit formats and on every float32
// exponent with the rounding cases (Note [Exact float rows]). ctest's simd_target_* entries run
// this suite again on every other Highway target the machine can run.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "npugraph/dtype.hpp"
#include "ops/convert/float_rows.hpp"

namespace ng = npugraph;

namespace {

// Every 16-bit pattern, read from an odd offset over a length that leaves a tail (the vector loop
// and the scalar remainder both run).
template <class Expect>
void check_load_all(ng::DType dtype, Expect expect) {
  std::vector<std::uint16_t> bits(65536 + 8);
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::uint16_t>(i - 1);
  for (std::int64_t n : {std::int64_t{65536 + 5}, std::int64_t{7}, std::int64_t{1}}) {
    std::vector<float> out(static_cast<std::size_t>(n), -1.0f);
    ng::ops::load_row_f32(bits.data() + 1, dtype, n, out.data());
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint16_t b = bits[static_cast<std::size_t>(i) + 1];
      ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(expect(b)))
          << ng::dtype_name(dtype) << " bits 0x" << std::hex << b << " (n = " << std::dec << n << ")";
    }
  }
}

// Float32 values covering every exponent and sign: mantissas at the rounding boundaries of both
// 16-bit formats (the bits just below, at and above half of the dropped part, with an even and an
// odd kept part; every shift of the float16 subnormal range), the extremes, quiet and signalling
// NaN payloads, and random mantissas.
std::vector<float> store_inputs() {
  std::vector<std::uint32_t> mants = {0u, 1u, 0x7fffffu, 0x400000u, 0x3fffffu, 0x7fe000u};
  for (std::uint32_t base : {0u, 0x2000u, 0x12000u, 0x10000u, 0x30000u})
    for (std::uint32_t half : {0x1000u, 0x8000u})
      for (std::uint32_t d : {half - 1, half, half + 1}) mants.push_back((base | d) & 0x7fffffu);
  for (int s = 14; s <= 24; ++s) {  // float16 subnormals: the significand (with its hidden bit) >> s
    const std::uint32_t half = 1u << (s - 1);
    for (std::uint32_t kept : {0u, 1u, 2u, 3u, 0x155u})
      for (std::uint32_t d : {half - 1, half, half + 1})
        mants.push_back(((kept << s) | d) & 0x7fffffu);
  }
  std::mt19937 rng(1234);
  for (int i = 0; i < 64; ++i) mants.push_back(rng() & 0x7fffffu);
  std::vector<float> in;
  for (std::uint32_t sign : {0u, 0x80000000u})
    for (std::uint32_t e = 0; e < 256; ++e)
      for (std::uint32_t m : mants) in.push_back(std::bit_cast<float>(sign | (e << 23) | m));
  return in;
}

template <class Expect>
void check_store(ng::DType dtype, Expect expect) {
  const std::vector<float> in = store_inputs();
  for (std::size_t off : {std::size_t{0}, std::size_t{3}}) {
    const auto n = static_cast<std::int64_t>(in.size() - off);
    std::vector<std::uint16_t> out(static_cast<std::size_t>(n) + 1, 0xabcd);
    ng::ops::store_row_f32(in.data() + off, n, out.data(), dtype);
    for (std::int64_t i = 0; i < n; ++i) {
      const float x = in[static_cast<std::size_t>(i) + off];
      ASSERT_EQ(out[static_cast<std::size_t>(i)], expect(x))
          << ng::dtype_name(dtype) << " of float bits 0x" << std::hex << std::bit_cast<std::uint32_t>(x);
    }
    EXPECT_EQ(out.back(), 0xabcd) << "wrote past the row";
  }
}

std::uint16_t store_one(float x, ng::DType dtype) {
  std::uint16_t out = 0;
  ng::ops::store_row_f32(&x, 1, &out, dtype);
  return out;
}

std::uint16_t store_in_vector(float x, ng::DType dtype) {
  std::vector<float> in(64, x);  // the vector loop on every target (at most 16 lanes)
  std::vector<std::uint16_t> out(64);
  ng::ops::store_row_f32(in.data(), 64, out.data(), dtype);
  return out[17];
}

}  // namespace

TEST(FloatRows, LoadsEveryFloat16ValueAsTheScalarConversion) {
  check_load_all(ng::DType::f16, [](std::uint16_t b) { return ng::f16_bits_to_f32(b); });
}

TEST(FloatRows, LoadsEveryBfloat16ValueAsTheScalarConversion) {
  check_load_all(ng::DType::bf16, [](std::uint16_t b) { return ng::bf16_bits_to_f32(b); });
}

TEST(FloatRows, StoresFloat16AsTheScalarConversion) {
  check_store(ng::DType::f16, [](float x) { return ng::f32_to_f16_bits(x); });
}

TEST(FloatRows, StoresBfloat16AsTheScalarConversion) {
  check_store(ng::DType::bf16, [](float x) { return ng::f32_to_bf16_bits(x); });
}

// Hand-computed float16 results (IEEE binary16, round to nearest even), in the vector loop and in
// the scalar remainder alike.
TEST(FloatRows, Float16HandCases) {
  const struct {
    float x;
    std::uint16_t bits;
  } cases[] = {
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {65504.0f, 0x7bff},            // the largest half
      {65519.99f, 0x7bff},           // below the midpoint to infinity: rounds down
      {65520.0f, 0x7c00},            // the midpoint, odd kept part: rounds up to infinity
      {1.0f + 1.0f / 2048, 0x3c00},  // tie, even kept part: stays
      {1.0f + 3.0f / 2048, 0x3c02},  // tie, odd kept part: up
      {std::ldexp(1.0f, -24), 0x0001},        // the smallest subnormal
      {std::ldexp(1.0f, -25), 0x0000},        // half of it: tie to even (zero)
      {std::ldexp(3.0f, -25), 0x0002},        // 1.5 ulp: tie to even (2)
      {std::ldexp(1.0f, -14), 0x0400},        // the smallest normal
      {std::ldexp(1023.0f, -24) + std::ldexp(1.0f, -25), 0x0400},  // rounds up into the normals
      {-0.0f, 0x8000},
      {1e-30f, 0x0000},
      {std::numeric_limits<float>::infinity(), 0x7c00},
      {std::bit_cast<float>(0x7fc00000u), 0x7e00},  // quiet NaN
      {std::bit_cast<float>(0xff800001u), 0xfe00},  // signalling NaN with a low payload: made quiet
  };
  for (const auto& c : cases) {
    EXPECT_EQ(store_one(c.x, ng::DType::f16), c.bits) << c.x;
    EXPECT_EQ(store_in_vector(c.x, ng::DType::f16), c.bits) << c.x;
  }
  EXPECT_EQ(store_in_vector(1.0f, ng::DType::bf16), 0x3f80);
  EXPECT_EQ(store_in_vector(1.0f + 1.0f / 256, ng::DType::bf16), 0x3f80);  // tie, even: stays
  EXPECT_EQ(store_in_vector(1.0f + 3.0f / 256, ng::DType::bf16), 0x3f82);  // tie, odd: up
  EXPECT_EQ(store_in_vector(std::bit_cast<float>(0x7f800001u), ng::DType::bf16), 0x7fc0);  // NaN
}

TEST(FloatRows, Float32RowsAreCopiedAndEmptyRowsTouchNothing) {
  const float in[3] = {1.5f, -0.0f, std::bit_cast<float>(0x7f800001u)};
  float out[3] = {};
  ng::ops::load_row_f32(in, ng::DType::f32, 3, out);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(in[i]));
  float back[3] = {};
  ng::ops::store_row_f32(out, 3, back, ng::DType::f32);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(std::bit_cast<std::uint32_t>(back[i]), std::bit_cast<std::uint32_t>(in[i]));
  std::uint16_t untouched = 0x1234;
  ng::ops::store_row_f32(in, 0, &untouched, ng::DType::f16);
  ng::ops::load_row_f32(&untouched, ng::DType::f16, 0, out);
  EXPECT_EQ(untouched, 0x1234);
  EXPECT_EQ(out[0], 1.5f);
}
