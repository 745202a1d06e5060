// Helpers shared by the FIA tests: host-filled tensors, read-back as double, layout shapes, and an
// error matcher that checks an ArgumentError's message.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "npugraph/npugraph.hpp"

namespace fia_test {

using npugraph::DType;
using npugraph::Shape;
using npugraph::Tensor;

// The shape of a (b, heads, seq, d) tensor in `layout`.
Shape layout_shape(const std::string& layout, std::int64_t B, std::int64_t heads, std::int64_t seq,
                   std::int64_t D);

// `x` rounded to `dtype` (exactly as the tensor stores it), back as double.
double round_to(double x, DType dtype);

// A contiguous CPU tensor over host memory it owns (from_blob), holding `values` rounded to `dtype`;
// `values` is rounded in place so the caller keeps exactly what the tensor holds.
Tensor host_tensor(std::vector<double>& values, const Shape& shape, DType dtype);
// Uniform random values in [lo, hi), rounded to dtype.
Tensor random_tensor(std::vector<double>& values, const Shape& shape, DType dtype,
                     std::uint32_t seed, double lo = -1.0, double hi = 1.0);
// A tensor of `shape` filled with `value` (e.g. NaN to see what a kernel leaves untouched).
Tensor filled_tensor(const Shape& shape, DType dtype, double value);
// A contiguous tensor's elements as double.
std::vector<double> read_back(const Tensor& t);
// True when both tensors hold the same bytes (contiguous, same dtype and shape).
bool bitwise_equal(const Tensor& a, const Tensor& b);

// Succeeds when f throws npugraph::ArgumentError whose message contains every part.
::testing::AssertionResult throws_arg_error(const std::function<void()>& f,
                                            std::initializer_list<std::string> parts);

}  // namespace fia_test
