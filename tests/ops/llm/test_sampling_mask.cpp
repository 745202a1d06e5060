// sample_rows_out's token masks (ops::TokenMaskRows: structured output's allowed tokens): a masked
// row draws what an unmasked draw over its logits with the disallowed ones set to -inf draws
// (greedy, top-k, top-p, whole vocabulary), after the adjustment lists; unmasked rows and the
// logits are left as they are; a captured op reads the masks at replay; argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "npugraph/graph.hpp"
#include "npugraph/ops/sampling.hpp"
#include "ops/llm/llm_ops_util.hpp"

namespace llm_ops_test {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool allowed(const Tensor& bits, std::int64_t row, std::int64_t token) {
  const auto* w = reinterpret_cast<const std::uint32_t*>(bits.data_ptr<std::int32_t>()) + row * bits.size(1);
  return (w[token / 32] >> (token % 32)) & 1u;
}

// Random allowed sets: row b allows each token with probability 1 / (b + 2), and at least one.
Tensor random_bits(std::int64_t B, std::int64_t V, std::uint32_t seed) {
  const std::int64_t W = (V + 31) / 32;
  Tensor bits = ng::empty({B, W}, DType::i32);
  auto* w = reinterpret_cast<std::uint32_t*>(bits.data_ptr<std::int32_t>());
  std::fill(w, w + B * W, 0u);
  const std::vector<float> u = random_values(static_cast<std::size_t>(B * V), seed, 0.0f, 1.0f);
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t t = 0; t < V; ++t)
      if (u[static_cast<std::size_t>(b * V + t)] < 1.0f / static_cast<float>(b + 2)) w[b * W + t / 32] |= 1u << (t % 32);
    w[b * W + (7 * b + 3) % V / 32] |= 1u << ((7 * b + 3) % V % 32);
  }
  return bits;
}

TEST(SampleRowsMask, AMaskedRowDrawsAsItsLogitsWithTheDisallowedOnesAtMinusInfinity) {
  constexpr std::int64_t B = 6, V = 1000;  // V not a multiple of 32: the last word is partial
  const Tensor logits = random_tensor({B, V}, 11, DType::f32, -4.0f, 4.0f);
  const std::vector<float> before = floats(logits);
  const Tensor bits = random_bits(B, V, 12);
  const Tensor on = int_tensor({1, 1, 0, 1, 1, 1}, {B});
  // Greedy, whole vocabulary, top-k, top-p, top-k and top-p, and an unmasked sampled row.
  const std::vector<float> temp{0, 0.9f, 1.1f, 0.7f, 1.3f, 0.8f};
  const Tensor top_k = i64_tensor({0, 0, 0, 20, 0, 50});
  const Tensor top_p = f32_tensor({1, 1, 1, 1, 0.6f, 0.9f});
  std::vector<float> want = before;
  for (std::int64_t b = 0; b < B; ++b)
    if (on.data_ptr<std::int32_t>()[b])
      for (std::int64_t t = 0; t < V; ++t)
        if (!allowed(bits, b, t)) want[static_cast<std::size_t>(b * V + t)] = kNegInf;
  const Tensor masked = make_tensor(want, {B, V});
  for (std::int64_t step = 0; step < 20; ++step) {
    const Tensor seeds = i64_tensor({1, 2, 3, 4, 5, 6}), steps = i64_tensor(std::vector<std::int64_t>(B, step));
    const Tensor ref = ng::empty({B}, DType::i32), out = ng::empty({B}, DType::i32);
    const ng::ops::SamplingRows plain{.temperature = f32_tensor(temp), .top_k = top_k, .top_p = top_p};
    ng::ops::sample_rows_out(masked, seeds, steps, plain, ref);
    ng::ops::SamplingRows with_mask = plain;
    with_mask.mask = {.on = on, .bits = bits};
    ng::ops::sample_rows_out(logits, seeds, steps, with_mask, out);
    ng::device_synchronize();
    EXPECT_EQ(ints(out), ints(ref)) << "step " << step;
    for (std::int64_t b = 0; b < B; ++b) {
      if (on.data_ptr<std::int32_t>()[b]) {
        EXPECT_TRUE(allowed(bits, b, ints(out)[static_cast<std::size_t>(b)]));
      }
    }
  }
  EXPECT_EQ(floats(logits), before);  // the logits are left as they are
}

