// weight_quant_linear with q8 activations (Note [Q8 activations] in linear_q8_simd.cpp): x's
// quantisation against the definition written out here (amax / 127, ties to even, the sums), the
// outputs against a double-precision sum over the dequantised weights and the dequantised quants,
// hand-computed blocks, batch invariance, the float32 GEMM above 16 rows, NaN propagation, capture
// -> replay and task update bitwise, and the option's argument errors. The simd_target_* ctests run
// these on AVX2, SSE4 and SCALAR as well (the suite name starts with LinearQuant).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "npugraph/ops/linear.hpp"
#include "npugraph/ops/quant.hpp"
#include "ops/linear/linear_params.hpp"
#include "ops/llm/llm_ops_util.hpp"
#include "ops/llm/quant_weights.hpp"

namespace llm_ops_test {
namespace {

using ng::ops::Activations;
using ng::ops::QuantType;
using ng::ops::QuantWeight;
const ng::ops::QuantLinearOptions kQ8{.activations = Activations::q8};

std::uint16_t h(float f) { return half_bits(f); }

// The definition of Note [Q8 activations], one block at a time, in plain float32 arithmetic.
struct Quantised {
  std::vector<std::int8_t> q;
  std::vector<float> d;
};
Quantised quantise(const std::vector<float>& x, std::int64_t T, std::int64_t K) {
  Quantised r;
  r.q.resize(x.size());
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t b = 0; b < K / 32; ++b) {
      const float* xb = x.data() + t * K + b * 32;
      float amax = 0;
      bool finite = true;
      for (int j = 0; j < 32; ++j) {
        finite = finite && std::isfinite(xb[j]);
        amax = std::max(amax, std::fabs(xb[j]));
      }
      std::int8_t* q = r.q.data() + t * K + b * 32;
      const float d = amax / 127.0f;
      if (!finite || d < std::numeric_limits<float>::min()) {  // NaN, or all zero
        r.d.push_back(finite ? 0.0f : std::numeric_limits<float>::quiet_NaN());
        continue;
      }
      const float id = 1.0f / d;
      for (int j = 0; j < 32; ++j) q[j] = static_cast<std::int8_t>(std::nearbyint(xb[j] * id));
      r.d.push_back(d);
    }
  return r;
}

Quantised kernel_quantise(const std::vector<float>& x, std::int64_t T, std::int64_t K) {
  Quantised r;
  r.q.resize(x.size());
  r.d.resize(static_cast<std::size_t>(T * K / 32));
  ng::ops::linear_impl::quantize_rows_q8(x.data(), T, K, K, {r.q.data(), r.d.data()});
  return r;
}

bool same_float(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b)); }

TEST(LinearQuantQ8, QuantisationIsTheDefinition) {
  const std::int64_t T = 3, K = 32 * 7;
  std::vector<float> x = random_values(static_cast<std::size_t>(T * K), 41, -3.0f, 3.0f);
  // Block 1 of row 0: all zero (d = 0, every quant 0). Block 2: amax 127, so id = 1 and the
  // quants are x rounded to nearest even: 2.5 -> 2, 3.5 -> 4, -2.5 -> -2, 0.49999997 -> 0.
  for (int j = 0; j < 32; ++j) x[32 + j] = 0.0f;
  const float ties[] = {127.0f, 2.5f, 3.5f, -2.5f, -0.5f, 0.49999997f, 1.5f, -126.5f};
  for (int j = 0; j < 32; ++j) x[64 + j] = j < 8 ? ties[j] : static_cast<float>(j % 7) - 3.0f;
  // Block 3: an infinity; block 4: a NaN (their d and s are NaN, their quants 0).
  x[96 + 5] = std::numeric_limits<float>::infinity();
  x[128 + 31] = std::numeric_limits<float>::quiet_NaN();
  // Block 5: tiny values (amax < 127 * 2^-126: zero quants, d = 0).
  for (int j = 0; j < 32; ++j) x[160 + j] = static_cast<float>(j - 16) * 1e-40f;
  const Quantised want = quantise(x, T, K), got = kernel_quantise(x, T, K);
  for (std::size_t i = 0, bad = 0; i < want.q.size() && bad < 5; ++i)
    if (want.q[i] != got.q[i]) {
      ++bad;
      ADD_FAILURE() << "x[" << i << "] = " << x[i] << ": quant " << int{got.q[i]} << ", want " << int{want.q[i]};
    }
  for (std::size_t i = 0; i < want.d.size(); ++i) {
    EXPECT_TRUE(same_float(want.d[i], got.d[i])) << "block " << i << ": d " << got.d[i] << " want " << want.d[i];
  }
  const std::int8_t tie_q[] = {127, 2, 4, -2, 0, 0, 2, -126};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(got.q[64 + j], tie_q[j]) << "x = " << ties[j];
  EXPECT_EQ(got.d[1], 0.0f);
  EXPECT_EQ(got.d[5], 0.0f);
  EXPECT_TRUE(std::isnan(got.d[3]) && std::isnan(got.d[4]));
}

