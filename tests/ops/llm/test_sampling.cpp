// argmax (ties, NaN) and sample: Philox4x32-10 known answers (Random123's kat_vectors), greedy at
// temperature 0, the support of top-k / top-p exactly the reference's, the draw equal to an
// independent reference's for the same uniform, frequencies following the distribution,
// reproducibility and thread independence, steps read (and advanced) by the kernel so a captured
// graph draws anew each replay, argument errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "npugraph/ops/sampling.hpp"
#include "ops/llm/llm_ops_util.hpp"
#include "ops/sampling/sampling_weights.hpp"

namespace llm_ops_test {
namespace {

using ng::ops::SamplingOptions;

TEST(Sampling, PhiloxKnownAnswers) {
  // Random123 kat_vectors, philox4x32 10 rounds: (counter words, key words) -> output words.
  std::uint32_t r[4];
  ng::ops::philox4x32(0, 0, 0, r);
  EXPECT_EQ(r[0], 0x6627e8d5u);
  EXPECT_EQ(r[1], 0xe169c58du);
  EXPECT_EQ(r[2], 0xbc57ac4cu);
  EXPECT_EQ(r[3], 0x9b00dbd8u);
  ng::ops::philox4x32(~0ull, ~0ull, ~0ull, r);
  EXPECT_EQ(r[0], 0x408f276du);
  EXPECT_EQ(r[1], 0x41c83b0eu);
  EXPECT_EQ(r[2], 0xa20bc7c6u);
  EXPECT_EQ(r[3], 0x6d5451fdu);
  // counter = 243f6a88 85a308d3 13198a2e 03707344, key = a4093822 299f31d0 (digits of pi).
  ng::ops::philox4x32(0x299f31d0a4093822ull, 0x85a308d3243f6a88ull, 0x0370734413198a2eull, r);
  EXPECT_EQ(r[0], 0xd16cfe09u);
  EXPECT_EQ(r[1], 0x94fdccebu);
  EXPECT_EQ(r[2], 0x5001e420u);
  EXPECT_EQ(r[3], 0x24126ea1u);
  const double u = ng::ops::sampling_uniform(1, 2, 3);
  EXPECT_GE(u, 0.0);
  EXPECT_LT(u, 1.0);
}

TEST(Sampling, ArgmaxTiesAndNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const Tensor logits = make_tensor({1, 3, 3, 2,   -inf, -inf, -inf, -inf,   0, nan, 5, nan,
                                     -1, -2, -3, -4,   7, 7, 7, 7},
                                    {5, 4});
  const Tensor out = ng::ops::argmax(logits);
  ng::device_synchronize();
  EXPECT_EQ(ints(out), (std::vector<std::int32_t>{1, 0, 1, 0, 0}));
  const Tensor big = random_tensor({3, 49152}, 1);
  const auto v = floats(big);
  const Tensor o = ng::ops::argmax(big);
  ng::device_synchronize();
  for (int b = 0; b < 3; ++b)
    EXPECT_EQ(ints(o)[b], std::max_element(v.begin() + b * 49152, v.begin() + (b + 1) * 49152) - (v.begin() + b * 49152));
}

// argmax_row's lanes: the maximum repeated at indices in different lanes and blocks, and in the
// tail, each row's answer its first index; an infinity or a NaN anywhere (the exact rescan); rows
// against std::max_element / a scan for the first NaN.
TEST(Sampling, ArgmaxFindsTheFirstOfRepeatedMaximaInAnyLane) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::int64_t V = 1000 * 16 + 7;  // 16-lane blocks and a tail of 7
  const std::vector<std::vector<std::int64_t>> places = {
      {37, 1000, 9999}, {9999, 1000, 37}, {16 * 500 + 15, 16 * 500 + 1}, {V - 1, V - 3}, {V - 3, 20}, {0, V - 1}, {5}};
  std::vector<float> rows;
  std::vector<std::int32_t> want;
  std::uint32_t state = 12345;
  auto next = [&] { return (state = state * 1664525u + 1013904223u) >> 8; };
  for (const auto& at : places) {
    std::vector<float> r(static_cast<std::size_t>(V));
    for (float& v : r) v = static_cast<float>(next() % 20000) / 1000.0f - 10.0f;  // [-10, 10)
    for (std::int64_t i : at) r[static_cast<std::size_t>(i)] = 11.0f;
    want.push_back(static_cast<std::int32_t>(*std::min_element(at.begin(), at.end())));
    rows.insert(rows.end(), r.begin(), r.end());
  }
  // An infinity late, a NaN after an infinity, and -inf everywhere but one NaN.
  for (const auto& [edits, answer] : std::vector<std::pair<std::vector<std::pair<std::int64_t, float>>, std::int32_t>>{
           {{{12000, inf}, {15000, inf}}, 12000}, {{{3, inf}, {8000, nan}}, 8000}}) {
    std::vector<float> r(static_cast<std::size_t>(V), 1.0f);
    for (const auto& [i, v] : edits) r[static_cast<std::size_t>(i)] = v;
    rows.insert(rows.end(), r.begin(), r.end());
    want.push_back(answer);
  }
  std::vector<float> r(static_cast<std::size_t>(V), -inf);
  r[4321] = nan;
  rows.insert(rows.end(), r.begin(), r.end());
  want.push_back(4321);
  const auto B = static_cast<std::int64_t>(want.size());
  const Tensor out = ng::ops::argmax(make_tensor(rows, {B, V}));
  ng::device_synchronize();
  EXPECT_EQ(ints(out), want);
}

// The header's definition, written independently but for the exp itself (the kernel's vectorised
// weights, element-wise): every token sorted by (logit desc, index asc) with std::stable_sort; the
// top-k prefix, its top-p prefix (masses in double, in that order); the kept tokens walked in
// index order.
std::int32_t reference_sample(const std::vector<float>& row, const SamplingOptions& o, double u,
                              std::vector<std::int32_t>* support = nullptr) {
  const auto V = static_cast<std::int64_t>(row.size());
  std::vector<std::int32_t> idx(V);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](std::int32_t a, std::int32_t b) { return row[a] > row[b]; });
  const float mx = *std::max_element(row.begin(), row.end());
  const auto inv_t = static_cast<float>(1.0 / o.temperature);
  std::vector<float> w(V);
  ng::ops::sampling_impl::exp_weights(row.data(), V, mx, inv_t, w.data());
  const std::int64_t k = o.top_k > 0 ? o.top_k : V;
  std::int64_t n = k;
  if (o.top_p < 1) {
    double total = 0;
    if (k < V) {
      for (std::int64_t i = 0; i < k; ++i) total += w[idx[i]];
    } else {
      for (std::int64_t j = 0; j < V; ++j) total += w[j];  // the kernel sums all V in index order
    }
    double m = 0;
    for (n = 0; n < k;) {
      m += w[idx[n++]];
      if (m >= o.top_p * total) break;
    }
  }
  std::vector<std::int32_t> kept(idx.begin(), idx.begin() + n);
  std::sort(kept.begin(), kept.end());
  if (support) *support = kept;
  double mass = 0;
  for (std::int32_t j : kept) mass += w[j];
  double cum = 0;
  for (std::int32_t j : kept) {
    cum += w[j];
    if (cum > u * mass) return j;
  }
  return kept.back();
}

