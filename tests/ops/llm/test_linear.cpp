// Block-quantised weights and the linear ops: dequantisation bitwise against the GGUF reader's
// independent implementation and hand-made blocks, ggml's reference quantisers, weight_quant_linear /
// linear against a double-precision reference (every format, odd shapes, T = 1..16 and prefill
// sizes), batch invariance (Note [Linear kernels]), capture -> replay bitwise, and each argument
// error with its message.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "npugraph/llm/gguf.hpp"
#include "npugraph/ops/linear.hpp"
#include "npugraph/ops/quant.hpp"
#include "ops/llm/llm_ops_util.hpp"
#include "ops/llm/quant_weights.hpp"

namespace llm_ops_test {
namespace {

using ng::ops::QuantType;
using ng::ops::QuantWeight;

std::uint16_t h(float f) { return half_bits(f); }

QuantWeight weight_from(QuantType type, const std::vector<std::byte>& bytes, std::int64_t rows,
                        std::int64_t cols) {
  return llm_ops_test::weight_from(type, bytes.data(), bytes.size(), rows, cols);
}

std::vector<float> dequantized(const QuantWeight& w) {
  std::vector<float> v(static_cast<std::size_t>(w.rows() * w.cols()));
  ng::ops::dequantize_rows(w, 0, w.rows(), v.data());
  return v;
}

std::string name_of(QuantType t) { return std::string(ng::ops::quant_type_name(t)); }

// ---- dequantisation ----------------------------------------------------------------------------

// Every type's values against its layout element by element: test_quant_table.cpp (the GGUF reader
// now dequantises through the same table, so comparing with it would compare a function with itself).

TEST(QuantDequant, HandMadeBlocks) {
  // Q4_1, d = 0.5, m = -1: element j < 16 is the low nibble of qs[j], j + 16 the high one.
  ng::ops::BlockQ4_1 b1{h(0.5f), h(-1.0f), {}};
  for (int j = 0; j < 16; ++j) b1.qs[j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  float y[32];
  ng::ops::dequantize_blocks(QuantType::q4_1, reinterpret_cast<const std::byte*>(&b1), y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.5f - 1.0f) << j;
    EXPECT_EQ(y[j + 16], (15 - j) * 0.5f - 1.0f) << j;
  }
  // Q4_0, d = 0.25: (nibble - 8) * d.
  ng::ops::BlockQ4_0 b0{h(0.25f), {}};
  for (int j = 0; j < 16; ++j) b0.qs[j] = static_cast<std::uint8_t>(j | (j << 4));
  ng::ops::dequantize_blocks(QuantType::q4_0, reinterpret_cast<const std::byte*>(&b0), y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.25f);
    EXPECT_EQ(y[j + 16], (j - 8) * 0.25f);
  }
  // Q8_0, d = 2: q * d.
  ng::ops::BlockQ8_0 b8{h(2.0f), {}};
  for (int j = 0; j < 32; ++j) b8.qs[j] = static_cast<std::int8_t>(j * 8 - 128);
  ng::ops::dequantize_blocks(QuantType::q8_0, reinterpret_cast<const std::byte*>(&b8), y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 128) * 2.0f);
}

TEST(QuantDequant, QuantizeIsGgmlsReference) {
  // Hand-checked: a ramp 0..31 quantised to Q4_1 has m = 0, d = 31 / 15 and nibbles round(x / d).
  std::vector<float> ramp(32);
  for (int j = 0; j < 32; ++j) ramp[j] = static_cast<float>(j);
  const QuantWeight w = ng::ops::quantize(QuantType::q4_1, ramp, 1, 32);
  ng::ops::BlockQ4_1 b;
  std::memcpy(&b, w.data(), sizeof b);
  EXPECT_EQ(b.d, h(31.0f / 15.0f));
  EXPECT_EQ(b.m, h(0.0f));
  const float id = 1.0f / (31.0f / 15.0f);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(b.qs[j] & 15, std::min(15, static_cast<int>(j * id + 0.5f))) << j;
    EXPECT_EQ(b.qs[j] >> 4, std::min(15, static_cast<int>((j + 16) * id + 0.5f))) << j;
  }
  // Round trips stay within half a step (Q4_0: a whole step, amax / 8, for values of the sign
  // opposite to the block's extreme, which the range [-8d, 7d] clamps).
  const auto v = random_values(64 * 8, 3);
  for (QuantType type : {QuantType::q4_0, QuantType::q4_1, QuantType::q8_0}) {
    const auto back = dequantized(ng::ops::quantize(type, v, 8, 64));
    const float tol = type == QuantType::q8_0 ? 0.51f / 127 : type == QuantType::q4_1 ? 0.51f * 2 / 15 : 1.01f / 8;
    for (std::size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(back[i], v[i], tol + 1e-3f) << name_of(type);
  }
}

