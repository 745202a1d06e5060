// Linear layers: y = x · W^T (+ bias) with W [N, K] given as block-quantised ggml blocks
// (weight_quant_linear) or as float32 / float16 / bfloat16 values (linear).
//
// torch_npu's weight-quantised matmul is npu_weight_quant_batchmatmul(x, weight, antiquant_scale,
// ...) with an int8/int4 weight [K, N] and separate scale tensors; the GGUF model files this engine
// runs store weights as [N, K] rows of self-describing blocks instead (quant.hpp), so this op takes
// a QuantWeight and follows torch.nn.functional.linear's convention (W^T, optional bias).
//
// Activations stay float32 (they are never quantised): x float32 [..., K] (contiguous), out
// [..., N] float32, float16 or bfloat16 (contiguous, the leading dims of x), bias float32 [N] or
// undefined. Accumulation is float32; each output is a pure function of its row of x, its row of W
// and the machine's SIMD target — not of how many rows the call has (Note [Linear kernels] in
// src/ops/linear/linear_params.hpp). Rows T <= 16 run a GEMV that streams W once per call; more
// rows run a blocked GEMM that dequantises each tile of W once.
//
// Both are one kernel launch on the current stream, capturable; x, W, bias and out are held by the
// launch until it has run (docs/semantics.md §10).
#pragma once

#include "npugraph/kernel.hpp"
#include "npugraph/ops/quant.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph::ops {

// out[t, n] = sum_k x[t, k] * dequant(weight)[n, k] + bias[n]
void weight_quant_linear_out(const Tensor& x, const QuantWeight& weight, const Tensor& bias,
                             const Tensor& out);
Tensor weight_quant_linear(const Tensor& x, const QuantWeight& weight, const Tensor& bias = {},
                           DType out_dtype = DType::f32);

// The same for a float32 / float16 / bfloat16 weight [N, K] (contiguous); K any size.
void linear_out(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out);
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              DType out_dtype = DType::f32);

// Rows of x up to which the decode GEMV runs (above: the prefill GEMM).
inline constexpr std::int64_t kLinearGemvMaxRows = 16;

const KernelDef& weight_quant_linear_kernel();
const KernelDef& linear_kernel();

}  // namespace npugraph::ops