TEST(SampleRowsMask, TheMaskComesAfterTheAdjustmentLists) {
  // Token 5 gets +100 from its list but is not allowed; 9 and 32 are: greedy picks 9, the larger.
  constexpr std::int64_t V = 40;
  std::vector<float> v(V, 0.0f);
  v[9] = 2.0f, v[32] = 1.0f;
  const Tensor logits = make_tensor(v, {1, V});
  const Tensor bits = int_tensor({1 << 9, 1 << 0}, {1, 2});  // 9 and 32
  const ng::ops::LogitAdjustRows lists{.count = int_tensor({1}, {1}), .tokens = int_tensor({5}, {1, 1}),
                                       .scale = make_tensor({1}, {1, 1}), .add = make_tensor({100}, {1, 1})};
  const Tensor out = ng::empty({1}, DType::i32);
  ng::ops::sample_rows_out(logits, i64_tensor({1}), i64_tensor({0}),
                           {.temperature = f32_tensor({0}), .adjust = lists, .mask = {.on = int_tensor({1}, {1}), .bits = bits}},
                           out);
  ng::device_synchronize();
  EXPECT_EQ(ints(out), std::vector<std::int32_t>{9});
}

TEST(SampleRowsMask, ACapturedSamplerReadsTheMasksAtReplay) {
  constexpr std::int64_t B = 3, V = 100;
  const Tensor logits = random_tensor({B, V}, 21, DType::f32, -1.0f, 1.0f);
  const Tensor on = int_tensor({1, 1, 1}, {B});
  Tensor bits = ng::empty({B, 4}, DType::i32);
  const Tensor out = ng::empty({B}, DType::i32);
  const Tensor seeds = i64_tensor({1, 2, 3}), steps = i64_tensor({0, 0, 0});
  ng::Graph g;
  {
    ng::CaptureScope c(g);
    ng::ops::sample_rows_out(logits, seeds, steps, {.temperature = f32_tensor({0, 1, 0.5f}), .mask = {.on = on, .bits = bits}},
                             out);
  }
  for (std::int32_t only : {0, 31, 32, 77, 99}) {  // one allowed token: every row draws it
    auto* w = reinterpret_cast<std::uint32_t*>(bits.data_ptr<std::int32_t>());
    std::fill(w, w + B * 4, 0u);
    for (std::int64_t b = 0; b < B; ++b) w[b * 4 + only / 32] = 1u << (only % 32);
    g.replay();
    ng::device_synchronize();
    EXPECT_EQ(ints(out), std::vector<std::int32_t>(B, only));
  }
}

TEST(SampleRowsMask, ArgumentErrors) {
  const Tensor logits = ng::empty({2, 40}, DType::f32);
  const Tensor seeds = i64_tensor({1, 2}), steps = i64_tensor({0, 0}), out = ng::empty({2}, DType::i32);
  using ng::ops::sample_rows_out;
  EXPECT_ARG_ERROR(sample_rows_out(logits, seeds, steps,
                                   {.temperature = f32_tensor({1, 2}),
                                    .mask = {.on = int_tensor({1, 1}, {2}), .bits = int_tensor({0, 0}, {2, 1})}},
                                   out),
                   "sample_rows: mask.bits = int32[2, 1]: must be a contiguous int32 [2, 2] (ceil(vocab / 32) words");
  EXPECT_ARG_ERROR(sample_rows_out(logits, seeds, steps,
                                   {.temperature = f32_tensor({1, 2}), .mask = {.bits = int_tensor({0, 0, 0, 0}, {2, 2})}},
                                   out),
                   "sample_rows: mask.bits is given without mask.on");
  EXPECT_ARG_ERROR(sample_rows_out(logits, seeds, steps,
                                   {.temperature = f32_tensor({1, 2}),
                                    .mask = {.on = i64_tensor({1, 1}), .bits = int_tensor({0, 0, 0, 0}, {2, 2})}},
                                   out),
                   "sample_rows: mask.on = int64[2]: must be a contiguous int32 tensor of 2 elements");
}

}  // namespace
}  // namespace llm_ops_test