TEST(Sampling, TemperatureZeroIsArgmaxAndTopKOneToo) {
  const Tensor logits = random_tensor({4, 1000}, 2, DType::f32, -5, 5);
  const Tensor seeds = i64_tensor({1, 2, 3, 4}), steps = i64_tensor({0, 0, 0, 0});
  const Tensor g = ng::ops::sample(logits, seeds, steps, {.temperature = 0});
  const Tensor k1 = ng::ops::sample(logits, seeds, steps, {.temperature = 0.7, .top_k = 1});
  const Tensor a = ng::ops::argmax(logits);
  ng::device_synchronize();
  EXPECT_EQ(ints(g), ints(a));
  EXPECT_EQ(ints(k1), ints(a));
}

TEST(Sampling, DrawsEqualTheReference) {
  const std::int64_t B = 6, V = 3000;
  const Tensor logits = random_tensor({B, V}, 3, DType::f32, -4, 4);
  const auto lv = floats(logits);
  std::vector<std::int64_t> seed_v(B), step_v(B);
  for (std::int64_t b = 0; b < B; ++b) {
    seed_v[b] = 1000 + b;
    step_v[b] = 7 * b;
  }
  const Tensor seeds = i64_tensor(seed_v), steps = i64_tensor(step_v);
  for (const SamplingOptions& o : {SamplingOptions{.temperature = 1.0}, SamplingOptions{.temperature = 0.8, .top_k = 40},
                                   SamplingOptions{.temperature = 1.3, .top_p = 0.9},
                                   SamplingOptions{.temperature = 0.6, .top_k = 200, .top_p = 0.5},
                                   SamplingOptions{.temperature = 2.0, .top_k = V}}) {
    const Tensor out = ng::ops::sample(logits, seeds, steps, o);
    ng::device_synchronize();
    for (std::int64_t b = 0; b < B; ++b) {
      const std::vector<float> row(lv.begin() + b * V, lv.begin() + (b + 1) * V);
      const double u = ng::ops::sampling_uniform(seed_v[b], step_v[b], b);
      EXPECT_EQ(ints(out)[b], reference_sample(row, o, u))
          << "row " << b << " T=" << o.temperature << " k=" << o.top_k << " p=" << o.top_p;
    }
  }
}

