// Small kernels on contiguous tensors of one floating dtype (f32, f16, bf16), computed in f32.
// Each is one kernel launch on the current stream, so graphs of many tasks can be built from them.
#pragma once

#include "npugraph/kernel.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph::ops {

// out = a + b
void add_out(const Tensor& a, const Tensor& b, const Tensor& out);
Tensor add(const Tensor& a, const Tensor& b);
// out = x * alpha (alpha lives in the parameter block: updatable)
void scale_out(const Tensor& x, double alpha, const Tensor& out);
Tensor scale(const Tensor& x, double alpha);

// The kernel identities, for tests and explicit graph building.
const KernelDef& add_kernel();
const KernelDef& scale_kernel();
// A kernel that does nothing (graph and dispatch benchmarks).
const KernelDef& noop_kernel();

}  // namespace npugraph::ops
