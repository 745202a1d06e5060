// The elementwise ops' plan: the operands checked once, and what they decide (the output's shape
// and dtype, the element count). Host only; never reads a tensor's contents.
#pragma once

#include <cstdint>

#include "npugraph/tensor.hpp"

namespace npugraph::ops::elementwise {

struct ElementwisePlan {
  Shape shape;               // every operand's and the output's
  DType dtype = DType::f32;  // float32, float16 or bfloat16
  std::int64_t n = 0;        // elements
};

// Plans `op` from its first operand x (named x_name): defined, contiguous, a floating dtype.
// Throws ArgumentError naming the operand, the value and the rule.
ElementwisePlan plan_elementwise(const char* op, const Tensor& x, const char* x_name);
// Another operand, or the output, of the planned op: x's dtype and shape, contiguous.
void check_like(const char* op, const Tensor& t, const char* name, const Tensor& x,
                const char* x_name);

}  // namespace npugraph::ops::elementwise