TEST(QuantWeight, ChecksItsArguments) {
  const Tensor bytes = ng::empty({2, 20}, DType::u8);
  EXPECT_EQ(QuantWeight(bytes, QuantType::q4_1, 2, 32).str(), "Q4_1[2, 32]");
  EXPECT_EQ(QuantWeight(bytes, QuantType::q4_1, 2, 32).row_bytes(), 20);
  EXPECT_ARG_ERROR(QuantWeight(bytes, QuantType::q4_1, 2, 48), "QuantWeight: cols = 48",
                   "multiple of the block size 32");
  EXPECT_ARG_ERROR(QuantWeight(bytes, QuantType::q4_1, 0, 32), "QuantWeight: rows = 0", "positive");
  EXPECT_ARG_ERROR(QuantWeight(bytes, QuantType::q8_0, 2, 32), "bytes = uint8[2, 20] (40 bytes)",
                   "exactly 68 bytes for Q8_0[2, 32]");
  EXPECT_ARG_ERROR(QuantWeight(ng::empty({40}, DType::f32), QuantType::q4_1, 2, 32),
                   "bytes = float32[40]", "uint8 or int8");
  EXPECT_ARG_ERROR(QuantWeight(Tensor(), QuantType::q4_1, 2, 32), "bytes is undefined");
  EXPECT_ARG_ERROR(QuantWeight(bytes, static_cast<QuantType>(9), 2, 32), "type = 9",
                   "must be one of Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K");
  const Tensor strided = Tensor::from_blob(bytes.data(), {2, 10}, {20, 1}, DType::u8, bytes.storage());
  EXPECT_ARG_ERROR(QuantWeight(strided, QuantType::q4_1, 1, 32), "must be contiguous");
}

// ---- linear against the reference ----------------------------------------------------------------

// y[t, n] = sum_k x[t, k] w[n, k] (+ bias) in double, and the bound of a float32 sum of the same
// terms (|error| <= (K / 4 + 8) * eps * sum |x w|, for chains of K / lanes terms, lanes >= 4).
struct Reference {
  std::vector<double> y, bound;
};
Reference reference(const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& bias, std::int64_t T, std::int64_t N, std::int64_t K) {
  Reference r;
  r.y.resize(T * N);
  r.bound.resize(T * N);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t n = 0; n < N; ++n) {
      double s = 0, a = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(x[t * K + k]) * w[n * K + k];
        s += p;
        a += std::fabs(p);
      }
      if (!bias.empty()) s += bias[n];
      r.y[t * N + n] = s;
      r.bound[t * N + n] = (static_cast<double>(K) / 4 + 8) * 1.2e-7 * a + 1e-30;
    }
  return r;
}

void expect_close(const Tensor& out, const Reference& ref, const std::string& what) {
  const double rel = out.dtype() == DType::f32 ? 0 : out.dtype() == DType::f16 ? 1.0 / 1024 : 1.0 / 128;
  int bad = 0;
  for (std::int64_t i = 0; i < out.numel() && bad < 5; ++i) {
    const double got = at(out, i), want = ref.y[i];
    const double tol = ref.bound[i] + rel * std::fabs(want) + (rel > 0 ? 1e-6 : 0);
    if (!(std::fabs(got - want) <= tol)) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " = " << got << ", reference " << want
                    << " (tolerance " << tol << ")";
    }
  }
}

struct Shape3 {
  std::int64_t T, N, K;
};

const std::vector<Shape3>& quant_shapes() {
  static const std::vector<Shape3> s = {
      {1, 1, 32},   {1, 7, 64},    {2, 5, 96},    {3, 13, 160},  {4, 8, 32},    {5, 9, 64},
      {7, 33, 96},  {8, 16, 128},  {11, 3, 32},   {16, 37, 224}, {1, 576, 576}, {8, 64, 1536},
      {17, 21, 64}, {33, 40, 160}, {128, 19, 96}, {20, 70, 576}};
  return s;
}

