// The parameter block of the linear kernels (weight_quant_linear, linear) and their SIMD entry
// point (linear_simd.cpp). Note [Linear kernels].
//
// Note [Linear kernels]
// y[t, n] = sum_k x[t, k] * w[n, k] (+ bias[n]) for t < T, n < N: x float32 rows, w rows of
// Q4_0 / Q4_1 / Q8_0 / Q5_0 / Q4_K / Q5_K / Q6_K blocks or float32 / float16 / bfloat16 values,
// accumulated in float32.
//   - Every output is one chain of fused multiply-adds over the vectors of k in ascending order
//     (lane i of the accumulator sums k = i mod L), then one horizontal sum, then the bias. The
//     weight values entering the chain are the exact dequantised (or converted) values — ggml's
//     dequantize_row_* bit for bit — wherever they are computed. So y[t, n] depends on x[t], w[n]
//     and the SIMD target only: not on T, on which other rows share the call, on the chunking or
//     on the thread count (batch invariant; the GEMV and the GEMM paths agree bitwise).
//   - GEMV (T <= kGemvMaxRows, decode): chunks of `chunk_rows` weight rows; each chunk streams its
//     rows once, dequantising each block in registers (16-lane targets: a 16-entry lookup table
//     n -> n * d + m per block, one permute per 16 nibbles; others: convert, multiply, add), for
//     tiles of R weight rows x TB rows of x (all T rows, TB at a time, the tile's weight bytes
//     staying in L1 between the TB passes), prefetching the weights a few KiB ahead (the hardware
//     prefetcher alone left memory and compute serialised: 0.65 of a core's read rate).
//     Per block and weight row at T = 1 (AVX-512): 7 vector instructions on the two 512-bit ports
//     (widen, shift, table build, 2 permutes, 2 FMAs), about 3.5 cycles.
//   - GEMM (T > kGemvMaxRows, prefill): chunks of `chunk_rows` (kGemmTileRows) weight rows, each
//     dequantised once into a float32 tile and reused for all T rows in R x TB register tiles.
//   - Block scales (IEEE halves) are converted through a 65,536-entry table (half_table), so a
//     scale costs two loads and no vector-port work.
//   - Weights in the rows16 layout (p.packed; Note [Packed weights] in linear_packed_simd.cpp):
//     each chunk (whole groups of 16 rows) first unpacks its rows into ggml's layout in the
//     executing thread's buffer, then runs as above, so the results are the rows layout's bits.
// Chunks are a pure function of (T, N, K, format, layout) and outputs do not depend on them anyway.
#pragma once

#include <cstddef>
#include <cstdint>

#include "npugraph/dtype.hpp"
#include "npugraph/ops/ggml_type.hpp"

namespace npugraph {
class ExecContext;  // npugraph/kernel.hpp (not included: nvcc compiles this header too)
}  // namespace npugraph

namespace npugraph::ops::linear_impl {

// The weight's type is its ggml type number: the kernels dispatch on the quantisation table's row
// (npugraph/ops/quant_table.hpp, Note [Quantisation table]): every row with a linear kernel has a
// SIMD source for the float32 paths (linear_simd.cpp), those with q8_kernel the q8-activation GEMV
// (linear_q8_simd.cpp), those with rows16 the packed one (linear_packed_simd.cpp).
// The quantised activations of the GEMV with q8 activations (Note [Q8 activations] in
// linear_q8_simd.cpp): row t, block b of x as 32 int8 quants (at q + (t * nb + b) * 32) and the
// scale d[t * nb + b].
struct QuantRows {
  std::int8_t* q = nullptr;
  float* d = nullptr;
  // Q4_K / Q5_K / Q6_K on AVX-512 targets: per (row, super-block) 64 + 16 floats derived from q and
  // d (Note [Q8 super-blocks] in linear_q8_super-inl.h); on AVX2 the 16 of xs only; null elsewhere.
  const float* super_dxe = nullptr;
  const float* super_xs = nullptr;
};

inline constexpr std::int64_t kGemvMaxRows = 16;   // rows of x served by the GEMV path
inline constexpr std::int64_t kGemmTileRows = 16;  // weight rows per GEMM tile

struct LinearParams {
  const float* x = nullptr;       // T rows of K floats, x_stride apart
  const std::byte* w = nullptr;   // N rows of w_row_bytes
  const float* bias = nullptr;    // N floats or null
  void* y = nullptr;              // T rows of N y_dtype values, y_stride apart
  const float* half_table = nullptr;  // half bits -> float (block scales)
  std::int64_t T = 0, N = 0, K = 0;
  std::int64_t x_stride = 0, y_stride = 0, w_row_bytes = 0;
  std::int64_t chunk_rows = 0;    // weight rows per parallel_for chunk
  GgmlType type = GgmlType::F32;   // the weight's row of the quantisation table
  DType y_dtype = DType::f32;
  bool q8_activations = false;    // quantised weights: linear_q8_simd.cpp (rows layout, T <= kGemvMaxRows),
                                  // linear_packed_simd.cpp (rows16, every T)
  bool packed = false;            // w in QuantLayout::rows16 (Note [Packed weights])
};

// QuantLayout::rows16 (Note [Packed weights] in linear_packed_simd.cpp): groups of kPackRows rows.
inline constexpr std::int64_t kPackRows = 16;
// The float32 paths unpack rows16 weights chunk by chunk: GEMM chunks must be whole groups.
static_assert(kGemmTileRows % kPackRows == 0);

// The f16 -> f32 table (built on first use; call it on the host before launching).
const float* half_to_float_table();

// Runs the kernel on the best SIMD target of the machine (Highway dynamic dispatch).
void run_linear(const LinearParams& p, const ExecContext& ctx);

// The GEMV with q8 activations (p.q8_activations; linear_q8_simd.cpp).
void run_linear_q8(const LinearParams& p, const ExecContext& ctx);

// The same for rows16 weights (p.packed; linear_packed_simd.cpp).
void run_linear_packed_q8(const LinearParams& p, const ExecContext& ctx);

// Quantises T rows of K floats (K a multiple of 32, rows x_stride apart) into `out` (T * K quants,
// T * K / 32 scales), as run_linear_q8 does on the machine's SIMD target.
void quantize_rows_q8(const float* x, std::int64_t T, std::int64_t K, std::int64_t x_stride,
                      const QuantRows& out);

// The CUDA launcher of both kernels (linear_cuda.cu; built with the CUDA backend only). It does
// not read half_table (a host pointer): the device converts block scales itself.
void linear_cuda(const void* params, std::size_t size, const void* device_params, void* stream);

}  // namespace npugraph::ops::linear_impl