TEST(Sampling, FrequenciesFollowTheTruncatedDistribution) {
  // Logits log(1..6): p ~ 1..6 over 21. top_k = 4 keeps {5, 4, 3, 2} (p ~ 6, 5, 4, 3 over 18);
  // top_p = 0.6 of those keeps the first prefix reaching 10.8 of 18: {5, 4} (11).
  std::vector<float> row(6);
  for (int j = 0; j < 6; ++j) row[j] = std::log(static_cast<float>(j + 1));
  const Tensor logits = make_tensor(row, {1, 6});
  const Tensor seeds = i64_tensor({42});
  const int n = 6000;
  std::map<int, int> all, topk, nucleus;
  for (int s = 0; s < n; ++s) {
    const Tensor steps = i64_tensor({s});
    const Tensor a = ng::ops::sample(logits, seeds, steps, {.temperature = 1});
    const Tensor b = ng::ops::sample(logits, seeds, steps, {.temperature = 1, .top_k = 4});
    const Tensor c = ng::ops::sample(logits, seeds, steps, {.temperature = 1, .top_k = 4, .top_p = 0.6});
    ng::device_synchronize();
    ++all[ints(a)[0]];
    ++topk[ints(b)[0]];
    ++nucleus[ints(c)[0]];
  }
  for (int j = 0; j < 6; ++j) EXPECT_NEAR(all[j] / double(n), (j + 1) / 21.0, 0.02) << j;
  EXPECT_EQ(topk.count(0) + topk.count(1), 0u);
  for (int j = 2; j < 6; ++j) EXPECT_NEAR(topk[j] / double(n), (j + 1) / 18.0, 0.02) << j;
  EXPECT_EQ(nucleus.size(), 2u);
  EXPECT_NEAR(nucleus[5] / double(n), 6 / 11.0, 0.02);
  EXPECT_NEAR(nucleus[4] / double(n), 5 / 11.0, 0.02);
}

TEST(Sampling, NucleusSupportIsExactWithATiedFlatTail) {
  // 300 equal logits and one larger: the nucleus needs more than the first sorted prefix of 64.
  std::vector<float> row(301, 0.0f);
  row[150] = 3.0f;
  const SamplingOptions o{.temperature = 1, .top_p = 0.95};
  std::vector<std::int32_t> support;
  reference_sample(row, o, 0.5, &support);
  ASSERT_GT(support.size(), 64u);
  const Tensor logits = make_tensor(row, {1, 301});
  const Tensor seeds = i64_tensor({9});
  std::map<int, int> seen;
  for (int s = 0; s < 400; ++s) {
    const Tensor out = ng::ops::sample(logits, seeds, i64_tensor({s}), o);
    ng::device_synchronize();
    ++seen[ints(out)[0]];
    EXPECT_EQ(ints(out)[0], reference_sample(row, o, ng::ops::sampling_uniform(9, s, 0)));
  }
  for (const auto& [j, count] : seen)
    EXPECT_NE(std::find(support.begin(), support.end(), j), support.end()) << j;
}

