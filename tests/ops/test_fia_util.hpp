// Helpers shared by the FIA tests: host-filled tensors of any dtype, read-back as double, layout
// shapes, the compressed causal mask, and an error matcher that checks an ArgumentError's message.
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

// The shape of a (b, heads, seq, d) tensor in `layout` (BSH, BSND, BNSD, NSD, TND, NTD, NBSD;
// TND/NTD: seq is T and B is ignored; NSD: B must be 1).
Shape layout_shape(const std::string& layout, std::int64_t B, std::int64_t heads, std::int64_t seq,
                   std::int64_t D);

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
// True when both tensors hold the same bytes (contiguous, same dtype and shape).
bool bitwise_equal(const Tensor& a, const Tensor& b);

// torch_npu's compressed mask for sparse_mode 2-4: bool [2048, 2048], 1 above the diagonal
// (built once; shared).
const Tensor& compressed_mask();

// Succeeds when f throws npugraph::ArgumentError whose message contains every part.
::testing::AssertionResult throws_arg_error(const std::function<void()>& f,
                                            std::initializer_list<std::string> parts);

}  // namespace fia_test
