// The parameter block of rotary_embedding (rope.cpp) and its CUDA launcher (rope_cuda.cu; built
// with the CUDA backend only). Light on includes: nvcc compiles it (rope_cuda.cu).
#pragma once

#include <cstddef>
#include <cstdint>

#include "npugraph/dtype.hpp"

namespace npugraph::ops::rope_impl {

inline constexpr std::int64_t kMaxHeadDim = 1024;

struct RopeParams {
  const std::int32_t* positions = nullptr;
  const void* x = nullptr;
  void* out = nullptr;
  std::int64_t T = 0, heads = 0, D = 0, rot = 0;
  double theta = 0;
  bool neox = true;  // RopeStyle::neox pairs (i, i + rot / 2), else ::norm (2i, 2i + 1)
  DType x_dtype = DType::f32, out_dtype = DType::f32;
};

void rope_cuda(const void* params, std::size_t size, const void* device_params, void* stream);

}  // namespace npugraph::ops::rope_impl