TEST(Sampling, ReproducibleAndIndependentOfThreadsAndOtherRows) {
  const Tensor logits = random_tensor({8, 5000}, 4);
  const Tensor seeds = i64_tensor({1, 2, 3, 4, 5, 6, 7, 8}), steps = i64_tensor({3, 3, 3, 3, 3, 3, 3, 3});
  const SamplingOptions o{.temperature = 1.1, .top_k = 50, .top_p = 0.9};
  const Tensor a = ng::ops::sample(logits, seeds, steps, o);
  const ng::Stream one = ng::Stream::create(ng::Device::cpu(), {.num_threads = 1});
  Tensor b;
  {
    ng::StreamGuard on(one);
    b = ng::ops::sample(logits, seeds, steps, o);
  }
  // Row 5 alone (its own row index 5 is part of the counter: use a view of the same rows).
  ng::device_synchronize();
  EXPECT_TRUE(ngtest::bitwise_equal(a, b));
  const Tensor again = ng::ops::sample(logits, seeds, steps, o);
  ng::device_synchronize();
  EXPECT_TRUE(ngtest::bitwise_equal(a, again));
}

TEST(Sampling, CapturedGraphAdvancesStepsAndDrawsAnew) {
  const Tensor logits = random_tensor({2, 500}, 5, DType::f32, -1, 1);
  const Tensor seeds = i64_tensor({11, 12}), steps = i64_tensor({0, 100});
  const Tensor out = ng::empty({2}, DType::i32);
  const SamplingOptions o{.temperature = 1.5, .advance_steps = true};
  ng::Graph g;
  {
    ng::CaptureScope c(g);
    ng::ops::sample_out(logits, seeds, steps, out, o);
  }
  const auto lv = floats(logits);
  std::set<std::int32_t> drawn;
  for (int r = 0; r < 20; ++r) {
    g.replay();
    ng::device_synchronize();
    for (int b = 0; b < 2; ++b) {
      const std::vector<float> row(lv.begin() + b * 500, lv.begin() + (b + 1) * 500);
      const std::int64_t step = (b == 0 ? 0 : 100) + r;
      EXPECT_EQ(ints(out)[b], reference_sample(row, o, ng::ops::sampling_uniform(11 + b, step, b)));
    }
    drawn.insert(ints(out)[0]);
  }
  EXPECT_EQ(steps.data_ptr<std::int64_t>()[0], 20);
  EXPECT_EQ(steps.data_ptr<std::int64_t>()[1], 120);
  EXPECT_GT(drawn.size(), 5u);  // different draws across replays, no update
}

// Note [Greedy rows split]: a lone greedy row of many logits is cut into parts over the pool's
// threads; its token is still the first NaN, else the first index of the maximum, on 1, 2 and 7
// threads (1, 2 and 3 parts of a row of 3 x 2^15 + 7), wherever the maximum, the tie, the NaN or
// the infinity falls; a sampled row beside it keeps its draw, and steps advance once per row.
TEST(SampleRows, AGreedyRowSplitOverThreadsKeepsArgmaxsAnswer) {
  const std::int64_t V = 3 * (std::int64_t{1} << 15) + 7;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> base = floats(random_tensor({1, V}, 21, DType::f32, -4, 4));
  auto with = [&](std::vector<std::pair<std::int64_t, float>> set) {
    std::vector<float> v = base;
    for (const auto& [i, x] : set) v[static_cast<std::size_t>(i)] = x;
    return v;
  };
  auto expected = [](const std::vector<float>& v) {  // the first NaN, else the first maximum
    for (std::size_t i = 0; i < v.size(); ++i)
      if (std::isnan(v[i])) return static_cast<std::int32_t>(i);
    std::size_t best = 0;
    for (std::size_t i = 1; i < v.size(); ++i)
      if (v[i] > v[best]) best = i;
    return static_cast<std::int32_t>(best);
  };
  const std::vector<std::vector<float>> rows{
      with({{V - 3, 9.0f}}),                              // the maximum in the last part
      with({{5, 9.0f}, {V - 3, 9.0f}}),                   // a tie across parts: the first
      with({{7, 9.0f}, {V - 2, nan}}),                    // a NaN in the last part only
      with({{40000, nan}, {V - 2, nan}}),                 // NaNs in two parts: the first
      with({{70000, inf}, {80000, inf}, {3, 9.0f}}),      // infinities: the first
      std::vector<float>(static_cast<std::size_t>(V), -inf)};  // every value -inf: 0
  for (int threads : {1, 2, 7}) {
    const ng::Stream stream = ng::Stream::create(ng::Device::cpu(), {.num_threads = threads});
    const ng::StreamGuard on(stream);
    for (std::size_t c = 0; c < rows.size(); ++c) {
      SCOPED_TRACE(testing::Message() << threads << " threads, case " << c);
      const Tensor logits = make_tensor(rows[c], {1, V});
      const Tensor steps = i64_tensor({4}), out = ng::empty({1}, DType::i32);
      ng::ops::sample_out(logits, i64_tensor({1}), steps, out, {.temperature = 0});
      stream.synchronize();
      EXPECT_EQ(ints(out)[0], expected(rows[c]));
    }
    // Two rows, one greedy and one sampled (3 parts of the greedy row on 7 threads).
    std::vector<float> two = rows[1];
    two.insert(two.end(), base.begin(), base.end());
    const Tensor logits = make_tensor(two, {2, V});
    const Tensor steps = i64_tensor({4, 9}), out = ng::empty({2}, DType::i32);
    ng::ops::sample_rows_out(logits, i64_tensor({1, 2}), steps,
                             {.temperature = f32_tensor({0, 0.8f}), .advance_steps = true}, out);
    stream.synchronize();
    EXPECT_EQ(ints(out)[0], 5);
    EXPECT_EQ(ints(out)[1], reference_sample(base, {.temperature = 0.8f}, ng::ops::sampling_uniform(2, 9, 0)));
    EXPECT_EQ(steps.data_ptr<std::int64_t>()[0], 5);
    EXPECT_EQ(steps.data_ptr<std::int64_t>()[1], 10);
    // No rows: nothing to split, nothing written.
    const Tensor none = ng::empty({0}, DType::i32);
    ng::ops::sample_out(ng::empty({0, V}, DType::f32), ng::empty({0}, DType::i64), ng::empty({0}, DType::i64), none,
                       {.temperature = 0});
    stream.synchronize();
  }
}

