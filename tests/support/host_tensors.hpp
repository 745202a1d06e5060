// Tensors the tests fill and read on the host (no stream work): any dtype, from values or random,
// and read back as double; the float32 shorthands of the runtime tests.
#pragma once

#include <cstdint>
#include <vector>

#include "npugraph/npugraph.hpp"

namespace ngtest {

using npugraph::DType;
using npugraph::Shape;
using npugraph::Tensor;

// `x` rounded to `dtype` (exactly as the tensor stores it), back as double. Integer dtypes round
// to the nearest integer and saturate; bool stores x != 0.
double round_to(double x, DType dtype);

// A contiguous CPU tensor over host memory it owns (from_blob), holding `values` rounded to `dtype`;
// `values` is rounded in place so the caller keeps exactly what the tensor holds.
Tensor host_tensor(std::vector<double>& values, const Shape& shape, DType dtype);
// Uniform random values in [lo, hi), rounded to dtype (integer dtypes: integers in [lo, hi]).
Tensor random_tensor(std::vector<double>& values, const Shape& shape, DType dtype,
                     std::uint32_t seed, double lo = -1.0, double hi = 1.0);
// A tensor of `shape` filled with `value` (e.g. NaN to see what a kernel leaves untouched).
Tensor filled_tensor(const Shape& shape, DType dtype, double value);
// An int32 / int64 tensor holding exactly these values.
Tensor int_tensor(const std::vector<std::int64_t>& values, const Shape& shape, DType dtype);
// A contiguous tensor's elements as double.
std::vector<double> read_back(const Tensor& t);
// |a - b| <= 2 eps max(1, |b|) elementwise, infinities equal; the first 10 failures reported as
// "<what>[i] = a<where>, the reference's b" (gtest non-fatal failures).
void expect_close(const Tensor& a, const Tensor& b, double eps, const char* what, const char* where = "");

// A float32 tensor holding `values` (the allocator's memory), and a float32 tensor's values.
Tensor f32_tensor(const std::vector<float>& values);
std::vector<float> values_of(const Tensor& t);

}  // namespace ngtest
