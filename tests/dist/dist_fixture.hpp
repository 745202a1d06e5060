// What the dist tests share: the world communicator, and inputs whose sums over the ranks are exact
// in every dtype (multiples of 1/8 below 4 in magnitude: every partial sum of up to 8 ranks is
// representable in float16 and bfloat16, so MPI's reduction order — whatever it is — cannot change
// a bit, and the reference is the plain sum in double of every rank's input, each rank computing
// all ranks' inputs itself from (rank, index, salt)).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "npugraph/dist.hpp"
#include "npugraph/npugraph.hpp"
#include "support/bitwise.hpp"
#include "support/host_tensors.hpp"
#include "support/throws.hpp"

namespace dist_test {

namespace ng = npugraph;
namespace dist = npugraph::dist;
using ng::DType;
using ng::Shape;
using ng::Tensor;

// One element of rank r's input: k / 8 with k in [-30, 30].
inline double value(int rank, std::int64_t i, int salt) {
  const std::int64_t k = ((rank + 1) * 7919 + i * 104729 + salt * 31) % 61 - 30;
  return static_cast<double>(k) / 8.0;
}

// Rank r's input of `n` elements.
inline std::vector<double> input(int rank, std::int64_t n, int salt) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = value(rank, i, salt);
  return v;
}

inline Tensor input_tensor(int rank, const Shape& shape, DType dtype, int salt) {
  std::vector<double> v = input(rank, shape.numel(), salt);
  return ngtest::host_tensor(v, shape, dtype);
}

// Element-wise sum over ranks 0..size-1 of their inputs (n elements), in double.
inline std::vector<double> sum_over_ranks(int size, std::int64_t n, int salt) {
  std::vector<double> s(static_cast<std::size_t>(n), 0.0);
  for (int r = 0; r < size; ++r)
    for (std::int64_t i = 0; i < n; ++i) s[static_cast<std::size_t>(i)] += value(r, i, salt);
  return s;
}

inline Tensor expected(std::vector<double> values, const Shape& shape, DType dtype) {
  return ngtest::host_tensor(values, shape, dtype);
}

// Writes rank r's input (salt) into an existing contiguous tensor, on the host.
inline void refill(const Tensor& t, int rank, int salt) {
  const Tensor src = input_tensor(rank, t.shape(), t.dtype(), salt);
  std::memcpy(t.data(), src.data(), static_cast<std::size_t>(t.numel()) * ng::dtype_size(t.dtype()));
}

inline const dist::Communicator& world() {
  static const dist::Communicator comm = dist::Communicator::world();
  return comm;
}

}  // namespace dist_test
