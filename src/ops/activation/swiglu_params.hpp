// The parameter block of the swiglu kernel and its SIMD entry point (swiglu_simd.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "npugraph/dtype.hpp"

namespace npugraph {
class ExecContext;  // npugraph/kernel.hpp (not included: nvcc compiles this header too)
}  // namespace npugraph

namespace npugraph::ops::swiglu_impl {

// The gate's activation: silu (SwiGLU) or GELU's tanh approximation (GeGLU, Gemma's FFN).
enum class GateFn : std::uint8_t { silu, gelu_tanh };

struct SwigluParams {
  const void* gate = nullptr;  // row r at gate + r * in_stride elements
  const void* up = nullptr;    // row r at up + r * in_stride elements
  void* out = nullptr;         // row r at out + r * H elements
  std::int64_t rows = 0, H = 0, in_stride = 0;
  DType in_dtype = DType::f32, out_dtype = DType::f32;
  GateFn fn = GateFn::silu;  // the cuda kernel runs silu only (geglu refuses cuda tensors)
};

// out = silu(gate) * up = gate * up / (1 + exp(-gate)), in float32 with Highway's Exp (argument
// clamped to [-88, 88]); or, with GateFn::gelu_tanh,
// out = 0.5 * gate * (1 + tanh(sqrt(2 / pi) * (gate + 0.044715 * gate^3))) * up with Highway's Tanh; the last partial vector of a row runs zero-padded through the same code,
// so every element gets the same formula. Rows are chunked by a function of H only.
void run_swiglu(const SwigluParams& p, const ExecContext& ctx);

// The CUDA launcher (swiglu_cuda.cu; built with the CUDA backend only).
void swiglu_cuda(const void* params, std::size_t size, const void* device_params, void* stream);

}  // namespace npugraph::ops::swiglu_impl
