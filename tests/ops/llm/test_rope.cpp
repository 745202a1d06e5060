// rotary_embedding against a double-precision reference for both pairings (Note [RoPE pairing]),
// partial rotary, dtypes, in place; a hand-checked adjacent-pair case; positions read when the
// kernel runs (a captured graph follows the positions tensor); argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "npugraph/ops/rope.hpp"
#include "ops/llm/llm_ops_util.hpp"

namespace llm_ops_test {
namespace {

using ng::ops::RopeOptions;
using ng::ops::RopeStyle;

std::vector<double> reference(const std::vector<float>& x, const std::vector<std::int32_t>& pos,
                              std::int64_t heads, std::int64_t D, const RopeOptions& o) {
  const std::int64_t R = o.rotary_dim ? o.rotary_dim : D, T = static_cast<std::int64_t>(pos.size());
  std::vector<double> y(x.begin(), x.end());
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < R / 2; ++i) {
        const double ff = o.freq_factors.defined() ? o.freq_factors.data_ptr<float>()[i] : 1.0;
        const double ang = pos[t] * std::pow(o.theta, -2.0 * i / R) * o.freq_scale / ff;
        const std::int64_t base = (t * heads + h) * D;
        const std::int64_t a = base + (o.style == RopeStyle::neox ? i : 2 * i);
        const std::int64_t b = base + (o.style == RopeStyle::neox ? i + R / 2 : 2 * i + 1);
        y[a] = x[a] * std::cos(ang) - x[b] * std::sin(ang);
        y[b] = x[b] * std::cos(ang) + x[a] * std::sin(ang);
      }
  return y;
}

TEST(Rope, MatchesTheReferenceForBothPairings) {
  std::uint32_t seed = 1;
  for (RopeStyle style : {RopeStyle::neox, RopeStyle::norm})
    for (DType in : {DType::f32, DType::bf16})
      for (DType out : {DType::f32, DType::f16})
        for (const auto& [T, heads, D, rot] : std::vector<std::array<std::int64_t, 4>>{
                 {1, 9, 64, 0}, {5, 3, 64, 0}, {16, 2, 128, 32}, {7, 1, 6, 4}, {130, 4, 64, 0}}) {
          std::vector<std::int32_t> pos(T);
          for (std::int64_t t = 0; t < T; ++t) pos[t] = static_cast<std::int32_t>((t * 977 + 3) % 8192);
          const RopeOptions o{.theta = 100000.0, .style = style, .rotary_dim = rot};
          const Tensor x = random_tensor({T, heads, D}, ++seed, in);
          const Tensor y = ng::ops::rotary_embedding(int_tensor(pos, {T}), x, o, out);
          ng::device_synchronize();
          const auto ref = reference(floats(x), pos, heads, D, o);
          const double tol = out == DType::f16 ? 1e-3 : 2e-6;
          for (std::int64_t i = 0; i < y.numel(); ++i)
            ASSERT_NEAR(at(y, i), ref[i], tol * (1 + std::fabs(ref[i])))
                << (style == RopeStyle::neox ? "neox" : "norm") << " T=" << T << " D=" << D << " i=" << i;
        }
}

// Note [RoPE scaling]: linear scaling (freq_scale) and Llama 3's per-pair divisors (freq_factors),
// alone and together, against the reference; with divisors of 1 and scale 1 the unscaled bits.
TEST(Rope, ScalingAndFrequencyFactorsMatchTheReference) {
  std::uint32_t seed = 40;
  for (RopeStyle style : {RopeStyle::neox, RopeStyle::norm})
    for (const auto& [T, heads, D, rot] : std::vector<std::array<std::int64_t, 4>>{{3, 4, 64, 0}, {9, 2, 128, 32}}) {
      const std::int64_t R = rot ? rot : D;
      std::vector<float> ffv(static_cast<std::size_t>(R / 2));
      for (std::int64_t i = 0; i < R / 2; ++i) ffv[i] = 1.0f + static_cast<float>(i % 5) * 1.75f;  // 1 .. 8
      const Tensor ff = make_tensor(ffv, {R / 2});
      std::vector<std::int32_t> pos(T);
      for (std::int64_t t = 0; t < T; ++t) pos[t] = static_cast<std::int32_t>(t * 1031 + 7);
      const Tensor x = random_tensor({T, heads, D}, ++seed);
      for (const auto& [scale, factors] : std::vector<std::pair<double, bool>>{{0.25, false}, {1.0, true}, {0.5, true}}) {
        const RopeOptions o{.theta = 500000.0, .style = style, .rotary_dim = rot, .freq_scale = scale,
                            .freq_factors = factors ? ff : Tensor()};
        const Tensor y = ng::ops::rotary_embedding(int_tensor(pos, {T}), x, o);
        const Tensor plain = ng::ops::rotary_embedding(int_tensor(pos, {T}), x, {.theta = 500000.0, .style = style, .rotary_dim = rot});
        ng::device_synchronize();
        const auto ref = reference(floats(x), pos, heads, D, o);
        for (std::int64_t i = 0; i < y.numel(); ++i)
          ASSERT_NEAR(at(y, i), ref[i], 2e-6 * (1 + std::fabs(ref[i]))) << "scale " << scale << " factors " << factors << " i=" << i;
        EXPECT_NE(0, std::memcmp(y.data(), plain.data(), y.numel() * sizeof(float)));  // it changed something
      }
      const Tensor ones = make_tensor(std::vector<float>(static_cast<std::size_t>(R / 2), 1.0f), {R / 2});
      const Tensor a = ng::ops::rotary_embedding(int_tensor(pos, {T}), x, {.theta = 500000.0, .style = style, .rotary_dim = rot, .freq_factors = ones});
      const Tensor b = ng::ops::rotary_embedding(int_tensor(pos, {T}), x, {.theta = 500000.0, .style = style, .rotary_dim = rot});
      ng::device_synchronize();
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.numel() * sizeof(float)));
    }
}

