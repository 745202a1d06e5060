// Linear layers: y = x · W^T (+ bias) with W [N, K] given as block-quantised ggml blocks
// (weight_quant_linear) or as float32 / float16 / bfloat16 values (linear).
//
// torch_npu's weight-quantised matmul is npu_weight_quant_batchmatmul(x, weight, antiquant_scale,
// ...) with an int8/int4 weight [K, N] and separate scale tensors; the GGUF model files this engine
// runs store weights as [N, K] rows of self-describing blocks instead (quant.hpp), so this op takes
// a QuantWeight and follows torch.nn.functional.linear's convention (W^T, optional bias).
//
// x float32 [..., K] (contiguous), out [..., N] float32, float16 or bfloat16 (contiguous, the
// leading dims of x), bias float32 [N] or undefined. By default activations stay float32: every
// weight is dequantised exactly and accumulated in float32, and each output is a pure function of
// its row of x, its row of W and the machine's SIMD target — not of how many rows the call has
// (Note [Linear kernels] in src/ops/linear/linear_params.hpp). Rows T <= 16 run a GEMV that
// streams W once per call; more rows run a blocked GEMM that dequantises each tile of W once.
//
// QuantLinearOptions{.activations = Activations::q8} makes the GEMV (T <= 16) quantise each block
// of 32 values of x to int8 and take integer dot products with the weights' quants, as llama.cpp's
// CPU backend does (Note [Q8 activations] in src/ops/linear/linear_q8_simd.cpp): on 8-lane SIMD
// targets (AVX2) about three times fewer instructions per weight byte, at the cost of x's
// quantisation error (about 1/254 of a block's largest |x|). Outputs still depend only on their row
// of x, their row of W and the SIMD target; on the rows layout, calls of more than 16 rows stay
// float32 (the GEMM is faster there). CPU only: on a CUDA device it throws UnsupportedError.
//
// A weight in the rows16 layout (pack_rows16, quant.hpp) runs that q8 GEMV with one weight row per
// SIMD lane (Note [Packed weights] in src/ops/linear/linear_packed_simd.cpp) for every number of
// rows, prefill's included (with VNNI 2-2.7x faster than the float32 GEMM at 128 rows): about three
// times fewer vector instructions per weight byte than the rows layout, whole-block integer sums and no
// lane sums, so its rounding differs from the rows layout's q8 result (not its float32 one: the
// float32 paths unpack rows16 weights chunk by chunk and give the rows layout's bits). On a CUDA
// device a rows16 weight is an UnsupportedError.
//
// Both are one kernel launch on the current stream, capturable; x, W, bias and out are held by the
// launch until it has run (docs/semantics.md §10).
#pragma once

#include "npugraph/kernel.hpp"
#include "npugraph/ops/quant.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph::ops {

// What enters weight_quant_linear's dot products from x.
enum class Activations : std::uint8_t {
  f32,  // x as it is (the default)
  q8,   // x quantised per block of 32 to int8 (rows layout: T <= 16 rows; rows16: every T; CPU)
};

struct QuantLinearOptions {
  Activations activations = Activations::f32;
};

// out[t, n] = sum_k x[t, k] * dequant(weight)[n, k] + bias[n]
void weight_quant_linear_out(const Tensor& x, const QuantWeight& weight, const Tensor& bias,
                             const Tensor& out, const QuantLinearOptions& options = {});
Tensor weight_quant_linear(const Tensor& x, const QuantWeight& weight, const Tensor& bias = {},
                           DType out_dtype = DType::f32, const QuantLinearOptions& options = {});

// The same for a float32 / float16 / bfloat16 weight [N, K] (contiguous); K any size.
void linear_out(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out);
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              DType out_dtype = DType::f32);

// Rows of x up to which the decode GEMV runs (above: the prefill GEMM).
inline constexpr std::int64_t kLinearGemvMaxRows = 16;

const KernelDef& weight_quant_linear_kernel();
const KernelDef& linear_kernel();

}  // namespace npugraph::ops