TEST(LinearQuant, MatchesTheReferenceForEveryFormat) {
  std::uint32_t seed = 100;
  for (QuantType type : {QuantType::q4_0, QuantType::q4_1, QuantType::q8_0}) {
    for (const auto& [T, N, K] : quant_shapes()) {
      const QuantWeight w = random_weight(type, N, K, ++seed);
      const Tensor x = random_tensor({T, K}, ++seed);
      const Tensor y = ng::ops::weight_quant_linear(x, w);
      ng::device_synchronize();
      expect_close(y, reference(floats(x), dequantized(w), {}, T, N, K),
                   name_of(type) + " T=" + std::to_string(T) + " N=" + std::to_string(N) +
                       " K=" + std::to_string(K));
    }
  }
}

TEST(LinearQuant, HandComputedOneBlock) {
  // W = one Q4_1 row: d = 0.5, m = -2, nibble j = j % 16  ->  w[j] = (j % 16) * 0.5 - 2.
  // x[j] = 1 for j < 16, 2 for j >= 16:  y = sum (j * 0.5 - 2) + 2 * sum (j * 0.5 - 2)
  //                                        = 3 * (0.5 * 120 - 32) = 84.
  ng::ops::BlockQ4_1 b{h(0.5f), h(-2.0f), {}};
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>(j | (j << 4));
  std::vector<std::byte> bytes(sizeof b);
  std::memcpy(bytes.data(), &b, sizeof b);
  const QuantWeight w = weight_from(QuantType::q4_1, bytes, 1, 32);
  std::vector<float> xv(32);
  for (int j = 0; j < 32; ++j) xv[j] = j < 16 ? 1.0f : 2.0f;
  const Tensor x = make_tensor(xv, {1, 32});
  const Tensor bias = make_tensor({0.25f}, {1});
  const Tensor y = ng::ops::weight_quant_linear(x, w);
  const Tensor yb = ng::ops::weight_quant_linear(x, w, bias);
  ng::device_synchronize();
  EXPECT_EQ(at(y, 0), 84.0f);
  EXPECT_EQ(at(yb, 0), 84.25f);
  // Q8_0: q = 1..32, d = 0.125, x = 1  ->  0.125 * 528 = 66.
  ng::ops::BlockQ8_0 b8{h(0.125f), {}};
  for (int j = 0; j < 32; ++j) b8.qs[j] = static_cast<std::int8_t>(j + 1);
  std::vector<std::byte> bytes8(sizeof b8);
  std::memcpy(bytes8.data(), &b8, sizeof b8);
  const Tensor y8 = ng::ops::weight_quant_linear(make_tensor(std::vector<float>(32, 1.0f), {32}),
                                                 weight_from(QuantType::q8_0, bytes8, 1, 32));
  ng::device_synchronize();
  EXPECT_EQ(y8.shape(), ng::Shape({1}));
  EXPECT_EQ(at(y8, 0), 66.0f);
}

TEST(LinearQuant, BiasLeadingDimsAndHalfOutputs) {
  const QuantWeight w = random_weight(QuantType::q4_1, 24, 64, 5);
  const Tensor x = random_tensor({2, 3, 64}, 6);
  const Tensor bias = random_tensor({24}, 7);
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    const Tensor y = ng::ops::weight_quant_linear(x, w, bias, dt);
    ng::device_synchronize();
    EXPECT_EQ(y.shape(), ng::Shape({2, 3, 24}));
    expect_close(y, reference(floats(x), dequantized(w), floats(bias), 6, 24, 64),
                 std::string("out ") + std::string(ng::dtype_name(dt)));
  }
}

TEST(LinearFloat, MatchesTheReferenceWithAnyK) {
  std::uint32_t seed = 500;
  const std::vector<Shape3> shapes = {{1, 1, 1},   {1, 3, 5},    {2, 7, 17},  {3, 16, 31},
                                      {4, 5, 100}, {9, 33, 64},  {16, 9, 47}, {1, 64, 576},
                                      {17, 5, 13}, {40, 18, 99}, {128, 7, 64}};
  for (DType wt : {DType::f32, DType::f16, DType::bf16})
    for (const auto& [T, N, K] : shapes) {
      const Tensor w = random_tensor({N, K}, ++seed, wt);
      const Tensor x = random_tensor({T, K}, ++seed);
      const Tensor bias = random_tensor({N}, ++seed);
      const Tensor y = ng::ops::linear(x, w, bias);
      ng::device_synchronize();
      expect_close(y, reference(floats(x), floats(w), floats(bias), T, N, K),
                   std::string(ng::dtype_name(wt)) + " T=" + std::to_string(T) +
                       " N=" + std::to_string(N) + " K=" + std::to_string(K));
    }
}

