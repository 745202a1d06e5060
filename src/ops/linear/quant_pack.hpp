// The rows16 layout's byte mapping (QuantLayout, Note [Packed weights] in linear_packed_simd.cpp):
// host code shared by pack_rows16 / unpack_rows (quant.cpp) and the linear kernel's unpacking of a
// rows16 weight for its float32 paths (linear.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "npugraph/ops/quant.hpp"

namespace npugraph::ops::quant_pack {

// Bytes of a rows16 weight of `rows` rows of `row_bytes` (whole groups of 16 rows).
inline std::int64_t packed_bytes(std::int64_t rows, std::int64_t row_bytes) {
  return (rows + kQuantPackRows - 1) / kQuantPackRows * kQuantPackRows * row_bytes;
}

// Rows [row0, row0 + count) of a rows16 weight at `packed` into ggml's row layout at `dst`
// (count * row_bytes bytes).
void unpack(QuantType type, const std::byte* packed, std::int64_t cols, std::int64_t row0,
            std::int64_t count, std::byte* dst);

// `rows` rows in ggml's layout into the rows16 layout (packed_bytes(rows, row_bytes) bytes; the
// padding rows are zero).
void pack(QuantType type, const std::byte* src, std::int64_t rows, std::int64_t cols,
          std::byte* packed);

}  // namespace npugraph::ops::quant_pack
