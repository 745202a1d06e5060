// The parameter block of rms_norm / add_rms_norm (rms_norm.cpp) and their CUDA launchers
// (rms_norm_cuda.cu; built with the CUDA backend only, cmake/Cuda.cmake).
#pragma once

#include <cstddef>
#include <cstdint>

#include "npugraph/dtype.hpp"

namespace npugraph::ops::norm_impl {

struct RmsNormParams {
  const void* x1 = nullptr;
  const void* x2 = nullptr;     // add_rms_norm: the second addend
  const void* gamma = nullptr;
  void* y = nullptr;
  float* rstd = nullptr;        // or null
  void* x_out = nullptr;        // add_rms_norm: x1 + x2
  std::int64_t rows = 0, H = 0;
  double epsilon = 0;
  DType x_dtype = DType::f32, gamma_dtype = DType::f32, y_dtype = DType::f32,
        x_out_dtype = DType::f32;
};

// Rows [r0, r1) of float32 x, gamma, y (and x2, x_out for add) on the machine's SIMD target, with
// the scalar kernel's bits (Note [RMSNorm lanes] in rms_norm_simd.cpp).
void rms_norm_rows_f32(const RmsNormParams& p, bool add, std::int64_t r0, std::int64_t r1);

void rms_norm_cuda(const void* params, std::size_t size, const void* device_params, void* stream);
void add_rms_norm_cuda(const void* params, std::size_t size, const void* device_params, void* stream);

}  // namespace npugraph::ops::norm_impl