TEST(SampleRows, EachRowDrawsWithItsOwnParametersAndACounterWithoutItsRow) {
  // Six rows, six settings (greedy, plain, top-k, top-p, both, top-k 1): each row's token is the
  // reference's for that row's options and the uniform of (seed, step, 0).
  const std::int64_t B = 6, V = 2000;
  const Tensor logits = random_tensor({B, V}, 6, DType::f32, -4, 4);
  const auto lv = floats(logits);
  // (Settings exact in float32, the per-row tensors' type.)
  const std::vector<SamplingOptions> o{{.temperature = 0}, {.temperature = 1.0}, {.temperature = 0.75, .top_k = 40},
                                       {.temperature = 1.25, .top_p = 0.875}, {.temperature = 0.625, .top_k = 200, .top_p = 0.5},
                                       {.temperature = 2.0, .top_k = 1}};
  std::vector<float> t(B), p(B);
  std::vector<std::int64_t> k(B), seed_v(B), step_v(B);
  for (std::int64_t b = 0; b < B; ++b) {
    t[b] = static_cast<float>(o[b].temperature), k[b] = o[b].top_k, p[b] = static_cast<float>(o[b].top_p);
    seed_v[b] = 77 + b % 2, step_v[b] = 5 + b;
  }
  const Tensor seeds = i64_tensor(seed_v), steps = i64_tensor(step_v), out = ng::empty({B}, DType::i32);
  ng::ops::sample_rows_out(logits, seeds, steps,
                           {.temperature = f32_tensor(t), .top_k = i64_tensor(k), .top_p = f32_tensor(p),
                            .advance_steps = true},
                           out);
  const Tensor greedy = ng::ops::argmax(logits);
  ng::device_synchronize();
  EXPECT_EQ(ints(out)[0], ints(greedy)[0]);  // temperature 0
  for (std::int64_t b = 0; b < B; ++b) {
    const std::vector<float> row(lv.begin() + b * V, lv.begin() + (b + 1) * V);
    if (b > 0) {
      EXPECT_EQ(ints(out)[b], reference_sample(row, o[b], ng::ops::sampling_uniform(seed_v[b], step_v[b], 0)))
          << "row " << b;
    }
    EXPECT_EQ(steps.data_ptr<std::int64_t>()[b], step_v[b] + 1);
  }
}

