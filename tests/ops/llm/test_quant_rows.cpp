// The quantisation table walked row by row (Note [Quantisation table]): each row against its block
// struct and ggml's sizes, every computable row through its kernels, every GGUF type number
// against the reader, and quantise -> dequantise within each quantised type's error bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "npugraph/llm/gguf.hpp"
#include "npugraph/ops/linear.hpp"
#include "npugraph/ops/quant.hpp"
#include "ops/llm/llm_ops_util.hpp"
#include "ops/llm/quant_weights.hpp"

namespace llm_ops_test {
namespace {

namespace ops = ng::ops;
using ops::GgmlType;
using ops::QuantTraits;

// ggml-common.h's sizes, written out here (name, elements, bytes) for every type number.
struct GgmlSize {
  GgmlType type;
  std::string_view name;
  std::int64_t block;
  std::size_t bytes;
};
constexpr GgmlSize kGgmlSizes[] = {
    {GgmlType::F32, "F32", 1, 4},          {GgmlType::F16, "F16", 1, 2},
    {GgmlType::Q4_0, "Q4_0", 32, 18},      {GgmlType::Q4_1, "Q4_1", 32, 20},
    {GgmlType::Q5_0, "Q5_0", 32, 22},      {GgmlType::Q5_1, "Q5_1", 32, 24},
    {GgmlType::Q8_0, "Q8_0", 32, 34},      {GgmlType::Q8_1, "Q8_1", 32, 36},
    {GgmlType::Q2_K, "Q2_K", 256, 84},     {GgmlType::Q3_K, "Q3_K", 256, 110},
    {GgmlType::Q4_K, "Q4_K", 256, 144},    {GgmlType::Q5_K, "Q5_K", 256, 176},
    {GgmlType::Q6_K, "Q6_K", 256, 210},    {GgmlType::Q8_K, "Q8_K", 256, 292},
    {GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66}, {GgmlType::IQ2_XS, "IQ2_XS", 256, 74},
    {GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98}, {GgmlType::IQ1_S, "IQ1_S", 256, 50},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18},  {GgmlType::IQ3_S, "IQ3_S", 256, 110},
    {GgmlType::IQ2_S, "IQ2_S", 256, 82},   {GgmlType::IQ4_XS, "IQ4_XS", 256, 136},
    {GgmlType::I8, "I8", 1, 1},            {GgmlType::I16, "I16", 1, 2},
    {GgmlType::I32, "I32", 1, 4},          {GgmlType::I64, "I64", 1, 8},
    {GgmlType::F64, "F64", 1, 8},          {GgmlType::IQ1_M, "IQ1_M", 256, 56},
    {GgmlType::BF16, "BF16", 1, 2},        {GgmlType::TQ1_0, "TQ1_0", 256, 54},
    {GgmlType::TQ2_0, "TQ2_0", 256, 66},   {GgmlType::MXFP4, "MXFP4", 32, 17},
};

// The rows made from a block struct agree with it: number, elements, bytes, functions.
template <class Block>
void expect_row_is_block(std::string_view name) {
  const QuantTraits& row = ops::ggml_traits(Block::kType);
  EXPECT_EQ(row.name, name);
  EXPECT_EQ(row.block, Block::kElems) << name;
  EXPECT_EQ(row.block_bytes, sizeof(Block)) << name;
  EXPECT_EQ(row.dequantize, &Block::dequantize) << name;
  if constexpr (requires { &Block::quantize; }) {
    EXPECT_EQ(row.quantize, &Block::quantize) << name;
  } else {
    EXPECT_EQ(row.quantize, nullptr) << name;
  }
  EXPECT_TRUE(row.reads) << name;  // the flags say what the pointers say
  EXPECT_EQ(row.quantises, row.quantize != nullptr) << name;
}

TEST(QuantRows, EachRowIsItsBlockStruct) {
  expect_row_is_block<ops::BlockF32>("F32");
  expect_row_is_block<ops::BlockF16>("F16");
  expect_row_is_block<ops::BlockBF16>("BF16");
  expect_row_is_block<ops::BlockQ4_0>("Q4_0");
  expect_row_is_block<ops::BlockQ4_1>("Q4_1");
  expect_row_is_block<ops::BlockQ5_0>("Q5_0");
  expect_row_is_block<ops::BlockQ5_1>("Q5_1");
  expect_row_is_block<ops::BlockQ8_0>("Q8_0");
  expect_row_is_block<ops::BlockQ2_K>("Q2_K");
  expect_row_is_block<ops::BlockQ3_K>("Q3_K");
  expect_row_is_block<ops::BlockQ4_K>("Q4_K");
  expect_row_is_block<ops::BlockQ5_K>("Q5_K");
  expect_row_is_block<ops::BlockQ6_K>("Q6_K");
  // Every row that can read values was checked above: 13 types with a block struct.
  int readable = 0;
  for (const QuantTraits& t : ops::kGgmlTypes) readable += t.dequantizable() ? 1 : 0;
  EXPECT_EQ(readable, 13);
}

// Every type number the reader accepts has a row with ggml's sizes, and no other number has one.
TEST(QuantRows, EveryGgufTypeHasItsRow) {
  std::map<std::uint32_t, GgmlSize> want;
  for (const GgmlSize& s : kGgmlSizes) want[static_cast<std::uint32_t>(s.type)] = s;
  for (std::uint32_t n = 0; n < 64; ++n) {
    const QuantTraits* row = ng::llm::ggml_type_traits(n);
    const auto it = want.find(n);
    if (it == want.end()) {
      EXPECT_EQ(row, nullptr) << "type number " << n << " is no ggml type";
      continue;
    }
    ASSERT_NE(row, nullptr) << it->second.name;
    EXPECT_EQ(static_cast<std::uint32_t>(row->type), n);
    EXPECT_EQ(row->name, it->second.name);
    EXPECT_EQ(row->block, it->second.block) << row->name;
    EXPECT_EQ(row->block_bytes, it->second.bytes) << row->name;
    EXPECT_EQ(ng::llm::ggml_type_name(row->type), row->name);
  }
  // The QuantTypes are the computable quantised rows, in type-number order.
  std::vector<std::string_view> computable;
  for (const QuantTraits& t : ops::kGgmlTypes)
    if (t.computable_quant()) computable.push_back(t.name);
  ASSERT_EQ(computable.size(), ops::kQuantTable.size());
  for (std::size_t i = 0; i < computable.size(); ++i) EXPECT_EQ(ops::kQuantTable[i].name, computable[i]);
}

// A row's flags are what its kernels do: every computable row runs weight_quant_linear (GEMV and
// GEMM), the q8 GEMV where the row says so, rows16 where it says so; the float rows run linear.
TEST(QuantRows, ComputableRowsHaveTheirKernels) {
  std::uint32_t seed = 900;
  for (const QuantTraits& t : ops::kGgmlTypes) {
    if (!t.linear) continue;
    const std::int64_t N = 20, K = 2 * std::max<std::int64_t>(t.block, 32);
    const std::vector<float> xv = random_values(static_cast<std::size_t>(17 * K), ++seed);
    if (!t.computable_quant()) {  // a float row: the dense linear op
      const ng::DType dt = t.type == GgmlType::F32 ? DType::f32 : t.type == GgmlType::F16 ? DType::f16 : DType::bf16;
      const Tensor w = random_tensor({N, K}, ++seed, dt);
      for (std::int64_t T : {1, 17}) {
        const Tensor y = ng::ops::linear(make_tensor({xv.begin(), xv.begin() + T * K}, {T, K}), w);
        ng::device_synchronize();
        EXPECT_TRUE(std::isfinite(at(y, 0))) << t.name;
      }
      continue;
    }
    const auto type = static_cast<ops::QuantType>(t.type);
    const ops::QuantWeight w = random_weight(type, N, K, ++seed);
    const std::vector<float> wv = [&] {
      std::vector<float> v(static_cast<std::size_t>(N * K));
      ops::dequantize_rows(w, 0, N, v.data());
      return v;
    }();
    for (std::int64_t T : {1, 17}) {
      const Tensor x = make_tensor({xv.begin(), xv.begin() + T * K}, {T, K});
      std::vector<ops::Activations> acts{ops::Activations::f32};
      if (t.q8_kernel) acts.push_back(ops::Activations::q8);
      for (ops::Activations a : acts) {
        const Tensor y = ng::ops::weight_quant_linear(x, w, Tensor(), DType::f32, {.activations = a});
        Tensor y16;
        if (t.rows16)
          y16 = ng::ops::weight_quant_linear(x, ops::pack_rows16(w), Tensor(), DType::f32, {.activations = a});
        ng::device_synchronize();
        // Within q8's error of the float reference (x quantised to 8 bits: 1/127 of each block's max).
        for (std::int64_t n = 0; n < N; ++n) {
          double s = 0, mag = 0;
          for (std::int64_t k = 0; k < K; ++k) {
            s += static_cast<double>(xv[k]) * wv[n * K + k];
            mag += std::fabs(static_cast<double>(xv[k]) * wv[n * K + k]);
          }
          EXPECT_NEAR(at(y, n), s, 0.02 * mag + 1e-5) << t.name << " T=" << T << " n=" << n;
          if (t.rows16) {
            EXPECT_NEAR(at(y16, n), s, 0.02 * mag + 1e-5) << t.name << " rows16 T=" << T << " n=" << n;
          }
        }
      }
    }
  }
}

// quantise -> dequantise stays within each quantised type's bound: a value moves at most
// `steps` of its block's amax / (levels - 1), levels = 2^bits (the K-quants' scales and minimums
// are quantised too, hence three steps rather than one).
TEST(QuantRows, QuantiseRoundTripsWithinTheTypesBound) {
  const std::map<std::string_view, int> levels{{"Q4_0", 16}, {"Q4_1", 16}, {"Q5_0", 32}, {"Q8_0", 256},
                                               {"Q4_K", 16}, {"Q5_K", 32}, {"Q6_K", 64}};
  for (const QuantTraits& t : ops::kGgmlTypes) {
    if (!t.quantize) continue;
    const auto it = levels.find(t.name);
    ASSERT_NE(it, levels.end()) << t.name << " has a quantiser: give it an error bound here";
    const std::int64_t blocks = 12;
    const auto v = random_values(static_cast<std::size_t>(blocks * t.block), 7, -2.0f, 1.5f);
    std::vector<std::byte> bytes(static_cast<std::size_t>(blocks) * t.block_bytes);
    t.quantize(v.data(), bytes.data(), blocks);
    std::vector<float> back(v.size());
    t.dequantize(bytes.data(), back.data(), blocks);
    for (std::int64_t b = 0; b < blocks; ++b) {
      float amax = 0;
      for (std::int64_t i = b * t.block; i < (b + 1) * t.block; ++i) amax = std::max(amax, std::fabs(v[i]));
      const float tol = 3.0f * amax / static_cast<float>(it->second - 1) + 1e-6f;
      for (std::int64_t i = b * t.block; i < (b + 1) * t.block; ++i)
        ASSERT_NEAR(back[i], v[i], tol) << t.name << " element " << i;
    }
  }
}

}  // namespace
}  // namespace llm_ops_test
