// Random block-quantised weights for the linear tests (test_linear.cpp, test_linear_q8.cpp,
// test_linear_packed.cpp), and the checks the q8 suites share.
#pragma once

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "npugraph/npugraph.hpp"
#include "npugraph/ops/linear.hpp"
#include "npugraph/ops/quant.hpp"
#include "ops/llm/llm_ops_util.hpp"

namespace llm_ops_test {

inline std::uint16_t half_bits(float f) { return ng::f32_to_f16_bits(f); }

// Random blocks of `type` with finite half scales (any bit pattern for the quants and the K-quants'
// sub-block scales). The K-quants' scales are smaller: their values are d * (6- or 8-bit scale) * q.
inline std::vector<std::byte> random_blocks(ng::ops::QuantType type, std::int64_t blocks, std::uint32_t seed) {
  using ng::ops::QuantType;
  std::mt19937 gen(seed);
  const std::size_t bb = ng::ops::quant_block_bytes(type);
  std::vector<std::byte> out(static_cast<std::size_t>(blocks) * bb);
  for (auto& b : out) b = static_cast<std::byte>(gen() & 0xff);
  const bool k = ng::ops::quant_block_size(type) == ng::ops::kQuantBlockK;
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (std::int64_t i = 0; i < blocks; ++i) {
    std::byte* blk = out.data() + i * static_cast<std::int64_t>(bb);
    const float f = k ? 1.0f / 64 : 1.0f;
    const std::uint16_t d = half_bits(scale(gen) * f), m = half_bits(scale(gen) * 10 * f);
    const std::size_t d_at = type == QuantType::q6_k ? bb - 2 : 0;  // Q6_K keeps d last
    std::memcpy(blk + d_at, &d, 2);
    if (type == QuantType::q4_1 || type == QuantType::q4_k || type == QuantType::q5_k) std::memcpy(blk + 2, &m, 2);
  }
  return out;
}

// A QuantWeight over a copy of `size` bytes.
inline ng::ops::QuantWeight weight_from(ng::ops::QuantType type, const void* bytes, std::size_t size,
                                        std::int64_t rows, std::int64_t cols) {
  Tensor t = ng::empty({static_cast<std::int64_t>(size)}, DType::u8);
  std::memcpy(t.data(), bytes, size);
  return ng::ops::QuantWeight(t, type, rows, cols);
}

inline ng::ops::QuantWeight random_weight(ng::ops::QuantType type, std::int64_t rows, std::int64_t cols,
                                          std::uint32_t seed) {
  const std::vector<std::byte> b = random_blocks(type, rows * cols / ng::ops::quant_block_size(type), seed);
  return weight_from(type, b.data(), b.size(), rows, cols);
}

// Captures weight_quant_linear_out(x1, w) -> y as a task group, updates it to x2 and replays: y is
// bitwise the eager result on x2.
inline void expect_updated_replay_matches_eager(const ng::ops::QuantWeight& w, const Tensor& x1,
                                                const Tensor& x2, const Tensor& y,
                                                const ng::ops::QuantLinearOptions& options) {
  ng::Graph g;
  ng::TaskGroupHandle handle;
  {
    ng::CaptureScope c(g);
    ng::task_group_begin(c.stream());
    ng::ops::weight_quant_linear_out(x1, w, {}, y, options);
    handle = ng::task_group_end(c.stream());
  }
  const ng::Stream s = ng::Stream::create();
  {
    ng::StreamGuard on(s);
    ng::task_update_begin(s, handle);
    ng::ops::weight_quant_linear_out(x2, w, {}, y, options);
    ng::task_update_end(s);
  }
  s.synchronize();
  g.replay();
  ng::device_synchronize();
  const Tensor eager = ng::ops::weight_quant_linear(x2, w, {}, y.dtype(), options);
  ng::device_synchronize();
  EXPECT_TRUE(ngtest::bitwise_equal(y, eager));
}

// Two threads issue 100 calls each on their own streams at once, over `w`: every result is bitwise
// the one a single thread gets (the kernels' per-call buffers belong to the launching thread).
inline void expect_threads_get_single_threaded_bits(const ng::ops::QuantWeight& w, std::uint32_t seed,
                                                    const ng::ops::QuantLinearOptions& options) {
  constexpr int kCalls = 100;
  const std::int64_t K = w.cols();
  std::vector<Tensor> xs[2], want[2], got[2];
  for (int i = 0; i < 2; ++i)
    for (int c = 0; c < kCalls; ++c) {
      xs[i].push_back(random_tensor({1 + (c + i) % 4, K}, seed + 100 * static_cast<std::uint32_t>(i) + static_cast<std::uint32_t>(c)));
      want[i].push_back(ng::ops::weight_quant_linear(xs[i][c], w, {}, DType::f32, options));
      got[i].push_back(ng::empty(want[i][c].shape(), DType::f32));
    }
  ng::device_synchronize();
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      const ng::Stream s = ng::Stream::create();
      ng::StreamGuard on(s);
      for (int c = 0; c < kCalls; ++c) ng::ops::weight_quant_linear_out(xs[i][c], w, {}, got[i][c], options);
      s.synchronize();
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 2; ++i)
    for (int c = 0; c < kCalls; ++c) EXPECT_TRUE(ngtest::bitwise_equal(got[i][c], want[i][c])) << i << " " << c;
}

}  // namespace llm_ops_test