TEST(SampleRows, ARowsDrawDoesNotDependOnItsPlaceInTheBatch) {
  const std::int64_t V = 3000;
  const Tensor logits = random_tensor({4, V}, 7, DType::f32, -3, 3);
  const Tensor t = f32_tensor({0.9f, 0.9f, 0.9f, 0.9f}), p = f32_tensor({0.95f, 0.95f, 0.95f, 0.95f});
  const Tensor out = ng::empty({4}, DType::i32);
  ng::ops::sample_rows_out(logits, i64_tensor({3, 3, 3, 3}), i64_tensor({8, 8, 8, 8}),
                           {.temperature = t, .top_p = p}, out);
  ng::device_synchronize();
  // Each row alone, as the only row of its own batch: the same token.
  const auto lv = floats(logits);
  for (std::int64_t b = 0; b < 4; ++b) {
    const Tensor one = make_tensor(std::vector<float>(lv.begin() + b * V, lv.begin() + (b + 1) * V), {1, V});
    const Tensor alone = ng::empty({1}, DType::i32);
    ng::ops::sample_rows_out(one, i64_tensor({3}), i64_tensor({8}), {.temperature = f32_tensor({0.9f}),
                                                                    .top_p = f32_tensor({0.95f})},
                             alone);
    ng::device_synchronize();
    EXPECT_EQ(ints(alone)[0], ints(out)[b]) << "row " << b;
  }
}

TEST(SampleRows, ValuesNoHostCheckedReadAsTheNearestSetting) {
  const std::int64_t V = 500;
  const Tensor logits = random_tensor({4, V}, 8, DType::f32, -2, 2);
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor seeds = i64_tensor({1, 1, 1, 1}), steps = i64_tensor({0, 0, 0, 0});
  const Tensor out = ng::empty({4}, DType::i32), ref = ng::empty({4}, DType::i32);
  // NaN, -1, inf temperatures: greedy; top_k 9999 / -3: none; top_p 0 / 1.5: none.
  ng::ops::sample_rows_out(logits, seeds, steps,
                           {.temperature = f32_tensor({std::nanf(""), -1.0f, inf, 1.25f}),
                            .top_k = i64_tensor({0, 0, 0, 9999}), .top_p = f32_tensor({1, 1, 1, 1.5f})},
                           out);
  ng::ops::sample_rows_out(logits, seeds, steps, {.temperature = f32_tensor({0, 0, 0, 1.25f})}, ref);
  const Tensor greedy = ng::ops::argmax(logits);
  ng::device_synchronize();
  for (int b = 0; b < 3; ++b) EXPECT_EQ(ints(out)[b], ints(greedy)[b]) << "row " << b;
  EXPECT_EQ(ints(out)[3], ints(ref)[3]);
}

TEST(SampleRows, CapturedGraphReadsTheParametersTheHostWroteBeforeEachReplay) {
  const std::int64_t V = 400;
  const Tensor logits = random_tensor({2, V}, 9, DType::f32, -1, 1);
  const auto lv = floats(logits);
  const Tensor seeds = i64_tensor({4, 4}), steps = i64_tensor({0, 0}), out = ng::empty({2}, DType::i32);
  const Tensor t = f32_tensor({0, 0}), k = i64_tensor({0, 0});
  ng::Graph g;
  {
    ng::CaptureScope c(g);
    ng::ops::sample_rows_out(logits, seeds, steps, {.temperature = t, .top_k = k}, out);
  }
  const Tensor greedy = ng::ops::argmax(logits);
  for (int r = 0; r < 6; ++r) {
    const float temp = r % 2 ? 1.5f : 0.0f;  // greedy and sampled by turns, no re-capture or update
    t.data_ptr<float>()[0] = temp, k.data_ptr<std::int64_t>()[0] = r % 3 == 2 ? 10 : 0;
    steps.data_ptr<std::int64_t>()[0] = r;
    g.replay();
    ng::device_synchronize();
    const std::vector<float> row(lv.begin(), lv.begin() + V);
    const SamplingOptions o{.temperature = temp, .top_k = r % 3 == 2 ? 10 : 0};
    const std::int32_t want = temp == 0 ? ints(greedy)[0] : reference_sample(row, o, ng::ops::sampling_uniform(4, r, 0));
    EXPECT_EQ(ints(out)[0], want) << "replay " << r;
    EXPECT_EQ(ints(out)[1], ints(greedy)[1]);
  }
}

