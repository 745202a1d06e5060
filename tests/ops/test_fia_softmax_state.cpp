// The online-softmax state: block-wise accumulation and merge() match a one-pass softmax, and the
// empty / NaN conventions hold.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ops/attention/softmax_state.hpp"

namespace {

using npugraph::ops::attention::SoftmaxState;

// Accumulates scores s (values v) into (state, acc) the way the kernel does, one block at a time.
void accumulate(SoftmaxState& st, float& acc, const std::vector<float>& s, const std::vector<float>& v,
                std::size_t begin, std::size_t end) {
  float m = -std::numeric_limits<float>::infinity();
  for (std::size_t j = begin; j < end; ++j)
    if (!(s[j] <= m)) m = s[j];
  acc *= st.raise_max(m);
  if (st.empty()) return;
  for (std::size_t j = begin; j < end; ++j) acc += st.add(s[j]) * v[j];
}

TEST(FiaSoftmaxState, BlocksAndMergeMatchOnePass) {
  const std::vector<float> s{0.5f, -1.0f, 3.0f, 2.0f, -4.0f, 7.0f, 1.0f};
  const std::vector<float> v{1, 2, 3, 4, 5, 6, 7};
  double mx = -1e30, sum = 0, out = 0;
  for (float x : s) mx = std::max<double>(mx, x);
  for (std::size_t j = 0; j < s.size(); ++j) sum += std::exp(s[j] - mx);
  for (std::size_t j = 0; j < s.size(); ++j) out += std::exp(s[j] - mx) / sum * v[j];
  const double lse = mx + std::log(sum);

  SoftmaxState blocks;
  float acc = 0;
  accumulate(blocks, acc, s, v, 0, 3);
  accumulate(blocks, acc, s, v, 3, 7);
  EXPECT_NEAR(acc / blocks.sum, out, 1e-5);
  EXPECT_NEAR(blocks.lse(), lse, 1e-5);

  SoftmaxState a, b;
  float acc_a = 0, acc_b = 0, fa = 0, fb = 0;
  accumulate(a, acc_a, s, v, 0, 4);
  accumulate(b, acc_b, s, v, 4, 7);
  const SoftmaxState m = SoftmaxState::merge(a, b, fa, fb);
  EXPECT_NEAR((fa * acc_a + fb * acc_b) / m.sum, out, 1e-5);
  EXPECT_NEAR(m.lse(), lse, 1e-5);

  // Merging with an empty state changes nothing.
  const SoftmaxState e;
  const SoftmaxState m2 = SoftmaxState::merge(blocks, e, fa, fb);
  EXPECT_EQ(fa, 1.0f);
  EXPECT_EQ(fb, 0.0f);
  EXPECT_EQ(m2.max, blocks.max);
  EXPECT_EQ(m2.sum, blocks.sum);
}

TEST(FiaSoftmaxState, EmptyAndNan) {
  const float inf = std::numeric_limits<float>::infinity();
  SoftmaxState st;
  EXPECT_TRUE(st.empty());
  EXPECT_EQ(st.lse(), inf);
  EXPECT_EQ(st.raise_max(-inf), 1.0f);  // all -inf: still empty
  EXPECT_TRUE(st.empty());

  float acc = 0;
  accumulate(st, acc, {1.0f, std::nanf(""), 2.0f}, {1, 1, 1}, 0, 3);
  EXPECT_TRUE(std::isnan(st.lse()));
  EXPECT_TRUE(std::isnan(acc));

  SoftmaxState n;
  n.raise_max(1.0f);
  EXPECT_TRUE(std::isnan(n.raise_max(std::nanf(""))));  // the accumulator turns NaN too
  EXPECT_TRUE(std::isnan(n.max));
  EXPECT_EQ(n.raise_max(5.0f), 1.0f);  // NaN stays the maximum
  EXPECT_TRUE(std::isnan(n.max));
  EXPECT_TRUE(std::isnan(n.lse()));
}

}  // namespace