// y[t, n] = sum over blocks and j of w[n, k] * q[t, k] * d[t, block] in double, w dequantised.
struct Reference {
  std::vector<double> y, bound;
};
Reference reference(const Quantised& xq, const QuantWeight& w, std::int64_t T) {
  const std::int64_t N = w.rows(), K = w.cols();
  std::vector<float> wf(static_cast<std::size_t>(N * K));
  ng::ops::dequantize_rows(w, 0, N, wf.data());
  Reference r;
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t n = 0; n < N; ++n) {
      double s = 0, a = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(wf[n * K + k]) * xq.q[t * K + k] * xq.d[t * K / 32 + k / 32];
        s += p;
        a += std::fabs(p);
      }
      r.y.push_back(s);
      // float32 rounding only: the block scale product, the lane chains and the final sums.
      r.bound.push_back((static_cast<double>(K) / 32 + 12) * 1.2e-7 * a + 1e-30);
    }
  return r;
}

TEST(LinearQuantQ8, MatchesTheReferenceForEveryFormat) {
  std::uint32_t seed = 300;
  const std::int64_t shapes[][3] = {{1, 1, 32}, {1, 7, 64},   {2, 5, 96},   {3, 13, 160},
                                    {5, 9, 64}, {8, 16, 128}, {16, 37, 224}, {1, 576, 576}};
  for (QuantType type : {QuantType::q4_0, QuantType::q4_1, QuantType::q8_0, QuantType::q5_0})
    for (const auto& [T, N, K] : shapes) {
      const QuantWeight w = random_weight(type, N, K, ++seed);
      const Tensor x = random_tensor({T, K}, ++seed);
      const Tensor y = ng::ops::weight_quant_linear(x, w, {}, DType::f32, kQ8);
      const Tensor y32 = ng::ops::weight_quant_linear(x, w);
      ng::device_synchronize();
      const Reference ref = reference(quantise(floats(x), T, K), w, T);
      const std::string what = std::string(ng::ops::quant_type_name(type)) + " T=" + std::to_string(T) +
                               " N=" + std::to_string(N) + " K=" + std::to_string(K);
      int bad = 0;
      for (std::int64_t i = 0; i < T * N && bad < 5; ++i)
        if (!(std::fabs(at(y, i) - ref.y[i]) <= ref.bound[i])) {
          ++bad;
          ADD_FAILURE() << what << ": element " << i << " = " << at(y, i) << ", reference " << ref.y[i];
        }
      // The option is in effect: x's quantisation moves the outputs off the float32 ones.
      EXPECT_NE(0, std::memcmp(y.data(), y32.data(), static_cast<std::size_t>(T * N) * sizeof(float))) << what;
    }
}

// The K-quants' q8 GEMV (Q4_K, Q5_K, Q6_K): each 32-element sub-block against one block of x, its
// scales (and minimum) from the super-block's (Note [Q8 activations]).
TEST(LinearQuantQ8, KQuantsMatchTheReference) {
  std::uint32_t seed = 700;
  const std::int64_t shapes[][3] = {{1, 1, 256}, {1, 37, 512}, {3, 13, 768}, {8, 16, 256}, {16, 9, 512}};
  for (QuantType type : {QuantType::q4_k, QuantType::q5_k, QuantType::q6_k})
    for (const auto& [T, N, K] : shapes) {
      const QuantWeight w = random_weight(type, N, K, ++seed);
      const Tensor x = random_tensor({T, K}, ++seed);
      const Tensor y = ng::ops::weight_quant_linear(x, w, {}, DType::f32, kQ8);
      ng::device_synchronize();
      const Reference ref = reference(quantise(floats(x), T, K), w, T);
      for (std::int64_t i = 0; i < T * N; ++i)
        ASSERT_LE(std::fabs(at(y, i) - ref.y[i]), ref.bound[i] + 1e-30)
            << ng::ops::quant_type_name(type) << " T=" << T << " N=" << N << " K=" << K << " element " << i;
      for (std::int64_t t = 0; t < T; ++t) {  // rows are single-row calls, bitwise
        const Tensor xt = Tensor::from_blob(x.data_ptr<float>() + t * K, {1, K}, DType::f32, x.storage());
        const Tensor yt = ng::ops::weight_quant_linear(xt, w, {}, DType::f32, kQ8);
        ng::device_synchronize();
        ASSERT_EQ(0, std::memcmp(yt.data(), y.data_ptr<float>() + t * N, N * sizeof(float)));
      }
    }
}