TEST(SampleRows, AdjustmentListsChangeACopyOfTheirRowsAsTheHeaderSays) {
  // Four rows: greedy with a bias that makes a low token win; no list (count 0); sampled with
  // scales (positive and negative logits) and adds; greedy with a token outside the vocabulary
  // (skipped) and a count past the capacity (clamped). Each row's token is that of the same op
  // without lists on logits adjusted here, and the logits are left as they were. Captured, a
  // replay reads the lists the host wrote before it.
  const std::int64_t B = 4, V = 1000, C = 5;
  const Tensor logits = random_tensor({B, V}, 11, DType::f32, -3, 3);
  const auto before = floats(logits);
  const Tensor count = int_tensor({2, 0, 4, 99}, {B});
  const Tensor tokens = int_tensor({17, 3, 0, 0, 0, /**/ 0, 0, 0, 0, 0, /**/ 1, 2, 3, 4, 0, /**/ 5, 2000, -1, 8, 9}, {B, C});
  const Tensor scale = make_tensor({1, 1, 1, 1, 1, /**/ 1, 1, 1, 1, 1, /**/ 1.5f, 0.5f, 2, 1, 1, /**/ 1, 1, 1, 3, 1}, {B, C});
  const Tensor add = make_tensor({50, -1, 0, 0, 0, /**/ 0, 0, 0, 0, 0, /**/ 0.25f, 0, -2, 9, 0, /**/ 7, 1, 1, 0, -0.5f}, {B, C});
  const std::vector<float> temp{0, 0.8f, 1.3f, 0};
  const Tensor seeds = i64_tensor({5, 6, 7, 8}), steps = i64_tensor({1, 2, 3, 4});
  // The adjusted rows, as the header's formula reads.
  std::vector<float> want = before;
  const auto* cp = count.data_ptr<std::int32_t>();
  const auto* tp = tokens.data_ptr<std::int32_t>();
  const auto* sp = scale.data_ptr<float>();
  const auto* ap = add.data_ptr<float>();
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < std::min<std::int64_t>(cp[b], C); ++i) {
      const std::int32_t t = tp[b * C + i];
      if (t < 0 || t >= V) continue;
      float& z = want[static_cast<std::size_t>(b * V + t)];
      z = (z > 0 ? z / sp[b * C + i] : z * sp[b * C + i]) + ap[b * C + i];
    }
  const Tensor adjusted = make_tensor(want, {B, V});
  const Tensor ref = ng::empty({B}, DType::i32), out = ng::empty({B}, DType::i32);
  ng::ops::sample_rows_out(adjusted, seeds, steps, {.temperature = f32_tensor(temp)}, ref);
  const ng::ops::LogitAdjustRows lists{.count = count, .tokens = tokens, .scale = scale, .add = add};
  ng::ops::sample_rows_out(logits, seeds, steps, {.temperature = f32_tensor(temp), .adjust = lists}, out);
  ng::device_synchronize();
  EXPECT_EQ(ints(out), ints(ref));
  EXPECT_EQ(ints(out)[0], 17);  // the +50 bias
  EXPECT_EQ(floats(logits), before);
  // Captured: the lists are read at replay.
  const Tensor t = f32_tensor({0, 0, 0, 0});
  ng::Graph g;
  {
    ng::CaptureScope c(g);
    ng::ops::sample_rows_out(logits, seeds, steps, {.temperature = t, .adjust = lists}, out);
  }
  for (std::int32_t winner : {40, 41, 999}) {
    for (std::int64_t b = 0; b < B; ++b) {
      count.data_ptr<std::int32_t>()[b] = 1;
      tokens.data_ptr<std::int32_t>()[b * C] = winner;
      scale.data_ptr<float>()[b * C] = 1;
      add.data_ptr<float>()[b * C] = 100;
    }
    g.replay();
    ng::device_synchronize();
    EXPECT_EQ(ints(out), std::vector<std::int32_t>(B, winner));
  }
}

