// rms_norm / add_rms_norm against a double-precision reference (dtypes, odd hidden sizes, leading
// dims), the rstd output, in-place residual update, capture -> replay bitwise, argument errors.
#include <gtest/gtest.h>

#include <cmath>

#include "npugraph/ops/rms_norm.hpp"
#include "ops/llm/llm_ops_util.hpp"

namespace llm_ops_test {
namespace {

// y and rstd of each row in double.
void reference(const std::vector<float>& x, const std::vector<float>& g, std::int64_t rows,
               std::int64_t H, double eps, std::vector<double>& y, std::vector<double>& rstd) {
  y.assign(x.size(), 0);
  rstd.assign(static_cast<std::size_t>(rows), 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (std::int64_t i = 0; i < H; ++i) ss += static_cast<double>(x[r * H + i]) * x[r * H + i];
    rstd[r] = 1.0 / std::sqrt(ss / H + eps);
    for (std::int64_t i = 0; i < H; ++i) y[r * H + i] = x[r * H + i] * rstd[r] * g[i];
  }
}

double tolerance(DType t) { return t == DType::f32 ? 2e-6 : t == DType::f16 ? 2e-3 : 1.6e-2; }

TEST(RmsNorm, MatchesTheReference) {
  std::uint32_t seed = 1;
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (const auto& [rows, H] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {1, 1}, {1, 7}, {3, 64}, {16, 576}, {5, 1001}, {128, 96}}) {
      const Tensor x = random_tensor({rows, H}, ++seed, dt, -3, 3);
      const Tensor g = random_tensor({H}, ++seed, dt, 0.5f, 1.5f);
      const auto [y, rstd] = ng::ops::npu_rms_norm(x, g, 1e-5);
      ng::device_synchronize();
      std::vector<double> ry, rr;
      reference(floats(x), floats(g), rows, H, 1e-5, ry, rr);
      EXPECT_EQ(rstd.shape(), ng::Shape({rows, 1}));
      for (std::int64_t i = 0; i < y.numel(); ++i)
        ASSERT_NEAR(at(y, i), ry[i], tolerance(dt) * (1 + std::fabs(ry[i]))) << ng::dtype_name(dt) << " H=" << H << " i=" << i;
      for (std::int64_t r = 0; r < rows; ++r) ASSERT_NEAR(at(rstd, r), rr[r], 1e-6 * rr[r]);
    }
}

TEST(RmsNorm, Float32GammaAndOtherOutputDtype) {
  const Tensor x = random_tensor({2, 3, 40}, 5, DType::bf16);
  const Tensor g = random_tensor({40}, 6, DType::f32);
  const Tensor y = ng::empty({2, 3, 40}, DType::f32);
  ng::ops::rms_norm_out(x, g, 1e-6, y);
  ng::device_synchronize();
  std::vector<double> ry, rr;
  reference(floats(x), floats(g), 6, 40, 1e-6, ry, rr);
  for (std::int64_t i = 0; i < y.numel(); ++i) ASSERT_NEAR(at(y, i), ry[i], 2e-6 * (1 + std::fabs(ry[i])));
}

TEST(RmsNorm, AddRmsNormUpdatesTheResidualInPlace) {
  const Tensor x = random_tensor({4, 576}, 7);
  const Tensor h = random_tensor({4, 576}, 8);
  const Tensor g = random_tensor({576}, 9);
  std::vector<float> sum(4 * 576);
  const auto xv = floats(x), hv = floats(h);
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = xv[i] + hv[i];
  const Tensor y = ng::empty({4, 576}, DType::f32);
  ng::ops::add_rms_norm_out(x, h, g, 1e-5, y, Tensor(), x);  // x += h; y = norm(x)
  const auto alloc = ng::ops::npu_add_rms_norm(make_tensor(xv, {4, 576}), h, g, 1e-5);
  ng::device_synchronize();
  EXPECT_EQ(floats(x), sum);
  const auto plain = ng::ops::npu_rms_norm(x, g, 1e-5);
  ng::device_synchronize();
  EXPECT_TRUE(ngtest::bitwise_equal(y, plain.y));
  EXPECT_TRUE(ngtest::bitwise_equal(alloc.y, plain.y));
  EXPECT_TRUE(ngtest::bitwise_equal(alloc.x, x));
  EXPECT_TRUE(ngtest::bitwise_equal(alloc.rstd, plain.rstd));
}

TEST(RmsNorm, ReplayEqualsEagerBitwise) {
  const Tensor x = random_tensor({16, 576}, 10, DType::f16);
  const Tensor g = random_tensor({576}, 11, DType::f16);
  const Tensor y = ng::empty({16, 576}, DType::f16), rstd = ng::empty({16, 1}, DType::f32);
  expect_replay_matches_eager({y, rstd}, [&] { ng::ops::rms_norm_out(x, g, 1e-5, y, rstd); });
}

TEST(RmsNorm, ArgumentErrors) {
  const Tensor x = ng::empty({4, 576}, DType::f32);
  const Tensor g = ng::empty({576}, DType::f32);
  const Tensor y = ng::empty({4, 576}, DType::f32);
  using ng::ops::rms_norm_out;
  EXPECT_ARG_ERROR(rms_norm_out(x, ng::empty({512}, DType::f32), 1e-6, y),
                   "rms_norm: gamma = float32[512]: must have the hidden size 576 of x = float32[4, 576]");
  EXPECT_ARG_ERROR(rms_norm_out(x, ng::empty({576}, DType::f16), 1e-6, y),
                   "rms_norm: gamma = float16[576]: must be float32 or the dtype of x = float32[4, 576]");
  EXPECT_ARG_ERROR(rms_norm_out(x, g, -1, y), "rms_norm: epsilon = -1: must be finite and >= 0");
  EXPECT_ARG_ERROR(rms_norm_out(x, g, 1e-6, ng::empty({4, 575}, DType::f32)),
                   "rms_norm: y = float32[4, 575]: must have the shape of x = float32[4, 576]");
  EXPECT_ARG_ERROR(rms_norm_out(x, g, 1e-6, y, ng::empty({4}, DType::f32)),
                   "rms_norm: rstd = float32[4]: must be a contiguous float32[4, 1]");
  EXPECT_ARG_ERROR(rms_norm_out(ng::empty({4, 576}, DType::i32), g, 1e-6, y),
                   "rms_norm: x = int32[4, 576]: must be float32, float16 or bfloat16");
  EXPECT_ARG_ERROR(rms_norm_out(Tensor(), g, 1e-6, y), "rms_norm: x is undefined");
  EXPECT_ARG_ERROR(ng::ops::add_rms_norm_out(x, ng::empty({4, 575}, DType::f32), g, 1e-6, y, {}, x),
                   "add_rms_norm: x2 = float32[4, 575]: must have the dtype and shape of x1 = float32[4, 576]");
  EXPECT_ARG_ERROR(ng::ops::add_rms_norm_out(x, x, g, 1e-6, y, {}, ng::empty({4}, DType::f32)),
                   "add_rms_norm: x = float32[4]: must have the shape of x1 = float32[4, 576]");
}

}  // namespace
}  // namespace llm_ops_test