// Hand-computed blocks whose x is exactly its quantisation (so q8 and float32 agree exactly).
TEST(LinearQuantQ8, HandComputedBlocks) {
  // x[j] = (j - 15) * 0.25 for j < 31 and x[31] = 127 * 0.25 (amax), so d = 0.25 and q = j - 15, 127.
  std::vector<float> xv(32);
  for (int j = 0; j < 32; ++j) xv[j] = j < 31 ? static_cast<float>(j - 15) * 0.25f : 31.75f;
  const Tensor x = make_tensor(xv, {1, 32});
  double dot_j = 0, sum_x = 0;  // sum_j nibble_j x_j with nibble_j = j % 16, and sum_j x_j
  for (int j = 0; j < 32; ++j) dot_j += (j % 16) * static_cast<double>(xv[j]), sum_x += xv[j];
  // Q4_1: d = 0.5, m = -2: y = 0.5 * dot_j - 2 * sum_x.
  ng::ops::BlockQ4_1 b1{h(0.5f), h(-2.0f), {}};
  for (int j = 0; j < 16; ++j) b1.qs[j] = static_cast<std::uint8_t>(j | (j << 4));
  // Q4_0: d = 0.5: y = 0.5 * (dot_j - 8 * sum_x).
  ng::ops::BlockQ4_0 b0{h(0.5f), {}};
  std::memcpy(b0.qs, b1.qs, 16);
  // Q8_0: q_j = j - 16 (negative quants too), d = 0.125.
  ng::ops::BlockQ8_0 b8{h(0.125f), {}};
  double dot8 = 0;
  for (int j = 0; j < 32; ++j) b8.qs[j] = static_cast<std::int8_t>(j - 16), dot8 += (j - 16) * 0.125 * xv[j];
  // Q5_0: d = 0.5, nibble_j = j % 16, fifth bit set for j >= 16: w_j = (j - 16) * 0.5.
  ng::ops::BlockQ5_0 b5{h(0.5f), {0, 0, 0xff, 0xff}, {}};
  std::memcpy(b5.qs, b1.qs, 16);
  double dot5 = 0;
  for (int j = 0; j < 32; ++j) dot5 += (j - 16) * 0.5 * xv[j];
  const double want[] = {0.5 * dot_j - 2 * sum_x, 0.5 * (dot_j - 8 * sum_x), dot8, dot5};
  const QuantWeight ws[] = {weight_from(QuantType::q4_1, &b1, sizeof b1, 1, 32),
                            weight_from(QuantType::q4_0, &b0, sizeof b0, 1, 32),
                            weight_from(QuantType::q8_0, &b8, sizeof b8, 1, 32),
                            weight_from(QuantType::q5_0, &b5, sizeof b5, 1, 32)};
  for (int i = 0; i < 4; ++i) {
    const Tensor y = ng::ops::weight_quant_linear(x, ws[i], {}, DType::f32, kQ8);
    const Tensor yb = ng::ops::weight_quant_linear(x, ws[i], make_tensor({0.5f}, {1}), DType::f32, kQ8);
    ng::device_synchronize();
    EXPECT_EQ(at(y, 0), static_cast<float>(want[i])) << ng::ops::quant_type_name(ws[i].type());
    EXPECT_EQ(at(yb, 0), static_cast<float>(want[i] + 0.5)) << ng::ops::quant_type_name(ws[i].type());
  }
}

