// The parameter block of embedding (embedding.cpp) and its CUDA launcher (embedding_cuda.cu;
// built with the CUDA backend only).
#pragma once

#include <cstddef>
#include <cstdint>

#include "npugraph/dtype.hpp"

namespace npugraph::ops {
enum class QuantType : std::uint32_t;  // npugraph/ops/quant.hpp (not included: nvcc compiles this header)
}  // namespace npugraph::ops

namespace npugraph::ops::embedding_impl {

struct EmbeddingParams {
  const std::int32_t* ids = nullptr;
  const std::byte* table = nullptr;
  void* out = nullptr;
  std::int64_t T = 0, V = 0, H = 0, row_bytes = 0;
  bool quant = false;
  bool rows16 = false;  // a quantised table in the rows16 layout (cpu only): row_bytes is a ggml row's
  QuantType quant_type{};
  DType table_dtype = DType::f32, out_dtype = DType::f32;
};

void embedding_cuda(const void* params, std::size_t size, const void* device_params, void* stream);

}  // namespace npugraph::ops::embedding_impl