// Note [RoPE angle cache]: the same positions again, with every parameter the angles depend on
// changed in turn (theta, rotary_dim, freq_scale, the factors' values rewritten in place), match
// the reference each time; the same call twice (the second from the cache) gives the same bits.
TEST(Rope, TheAngleCacheFollowsEveryParameterAtTheSamePositions) {
  const std::int64_t T = 5, heads = 3, D = 64;
  std::vector<std::int32_t> pos = {0, 7, 71, 135, 4000};  // 7, 71 and 135 share a slot
  const Tensor positions = int_tensor(pos, {T});
  const Tensor x = random_tensor({T, heads, D}, 77);
  std::vector<float> ffv(D / 2, 2.0f);
  const Tensor ff = make_tensor(ffv, {D / 2});
  auto check = [&](const RopeOptions& o, const char* what) {
    const Tensor y = ng::ops::rotary_embedding(positions, x, o);
    const Tensor again = ng::ops::rotary_embedding(positions, x, o);
    ng::device_synchronize();
    const auto ref = reference(floats(x), pos, heads, D, o);
    for (std::int64_t i = 0; i < y.numel(); ++i)
      ASSERT_NEAR(at(y, i), ref[i], 2e-6 * (1 + std::fabs(ref[i]))) << what << " i=" << i;
    EXPECT_TRUE(ngtest::bitwise_equal(y, again)) << what;
  };
  check({.theta = 10000.0}, "theta 1e4");
  check({.theta = 500000.0}, "theta 5e5");
  check({.theta = 500000.0, .rotary_dim = 32}, "rotary_dim 32");
  check({.theta = 500000.0, .freq_scale = 0.25}, "freq_scale 0.25");
  check({.theta = 500000.0, .freq_factors = ff}, "factors 2");
  std::fill_n(ff.data_ptr<float>(), D / 2, 8.0f);  // the same tensor, new values
  check({.theta = 500000.0, .freq_factors = ff}, "factors 8");
}

TEST(Rope, NormRotatesAdjacentPairsNeoxHalves) {
  // D = 4, position 1, theta 1: pair i rotates by angle theta^(-2i/4) = 1 for both pairs.
  const std::vector<float> x = {1, 2, 3, 4};
  const float c = static_cast<float>(std::cos(1.0)), s = static_cast<float>(std::sin(1.0));
  const Tensor pos = int_tensor({1}, {1});
  const Tensor norm = ng::ops::rotary_embedding(pos, make_tensor(x, {1, 1, 4}), {.theta = 1, .style = RopeStyle::norm});
  const Tensor neox = ng::ops::rotary_embedding(pos, make_tensor(x, {1, 1, 4}), {.theta = 1, .style = RopeStyle::neox});
  ng::device_synchronize();
  // norm: pairs (0, 1), (2, 3); neox: pairs (0, 2), (1, 3).
  const std::vector<float> want_norm = {1 * c - 2 * s, 2 * c + 1 * s, 3 * c - 4 * s, 4 * c + 3 * s};
  const std::vector<float> want_neox = {1 * c - 3 * s, 2 * c - 4 * s, 3 * c + 1 * s, 4 * c + 2 * s};
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(at(norm, i), want_norm[i]) << i;
    EXPECT_FLOAT_EQ(at(neox, i), want_neox[i]) << i;
  }
  // Position 0 is the identity for both.
  const Tensor zero = ng::ops::rotary_embedding(int_tensor({0}, {1}), make_tensor(x, {1, 1, 4}), {.style = RopeStyle::norm});
  ng::device_synchronize();
  EXPECT_EQ(floats(zero), x);
}