// Each output row depends on its row of x only: rows of one call equal single-row calls bitwise.
// Above 16 rows the call is the float32 GEMM, bit for bit the default option's.
// Every T of the GEMV (1-16), the K-quants (super-block tiles, Note [Q8 super-blocks]) included.
TEST(LinearQuantQ8, RowsAreBatchInvariantAndLargeCallsStayFloat32) {
  for (QuantType type : {QuantType::q4_0, QuantType::q4_1, QuantType::q8_0, QuantType::q5_0,
                         QuantType::q4_k, QuantType::q5_k, QuantType::q6_k}) {
    // Q4_K at K = 4096: the super-block tiles take 4 rows of x there (as many as fit L1), 8 at 512.
    const bool super = ng::ops::quant_block_size(type) == 256;
    const std::int64_t N = 45, K = type == QuantType::q4_k ? 4096 : super ? 512 : 192;
    const QuantWeight w = random_weight(type, N, K, 51);
    for (std::int64_t T = 2; T <= 16; ++T) {
      const Tensor x = random_tensor({T, K}, 52);
      const Tensor y = ng::ops::weight_quant_linear(x, w, {}, DType::f32, kQ8);
      ng::device_synchronize();
      for (std::int64_t t = 0; t < T; ++t) {
        const Tensor xt = Tensor::from_blob(x.data_ptr<float>() + t * K, {1, K}, DType::f32, x.storage());
        const Tensor yt = ng::ops::weight_quant_linear(xt, w, {}, DType::f32, kQ8);
        ng::device_synchronize();
        ASSERT_EQ(0, std::memcmp(yt.data(), y.data_ptr<float>() + t * N, N * sizeof(float)))
            << ng::ops::quant_type_name(type) << " T=" << T << " row " << t;
      }
    }
    const Tensor x = random_tensor({17, K}, 53);
    const Tensor yq = ng::ops::weight_quant_linear(x, w, {}, DType::f32, kQ8);
    const Tensor yf = ng::ops::weight_quant_linear(x, w);
    ng::device_synchronize();
    EXPECT_TRUE(ngtest::bitwise_equal(yq, yf)) << ng::ops::quant_type_name(type);
  }
}

TEST(LinearQuantQ8, NonFiniteBlocksOfXMakeTheirRowsNaN) {
  const QuantWeight w = random_weight(QuantType::q4_1, 10, 96, 61);
  std::vector<float> xv = random_values(3 * 96, 62);
  xv[96 + 40] = std::numeric_limits<float>::infinity();  // row 1
  xv[2 * 96 + 95] = std::numeric_limits<float>::quiet_NaN();  // row 2
  const Tensor y = ng::ops::weight_quant_linear(make_tensor(xv, {3, 96}), w, {}, DType::f32, kQ8);
  ng::device_synchronize();
  for (std::int64_t n = 0; n < 10; ++n) {
    EXPECT_TRUE(std::isfinite(at(y, n))) << n;
    EXPECT_TRUE(std::isnan(at(y, 10 + n))) << n;
    EXPECT_TRUE(std::isnan(at(y, 20 + n))) << n;
  }
}

TEST(LinearQuantQ8, ReplayAndUpdateEqualEagerBitwise) {
  for (std::int64_t T : {1, 8}) {
    const QuantWeight w = random_weight(QuantType::q4_1, 100, 256, 71);
    const Tensor x = random_tensor({T, 256}, 72);
    const Tensor y = ng::empty({T, 100}, DType::f32);
    expect_replay_matches_eager({y}, [&] { ng::ops::weight_quant_linear_out(x, w, {}, y, kQ8); });
  }
  expect_updated_replay_matches_eager(random_weight(QuantType::q8_0, 64, 128, 73), random_tensor({2, 128}, 74),
                                      random_tensor({2, 128}, 75), ng::empty({2, 64}, DType::bf16), kQ8);
}

// Each launching thread keeps its own buffer of x's quants (RunLinearQ8): two threads issuing q8
// GEMVs on their own streams at once, over the same weight, get exactly the results of one thread
// issuing them alone (the Release and ASan builds run it; the TSan build leaves out tests/ops/llm).
TEST(LinearQuantQ8, ThreadsOnTheirOwnStreamsGetTheSingleThreadedBits) {
  expect_threads_get_single_threaded_bits(random_weight(QuantType::q4_1, 1024, 256, 91), 92, kQ8);
}

TEST(LinearQuantQ8, OptionErrors) {
  const QuantWeight w = random_weight(QuantType::q4_1, 8, 64, 81);
  const Tensor x = ng::empty({2, 64}, DType::f32);
  const Tensor y = ng::empty({2, 8}, DType::f32);
  const ng::ops::QuantLinearOptions bad{.activations = static_cast<Activations>(7)};
  EXPECT_ARG_ERROR(ng::ops::weight_quant_linear_out(x, w, {}, y, bad),
                   "weight_quant_linear: options.activations = 7",
                   "must be Activations::f32 or Activations::q8");
  // The runtime stays usable: the same call with a good option runs.
  ng::ops::weight_quant_linear_out(random_tensor({2, 64}, 82), w, {}, y, kQ8);
  ng::device_synchronize();
  EXPECT_TRUE(std::isfinite(at(y, 0)));
}

}  // namespace
}  // namespace llm_ops_test