// Float16 weights enter the FMA chain as their exact float32 values (Note [Exact float rows]) on
// every SIMD target (simd_target_* runs this suite on each): infinities, NaN, the largest half and
// subnormals included, so the same weights stored as float32 give the same bits. (Highway's own
// float16 conversion on SSE4 and SCALAR turned infinities and NaN into finite numbers.)
TEST(LinearFloat, HalfWeightsGiveTheBitsOfTheSameWeightsInFloat32) {
  const std::int64_t N = 6, K = 64;
  Tensor w16 = random_tensor({N, K}, 31, DType::f16);
  auto* hb = static_cast<std::uint16_t*>(w16.data());
  const std::uint16_t specials[] = {0x7c00, 0xfc00, 0x7e00, 0x7bff, 0x0001, 0x83ff, 0x7d01};
  for (std::int64_t n = 0; n < N; ++n)  // row 5 keeps finite weights only
    if (n < 5) hb[n * K + 7 * n + 3] = specials[n], hb[n * K + 40] = specials[n + 2];
  Tensor w32 = ng::empty({N, K}, DType::f32);
  for (std::int64_t i = 0; i < N * K; ++i) w32.data_ptr<float>()[i] = ng::f16_bits_to_f32(hb[i]);
  for (std::int64_t T : {1, 20}) {  // GEMV and GEMM
    const Tensor x = random_tensor({T, K}, 32);
    const Tensor y16 = ng::ops::linear(x, w16), y32 = ng::ops::linear(x, w32);
    ng::device_synchronize();
    EXPECT_EQ(0, std::memcmp(y16.data(), y32.data(), static_cast<std::size_t>(T * N) * sizeof(float)))
        << "T=" << T;
    EXPECT_TRUE(std::isinf(y16.data_ptr<float>()[0]) || std::isnan(y16.data_ptr<float>()[0]));
    EXPECT_TRUE(std::isfinite(y16.data_ptr<float>()[5]));
  }
}

// Note [Linear kernels]: each output row depends on its own row of x only, so the rows of one
// call equal single-row calls bitwise, GEMV (T <= 16) and GEMM (T > 16) alike.
TEST(LinearQuant, RowsAreBatchInvariant) {
  const std::int64_t N = 45, K = 192;
  for (QuantType type : {QuantType::q4_1, QuantType::q8_0}) {
    const QuantWeight w = random_weight(type, N, K, 11);
    for (std::int64_t T : {3, 16, 17, 50}) {
      const Tensor x = random_tensor({T, K}, 12);
      const Tensor y = ng::ops::weight_quant_linear(x, w);
      ng::device_synchronize();
      for (std::int64_t t = 0; t < T; ++t) {
        const Tensor xt = Tensor::from_blob(x.data_ptr<float>() + t * K, {1, K}, DType::f32, x.storage());
        const Tensor yt = ng::ops::weight_quant_linear(xt, w);
        ng::device_synchronize();
        ASSERT_EQ(0, std::memcmp(yt.data(), y.data_ptr<float>() + t * N, N * sizeof(float)))
            << name_of(type) << " T=" << T << " row " << t;
      }
    }
  }
  const Tensor wf = random_tensor({N, 37}, 13, DType::bf16);
  const Tensor x = random_tensor({30, 37}, 14);
  const Tensor y = ng::ops::linear(x, wf);
  const Tensor y0 = ng::ops::linear(Tensor::from_blob(x.data(), {2, 37}, DType::f32, x.storage()), wf);
  ng::device_synchronize();
  EXPECT_EQ(0, std::memcmp(y0.data(), y.data(), 2 * N * sizeof(float)));
}

TEST(LinearQuant, ReplayEqualsEagerBitwise) {
  for (std::int64_t T : {1, 8, 40}) {
    const QuantWeight w = random_weight(QuantType::q4_1, 100, 256, 21);
    const Tensor x = random_tensor({T, 256}, 22);
    const Tensor y = ng::empty({T, 100}, DType::f32);
    expect_replay_matches_eager({y}, [&] { ng::ops::weight_quant_linear_out(x, w, {}, y); });
    const Tensor wf = random_tensor({30, 70}, 23, DType::f16);
    const Tensor xf = random_tensor({T, 70}, 24);
    const Tensor yf = ng::empty({T, 30}, DType::bf16);
    expect_replay_matches_eager({yf}, [&] { ng::ops::linear_out(xf, wf, {}, yf); });
  }
}

