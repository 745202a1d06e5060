// swiglu (both forms) against a double-precision reference: dtypes, sizes not a multiple of any
// vector, extreme inputs; capture -> replay bitwise; argument errors.
#include <gtest/gtest.h>

#include <cmath>

#include "npugraph/ops/swiglu.hpp"
#include "ops/llm/llm_ops_util.hpp"

namespace llm_ops_test {
namespace {

double silu_mul(double a, double b) { return a / (1 + std::exp(-a)) * b; }

double tolerance(DType t) { return t == DType::f32 ? 3e-6 : t == DType::f16 ? 1e-3 : 8e-3; }

TEST(Swiglu, MatchesTheReference) {
  std::uint32_t seed = 1;
  for (DType in : {DType::f32, DType::f16, DType::bf16})
    for (DType out : {DType::f32, DType::bf16})
      for (const auto& [rows, H] : std::vector<std::pair<std::int64_t, std::int64_t>>{
               {1, 1}, {1, 1536}, {3, 17}, {16, 1536}, {9, 100}, {130, 33}}) {
        const Tensor x = random_tensor({rows, 2 * H}, ++seed, in, -8, 8);
        Tensor y = ng::empty({rows, H}, out);
        ng::ops::swiglu_out(x, y);
        const Tensor gate = random_tensor({rows, H}, ++seed, in, -8, 8);
        const Tensor up = random_tensor({rows, H}, ++seed, in, -8, 8);
        Tensor y2 = ng::empty({rows, H}, out);
        ng::ops::swiglu_out(gate, up, y2);
        ng::device_synchronize();
        const auto xv = floats(x), gv = floats(gate), uv = floats(up);
        const double tol = std::max(tolerance(in), tolerance(out));
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t i = 0; i < H; ++i) {
            const double want = silu_mul(xv[r * 2 * H + i], xv[r * 2 * H + H + i]);
            ASSERT_NEAR(at(y, r * H + i), want, tol * (1 + std::fabs(want))) << "x form H=" << H;
            const double want2 = silu_mul(gv[r * H + i], uv[r * H + i]);
            ASSERT_NEAR(at(y2, r * H + i), want2, tol * (1 + std::fabs(want2))) << "gate/up form H=" << H;
          }
      }
}

// A float16 / bfloat16 output is the float32 output rounded as half(x) / bfloat16(x) round it, bit
// for bit, on every SIMD target (Note [Exact float rows]): values that overflow float16, land in
// its subnormals, or sit on rounding ties included.
TEST(Swiglu, HalfOutputsAreTheFloat32OutputRoundedExactly) {
  const std::int64_t rows = 3, H = 75;  // a vector tail on every target
  Tensor gate = random_tensor({rows, H}, 91, DType::f32, -8, 8);
  const Tensor up = random_tensor({rows, H}, 92, DType::f32, -8, 8);
  float* g = gate.data_ptr<float>();
  const float extremes[] = {9e4f, -7e4f, 1e-6f, -3e-7f, 65520.0f, 1.0f + 1.0f / 2048, 0.0f};
  for (int i = 0; i < 7; ++i) g[i * 5] = extremes[i], g[H + i * 7] = extremes[i];
  Tensor y32 = ng::empty({rows, H}, DType::f32);
  ng::ops::swiglu_out(gate, up, y32);
  for (DType out : {DType::f16, DType::bf16}) {
    Tensor y = ng::empty({rows, H}, out);
    ng::ops::swiglu_out(gate, up, y);
    ng::device_synchronize();
    const auto* bits = static_cast<const std::uint16_t*>(y.data());
    for (std::int64_t i = 0; i < rows * H; ++i) {
      const float x = y32.data_ptr<float>()[i];
      const std::uint16_t want = out == DType::f16 ? ng::f32_to_f16_bits(x) : ng::f32_to_bf16_bits(x);
      ASSERT_EQ(bits[i], want) << ng::dtype_name(out) << " element " << i << " of float " << x;
    }
  }
}

TEST(Swiglu, ExtremeInputsStayFinite) {
  const std::vector<float> g = {-1000, -100, -88, -20, 0, 20, 88, 100, 1000, -0.0f};
  const std::vector<float> u(g.size(), 2.0f);
  const Tensor y = ng::ops::swiglu(make_tensor(g, {10}), make_tensor(u, {10}));
  ng::device_synchronize();
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double want = silu_mul(g[i], 2.0);
    EXPECT_TRUE(std::isfinite(at(y, static_cast<std::int64_t>(i)))) << g[i];
    EXPECT_NEAR(at(y, static_cast<std::int64_t>(i)), want, 1e-5 * (1 + std::fabs(want))) << g[i];
  }
}

