// Helpers shared by the decode-engine op tests (tests/ops/llm): seeded random tensors, host reads
// of any float dtype, capture -> replay helpers.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "npugraph/npugraph.hpp"
#include "support/bitwise.hpp"
#include "support/throws.hpp"

// stmt must throw ArgumentError whose message contains every part.
#define EXPECT_ARG_ERROR(stmt, ...) \
  EXPECT_TRUE(ngtest::throws<::npugraph::ArgumentError>([&] { stmt; }, {__VA_ARGS__}))
// The same for a TaskError (a kernel's run-time failure raised by a synchronize).
#define EXPECT_TASK_ERROR(stmt, ...) \
  EXPECT_TRUE(ngtest::throws<::npugraph::TaskError>([&] { stmt; }, {__VA_ARGS__}))

namespace llm_ops_test {

namespace ng = npugraph;
using ng::DType;
using ng::Tensor;

// Values uniform in [lo, hi), seeded.
inline std::vector<float> random_values(std::size_t n, std::uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// A contiguous tensor of `dtype` holding `values` (rounded to the dtype), written on the host.
inline Tensor make_tensor(const std::vector<float>& values, ng::Shape shape, DType dtype = DType::f32) {
  Tensor t = ng::empty(shape, dtype);
  EXPECT_EQ(static_cast<std::size_t>(t.numel()), values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::f32: t.data_ptr<float>()[i] = values[i]; break;
      case DType::f16: t.data_ptr<ng::half>()[i] = ng::half(values[i]); break;
      case DType::bf16: t.data_ptr<ng::bfloat16>()[i] = ng::bfloat16(values[i]); break;
      default: ADD_FAILURE() << "make_tensor: not a float dtype";
    }
  }
  return t;
}

inline Tensor random_tensor(ng::Shape shape, std::uint32_t seed, DType dtype = DType::f32,
                            float lo = -1.0f, float hi = 1.0f) {
  return make_tensor(random_values(static_cast<std::size_t>(shape.numel()), seed, lo, hi), shape, dtype);
}

inline Tensor int_tensor(const std::vector<std::int32_t>& values, ng::Shape shape) {
  Tensor t = ng::empty(shape, DType::i32);
  std::memcpy(t.data(), values.data(), values.size() * sizeof(std::int32_t));
  return t;
}

// 1-D float32 / int64 tensors of the values, and an int32 tensor's values (the sampling tests').
inline Tensor f32_tensor(const std::vector<float>& v) {
  return make_tensor(v, {static_cast<std::int64_t>(v.size())});
}

inline Tensor i64_tensor(const std::vector<std::int64_t>& v) {
  Tensor t = ng::empty({static_cast<std::int64_t>(v.size())}, DType::i64);
  std::memcpy(t.data(), v.data(), v.size() * sizeof(std::int64_t));
  return t;
}

inline std::vector<std::int32_t> ints(const Tensor& t) {
  const auto* p = t.data_ptr<std::int32_t>();
  return {p, p + t.numel()};
}

// Element i of a float tensor (any float dtype), as float.
inline float at(const Tensor& t, std::int64_t i) {
  switch (t.dtype()) {
    case DType::f32: return t.data_ptr<float>()[i];
    case DType::f16: return static_cast<float>(t.data_ptr<ng::half>()[i]);
    case DType::bf16: return static_cast<float>(t.data_ptr<ng::bfloat16>()[i]);
    default: ADD_FAILURE() << "at: not a float dtype"; return 0;
  }
}

inline std::vector<float> floats(const Tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) v[static_cast<std::size_t>(i)] = at(t, i);
  return v;
}

inline Tensor zeros_like(const Tensor& t) {
  Tensor z = ng::empty(t.shape(), t.dtype());
  std::memset(z.data(), 0, z.nbytes());
  return z;
}

// Runs `issue` (which launches work writing `outs`) eagerly, then captures it into a graph and
// replays it twice (after zeroing the outputs): every replay's outputs must equal the eager ones
// bitwise. `reset` (optional) restores inputs the work modifies before each run.
inline void expect_replay_matches_eager(const std::vector<Tensor>& outs,
                                        const std::function<void()>& issue,
                                        const std::function<void()>& reset = {}) {
  if (reset) reset();
  issue();
  ng::device_synchronize();
  std::vector<std::vector<std::byte>> eager;
  for (const Tensor& o : outs) {
    const auto* p = static_cast<const std::byte*>(o.data());
    eager.emplace_back(p, p + o.nbytes());
  }
  ng::Graph g;
  {
    ng::CaptureScope c(g);
    issue();
  }
  for (int round = 0; round < 2; ++round) {
    if (reset) reset();
    for (const Tensor& o : outs) std::memset(o.data(), 0x5a, o.nbytes());
    g.replay();
    ng::device_synchronize();
    for (std::size_t i = 0; i < outs.size(); ++i)
      EXPECT_EQ(0, std::memcmp(outs[i].data(), eager[i].data(), eager[i].size()))
          << "output " << i << " of replay " << round << " differs from the eager run";
  }
}

}  // namespace llm_ops_test
