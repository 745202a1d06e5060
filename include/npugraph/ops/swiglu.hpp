// SwiGLU, torch_npu's npu_swiglu: x = [a, b] split in two halves along the last dim,
//   out = silu(a) * b = a / (1 + exp(-a)) * b
// x [..., 2H] float32 / float16 / bfloat16 (contiguous) -> out [..., H] of any float dtype; computed
// in float32 with Highway's vectorised exp. The two-input form takes gate (a) and up (b) as separate
// tensors of one shape (the decode engine's gate and up projections). One kernel launch each,
// capturable.
#pragma once

#include "npugraph/kernel.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph::ops {

void swiglu_out(const Tensor& x, const Tensor& out);
// `dim` must be the last dim (-1 or x.dim() - 1): the only split the kernel does.
Tensor npu_swiglu(const Tensor& x, int dim = -1);

// out = silu(gate) * up
void swiglu_out(const Tensor& gate, const Tensor& up, const Tensor& out);
Tensor swiglu(const Tensor& gate, const Tensor& up);

// GeGLU (Gemma's FFN): out = gelu_tanh(gate) * up, GELU's tanh approximation
// 0.5 * a * (1 + tanh(sqrt(2 / pi) * (a + 0.044715 * a^3))), the same two forms and kernel (cpu only:
// UnsupportedError on a cuda device).
void geglu_out(const Tensor& x, const Tensor& out);
void geglu_out(const Tensor& gate, const Tensor& up, const Tensor& out);

const KernelDef& swiglu_kernel();

}  // namespace npugraph::ops
