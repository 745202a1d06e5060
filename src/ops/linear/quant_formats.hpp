// The block functions of each quantisation type (Note [Quantisation table] in quant_formats.cpp):
// host code shared by quant.cpp (dequantize_blocks, quantize), the float32 linear kernels and the
// embedding kernel.
#pragma once

#include <cstddef>
#include <cstdint>

#include "npugraph/ops/quant.hpp"

namespace npugraph::ops::quant_formats {

// `blocks` whole blocks at `src` (any alignment) -> blocks * block floats; ggml's values bitwise.
using DequantizeFn = void (*)(const std::byte* src, float* dst, std::int64_t blocks);
// blocks * block floats -> `blocks` whole blocks.
using QuantizeFn = void (*)(const float* src, std::byte* dst, std::int64_t blocks);

struct BlockFns {
  DequantizeFn dequantize = nullptr;
  QuantizeFn quantize = nullptr;
};

// The functions of a table type; {nullptr, nullptr} for a value outside the table.
BlockFns block_fns(QuantType type) noexcept;

}  // namespace npugraph::ops::quant_formats