TEST(Rope, InPlaceEqualsOutOfPlace) {
  const Tensor pos = int_tensor({3, 17, 4000}, {3});
  const Tensor x = random_tensor({3, 9, 64}, 4);
  const RopeOptions o{.theta = 1e5, .style = RopeStyle::norm};
  const Tensor y = ng::ops::rotary_embedding(pos, x, o);
  ng::ops::rotary_embedding_out(pos, x, x, o);
  ng::device_synchronize();
  EXPECT_TRUE(ngtest::bitwise_equal(x, y));
}

TEST(Rope, CapturedGraphReadsEachReplaysPositions) {
  const Tensor pos = int_tensor({5, 6}, {2});
  const Tensor x = random_tensor({2, 3, 64}, 5);
  const Tensor y = ng::empty({2, 3, 64}, DType::f16);
  const RopeOptions o{.theta = 1e5, .style = RopeStyle::norm};
  expect_replay_matches_eager({y}, [&] { ng::ops::rotary_embedding_out(pos, x, y, o); });
  ng::Graph g;
  {
    ng::CaptureScope c(g);
    ng::ops::rotary_embedding_out(pos, x, y, o);
  }
  pos.data_ptr<std::int32_t>()[0] = 100;
  pos.data_ptr<std::int32_t>()[1] = 101;
  g.replay();
  ng::device_synchronize();
  const Tensor eager = ng::ops::rotary_embedding(int_tensor({100, 101}, {2}), x, o, DType::f16);
  ng::device_synchronize();
  EXPECT_TRUE(ngtest::bitwise_equal(y, eager));
}

TEST(Rope, ArgumentErrors) {
  const Tensor x = ng::empty({4, 9, 64}, DType::f32);
  const Tensor pos = int_tensor({0, 1, 2, 3}, {4});
  using ng::ops::rotary_embedding_out;
  EXPECT_ARG_ERROR(rotary_embedding_out(int_tensor({0, 1, 2}, {3}), x, x, {}),
                   "rotary_embedding: positions = int32[3]: must have 4 elements (one per token of x)");
  EXPECT_ARG_ERROR(rotary_embedding_out(ng::empty({4}, DType::i64), x, x, {}),
                   "rotary_embedding: positions = int64[4]: must be int32");
  EXPECT_ARG_ERROR(rotary_embedding_out(pos, ng::empty({4, 576}, DType::f32), ng::empty({4, 576}, DType::f32), {}),
                   "rotary_embedding: x = float32[4, 576]: must be [tokens, heads, head_dim]");
  EXPECT_ARG_ERROR(rotary_embedding_out(pos, x, x, {.rotary_dim = 63}),
                   "rotary_embedding: rotary_dim = 63: must be 0 (the head dim) or an even number in [2, 64]");
  EXPECT_ARG_ERROR(rotary_embedding_out(pos, x, x, {.theta = 0}), "rotary_embedding: theta = 0: must be positive");
  EXPECT_ARG_ERROR(rotary_embedding_out(pos, x, ng::empty({4, 9, 32}, DType::f32), {}),
                   "rotary_embedding: out = float32[4, 9, 32]: must have the shape of x = float32[4, 9, 64]");
  EXPECT_ARG_ERROR(rotary_embedding_out(pos, x, x, {.freq_scale = -1}),
                   "rotary_embedding: freq_scale = -1: must be positive and finite");
  EXPECT_ARG_ERROR(rotary_embedding_out(pos, x, x, {.freq_factors = ng::empty({16}, DType::f32)}),
                   "rotary_embedding: freq_factors = float32[16]: must be a contiguous float32 [32] (one divisor per "
                   "rotated pair of x = float32[4, 9, 64])");
  EXPECT_ARG_ERROR(rotary_embedding_out(pos, x, x, {.rotary_dim = 16, .freq_factors = ng::empty({8}, DType::f16)}),
                   "rotary_embedding: freq_factors = float16[8]: must be a contiguous float32 [8]");
  const Tensor alias = Tensor::from_blob(x.data(), {4, 9, 64}, DType::f16, x.storage());
  EXPECT_ARG_ERROR(rotary_embedding_out(pos, x, alias, {}),
                   "rotary_embedding: out = float16[4, 9, 64]: in place (out is x) needs the dtype of x = float32[4, 9, 64]");
}

}  // namespace
}  // namespace llm_ops_test