TEST(Swiglu, NpuSwigluSplitsTheLastDim) {
  const Tensor x = random_tensor({2, 3, 20}, 3);
  const Tensor y = ng::ops::npu_swiglu(x);
  ng::device_synchronize();
  EXPECT_EQ(y.shape(), ng::Shape({2, 3, 10}));
  const auto xv = floats(x);
  for (std::int64_t r = 0; r < 6; ++r)
    for (std::int64_t i = 0; i < 10; ++i)
      EXPECT_NEAR(at(y, r * 10 + i), silu_mul(xv[r * 20 + i], xv[r * 20 + 10 + i]), 1e-5);
}

TEST(Swiglu, ReplayEqualsEagerBitwise) {
  const Tensor x = random_tensor({8, 3072}, 4, DType::bf16);
  const Tensor y = ng::empty({8, 1536}, DType::f32);
  expect_replay_matches_eager({y}, [&] { ng::ops::swiglu_out(x, y); });
}

TEST(Swiglu, ArgumentErrors) {
  EXPECT_ARG_ERROR(ng::ops::npu_swiglu(ng::empty({4, 7}, DType::f32)),
                   "swiglu: x = float32[4, 7]: its last dim must be even");
  EXPECT_ARG_ERROR(ng::ops::npu_swiglu(ng::empty({4, 8}, DType::f32), 0),
                   "swiglu: dim = 0: only the last dim (-1) is supported");
  EXPECT_ARG_ERROR(ng::ops::swiglu_out(ng::empty({4, 8}, DType::f32), ng::empty({4, 8}, DType::f32)),
                   "swiglu: out = float32[4, 8]: must have the shape [4, 4]");
  EXPECT_ARG_ERROR(ng::ops::swiglu_out(ng::empty({4, 8}, DType::f32), ng::empty({4, 8}, DType::f16),
                                       ng::empty({4, 8}, DType::f32)),
                   "swiglu: up = float16[4, 8]: must have the shape and dtype of gate = float32[4, 8]");
  EXPECT_ARG_ERROR(ng::ops::swiglu_out(ng::empty({4, 8}, DType::f32), ng::empty({4, 8}, DType::f32),
                                       ng::empty({4, 4}, DType::f32)),
                   "swiglu: out = float32[4, 4]: must have the shape of gate = float32[4, 8]");
}

}  // namespace
}  // namespace llm_ops_test

namespace llm_ops_test {
namespace {

// GeGLU (Gemma's FFN): gelu_tanh(gate) * up against the formula in double, both forms, float32 and
// half outputs; the same ops replay bitwise; a cuda tensor is refused by name.
double gelu_mul(double a, double b) {
  return 0.5 * a * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (a + 0.044715 * a * a * a))) * b;
}

TEST(Geglu, MatchesTheReferenceInBothForms) {
  std::uint32_t seed = 40;
  for (DType out : {DType::f32, DType::bf16})
    for (const auto& [rows, H] : std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 1}, {3, 17}, {16, 2048}, {5, 100}}) {
      const Tensor x = random_tensor({rows, 2 * H}, ++seed, DType::f32, -6, 6);
      Tensor y = ng::empty({rows, H}, out);
      ng::ops::geglu_out(x, y);
      const Tensor gate = random_tensor({rows, H}, ++seed, DType::f32, -6, 6);
      const Tensor up = random_tensor({rows, H}, ++seed, DType::f32, -6, 6);
      Tensor y2 = ng::empty({rows, H}, out);
      ng::ops::geglu_out(gate, up, y2);
      ng::device_synchronize();
      const auto xv = floats(x), gv = floats(gate), uv = floats(up);
      const double tol = out == DType::f32 ? 2e-6 : 1.0 / 128;
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t i = 0; i < H; ++i) {
          const double want = gelu_mul(xv[r * 2 * H + i], xv[r * 2 * H + H + i]);
          ASSERT_NEAR(at(y, r * H + i), want, tol * (1 + std::fabs(want))) << "x form H=" << H;
          const double want2 = gelu_mul(gv[r * H + i], uv[r * H + i]);
          ASSERT_NEAR(at(y2, r * H + i), want2, tol * (1 + std::fabs(want2))) << "gate/up form H=" << H;
        }
    }
  const Tensor x = random_tensor({4, 64}, 50);
  const Tensor y = ng::empty({4, 32}, DType::f32);
  expect_replay_matches_eager({y}, [&] { ng::ops::geglu_out(x, y); });
  EXPECT_ARG_ERROR(ng::ops::geglu_out(random_tensor({2, 5}, 1), ng::empty({2, 2}, DType::f32)), "geglu: x = float32[2, 5]",
                   "last dim must be even");
}

}  // namespace
}  // namespace llm_ops_test