TEST(LinearQuant, ZeroRowsLaunchesNothingHarmful) {
  const QuantWeight w = random_weight(QuantType::q8_0, 4, 32, 1);
  const Tensor y = ng::ops::weight_quant_linear(ng::empty({0, 32}, DType::f32), w);
  ng::device_synchronize();
  EXPECT_EQ(y.shape(), ng::Shape({0, 4}));
}

TEST(LinearErrors, NameArgumentValueAndRule) {
  const QuantWeight w = random_weight(QuantType::q4_1, 1536, 576, 1);
  const Tensor x = ng::empty({4, 576}, DType::f32);
  const Tensor y = ng::empty({4, 1536}, DType::f32);
  using ng::ops::weight_quant_linear_out;
  EXPECT_ARG_ERROR(weight_quant_linear_out(ng::empty({4, 512}, DType::f32), w, {}, y),
                   "weight_quant_linear: x = float32[4, 512]",
                   "last dim must be the in_features 576 of weight = Q4_1[1536, 576]");
  EXPECT_ARG_ERROR(weight_quant_linear_out(ng::empty({4, 576}, DType::f16), w, {}, y),
                   "weight_quant_linear: x = float16[4, 576]", "must be float32");
  EXPECT_ARG_ERROR(weight_quant_linear_out(x, w, {}, ng::empty({4, 1535}, DType::f32)),
                   "weight_quant_linear: out = float32[4, 1535]", "must have the shape [4, 1536]");
  EXPECT_ARG_ERROR(weight_quant_linear_out(x, w, {}, ng::empty({4, 1536}, DType::i32)),
                   "out = int32[4, 1536]", "float32, float16 or bfloat16");
  EXPECT_ARG_ERROR(weight_quant_linear_out(x, w, ng::empty({576}, DType::f32), y),
                   "bias = float32[576]", "must be float32[1536]");
  EXPECT_ARG_ERROR(weight_quant_linear_out(x, QuantWeight(), {}, y), "weight is undefined");
  EXPECT_ARG_ERROR(weight_quant_linear_out(Tensor(), w, {}, y), "x is undefined");
  const Tensor big = ng::empty({4, 1152}, DType::f32);
  const Tensor strided = Tensor::from_blob(big.data(), {4, 576}, {1152, 1}, DType::f32, big.storage());
  EXPECT_ARG_ERROR(weight_quant_linear_out(strided, w, {}, y), "x = float32[4, 576]", "contiguous");
  using ng::ops::linear_out;
  EXPECT_ARG_ERROR(linear_out(x, ng::empty({8, 576}, DType::i8), {}, ng::empty({4, 8}, DType::f32)),
                   "linear: weight = int8[8, 576]", "float32, float16 or bfloat16 matrix");
  EXPECT_ARG_ERROR(linear_out(x, ng::empty({8, 570}, DType::f16), {}, ng::empty({4, 8}, DType::f32)),
                   "linear: x = float32[4, 576]", "in_features 570 of weight = float16[8, 570]");
}

// Captured in a task group, the op is updated to other tensors (the same shapes): the replay then
// equals the eager call on them; an update call with a bad argument abandons the update.
TEST(LinearQuant, TaskUpdateRebindsTensors) {
  const QuantWeight w = random_weight(QuantType::q4_1, 64, 128, 31);
  const Tensor x1 = random_tensor({2, 128}, 32), x2 = random_tensor({2, 128}, 33);
  const Tensor y = ng::empty({2, 64}, DType::f32);
  ng::Graph g;
  ng::TaskGroupHandle handle;
  {
    ng::CaptureScope c(g);
    ng::task_group_begin(c.stream());
    ng::ops::weight_quant_linear_out(x1, w, {}, y);
    handle = ng::task_group_end(c.stream());
  }
  const ng::Stream s = ng::Stream::create();
  {
    ng::StreamGuard on(s);
    ng::task_update_begin(s, handle);
    EXPECT_ARG_ERROR(ng::ops::weight_quant_linear_out(ng::empty({2, 64}, DType::f32), w, {}, y),
                     "weight_quant_linear: x = float32[2, 64]");
    EXPECT_FALSE(s.is_updating());
    ng::task_update_begin(s, handle);
    ng::ops::weight_quant_linear_out(x2, w, {}, y);
    ng::task_update_end(s);
  }
  s.synchronize();
  g.replay();
  ng::device_synchronize();
  const Tensor eager = ng::ops::weight_quant_linear(x2, w);
  ng::device_synchronize();
  EXPECT_TRUE(ngtest::bitwise_equal(y, eager));
}

}  // namespace
}  // namespace llm_ops_test