TEST(SampleRows, AdjustmentListArgumentErrors) {
  const Tensor logits = ng::empty({2, 10}, DType::f32);
  const Tensor seeds = i64_tensor({1, 2}), steps = i64_tensor({0, 0}), out = ng::empty({2}, DType::i32);
  const Tensor tokens = int_tensor({0, 0, 0, 0}, {2, 2}), scale = make_tensor({1, 1, 1, 1}, {2, 2});
  using ng::ops::sample_rows_out;
  EXPECT_ARG_ERROR(sample_rows_out(logits, seeds, steps,
                                   {.temperature = f32_tensor({1, 2}),
                                    .adjust = {.count = i64_tensor({0, 0}), .tokens = tokens, .scale = scale, .add = scale}},
                                   out),
                   "sample_rows: adjust.count = int64[2]: must be a contiguous int32 tensor of 2 elements");
  EXPECT_ARG_ERROR(sample_rows_out(logits, seeds, steps,
                                   {.temperature = f32_tensor({1, 2}),
                                    .adjust = {.count = int_tensor({0, 0}, {2}), .tokens = scale, .scale = scale, .add = scale}},
                                   out),
                   "sample_rows: adjust.tokens = float32[2, 2]: must be a contiguous int32 [2, capacity]");
  EXPECT_ARG_ERROR(sample_rows_out(logits, seeds, steps,
                                   {.temperature = f32_tensor({1, 2}),
                                    .adjust = {.count = int_tensor({0, 0}, {2}), .tokens = tokens, .scale = scale,
                                               .add = make_tensor({1, 1}, {2})}},
                                   out),
                   "sample_rows: adjust.add = float32[2]: must be a contiguous float32 tensor shaped as adjust.tokens");
}

TEST(SampleRows, ArgumentErrors) {
  const Tensor logits = ng::empty({2, 10}, DType::f32);
  const Tensor seeds = i64_tensor({1, 2}), steps = i64_tensor({0, 0}), out = ng::empty({2}, DType::i32);
  using ng::ops::sample_rows_out;
  EXPECT_ARG_ERROR(sample_rows_out(logits, seeds, steps, {}, out), "sample_rows: temperature is undefined");
  EXPECT_ARG_ERROR(sample_rows_out(logits, seeds, steps, {.temperature = i64_tensor({1, 2})}, out),
                   "sample_rows: temperature = int64[2]: must be a contiguous float32 tensor of 2 elements");
  EXPECT_ARG_ERROR(sample_rows_out(logits, seeds, steps, {.temperature = f32_tensor({1, 2}), .top_k = f32_tensor({1, 2})},
                                   out),
                   "sample_rows: top_k = float32[2]: must be a contiguous int64 tensor of 2 elements");
  EXPECT_ARG_ERROR(sample_rows_out(logits, seeds, steps, {.temperature = f32_tensor({1, 2}), .top_p = f32_tensor({1})},
                                   out),
                   "sample_rows: top_p = float32[1]: must be a contiguous float32 tensor of 2 elements");
}

TEST(Sampling, ArgumentErrors) {
  const Tensor logits = ng::empty({2, 10}, DType::f32);
  const Tensor seeds = i64_tensor({1, 2}), steps = i64_tensor({0, 0});
  const Tensor out = ng::empty({2}, DType::i32);
  using ng::ops::sample_out;
  EXPECT_ARG_ERROR(ng::ops::argmax_out(ng::empty({10}, DType::f32), out),
                   "argmax: logits = float32[10]: must be a contiguous float32 [batch, vocab]");
  EXPECT_ARG_ERROR(ng::ops::argmax_out(logits, ng::empty({3}, DType::i32)),
                   "argmax: out = int32[3]: must have 2 elements (one token per row of logits)");
  EXPECT_ARG_ERROR(sample_out(logits, seeds, steps, out, {.temperature = -1}),
                   "sample: temperature = -1: must be finite and >= 0");
  EXPECT_ARG_ERROR(sample_out(logits, seeds, steps, out, {.top_k = 11}), "sample: top_k = 11: must be in [0, 10]");
  EXPECT_ARG_ERROR(sample_out(logits, seeds, steps, out, {.top_p = 0}), "sample: top_p = 0: must be in (0, 1]");
  EXPECT_ARG_ERROR(sample_out(logits, int_tensor({1, 2}, {2}), steps, out, {}),
                   "sample: seeds = int32[2]: must be a contiguous int64 tensor of 2 elements");
  EXPECT_ARG_ERROR(sample_out(logits, seeds, i64_tensor({0}), out, {}),
                   "sample: steps = int64[1]: must be a contiguous int64 tensor of 2 elements");
}

}  // namespace
}  // namespace llm_ops_test
