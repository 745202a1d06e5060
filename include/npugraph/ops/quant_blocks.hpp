// ggml's blocks, byte for byte as ggml-common.h and GGUF files lay them out: one definition each,
// with the type's block functions as static members (defined in src/ops/linear/quant_formats*.cpp).
// The quantisation table (quant_table.hpp) makes a row of each from its struct, so a row's size,
// element count and functions cannot disagree with its block.
//
// Scales are IEEE half floats (bits), little-endian like the rest of GGUF. Blocks in a mapped file
// are only as aligned as the tensor's offset: the block functions copy before reading members.
//   dequantize: `blocks` whole blocks at `src` (any alignment) -> blocks * kElems floats, ggml's
//               dequantize_row_* bit for bit (Note [Quantisation table]).
//   quantize:   blocks * kElems floats -> `blocks` whole blocks (only the types npugraph computes on).
#pragma once

#include <cstddef>
#include <cstdint>

#include "npugraph/ops/ggml_type.hpp"

namespace npugraph::ops {

// Elements per block of the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0); the K-quants'
// super-blocks hold kQuantBlockK.
inline constexpr std::int64_t kQuantBlock = 32;
inline constexpr std::int64_t kQuantBlockK = 256;

#define NPUGRAPH_QUANT_BLOCK_FNS(TYPE, ELEMS)                                  \
  static constexpr GgmlType kType = GgmlType::TYPE;                            \
  static constexpr std::int64_t kElems = ELEMS;                                \
  static void dequantize(const std::byte* src, float* dst, std::int64_t blocks)
#define NPUGRAPH_QUANT_BLOCK_QUANTIZE \
  static void quantize(const float* src, std::byte* dst, std::int64_t blocks)

// ---- plain floats: one element per "block" -----------------------------------------------------
struct BlockF32 {
  float v;
  NPUGRAPH_QUANT_BLOCK_FNS(F32, 1);
};
struct BlockF16 {
  std::uint16_t bits;
  NPUGRAPH_QUANT_BLOCK_FNS(F16, 1);
};
struct BlockBF16 {
  std::uint16_t bits;
  NPUGRAPH_QUANT_BLOCK_FNS(BF16, 1);
};

// ---- 32-element formats; element j < 16 is the low nibble of qs[j], j + 16 its high nibble ------
struct BlockQ4_0 {               // x[j] = (nibble - 8) * d
  std::uint16_t d;
  std::uint8_t qs[kQuantBlock / 2];
  NPUGRAPH_QUANT_BLOCK_FNS(Q4_0, kQuantBlock);
  NPUGRAPH_QUANT_BLOCK_QUANTIZE;
};
struct BlockQ4_1 {               // x[j] = nibble * d + m
  std::uint16_t d;
  std::uint16_t m;
  std::uint8_t qs[kQuantBlock / 2];
  NPUGRAPH_QUANT_BLOCK_FNS(Q4_1, kQuantBlock);
  NPUGRAPH_QUANT_BLOCK_QUANTIZE;
};
struct BlockQ5_0 {               // x[j] = ((nibble | bit j of qh << 4) - 16) * d
  std::uint16_t d;
  std::uint8_t qh[4];            // the fifth bits, element j in bit j (a little-endian uint32)
  std::uint8_t qs[kQuantBlock / 2];
  NPUGRAPH_QUANT_BLOCK_FNS(Q5_0, kQuantBlock);
  NPUGRAPH_QUANT_BLOCK_QUANTIZE;
};
struct BlockQ5_1 {               // x[j] = (nibble | bit j of qh << 4) * d + m    (dequantise only)
  std::uint16_t d;
  std::uint16_t m;
  std::uint8_t qh[4];
  std::uint8_t qs[kQuantBlock / 2];
  NPUGRAPH_QUANT_BLOCK_FNS(Q5_1, kQuantBlock);
};
struct BlockQ8_0 {               // x[j] = qs[j] * d
  std::uint16_t d;
  std::int8_t qs[kQuantBlock];
  NPUGRAPH_QUANT_BLOCK_FNS(Q8_0, kQuantBlock);
  NPUGRAPH_QUANT_BLOCK_QUANTIZE;
};

// ---- K-quants: 256-element super-blocks (layouts: Note [Quantisation table]) --------------------
struct BlockQ2_K {               // dequantise only
  std::uint8_t scales[kQuantBlockK / 16];  // 4-bit scale | 4-bit minimum << 4
  std::uint8_t qs[kQuantBlockK / 4];
  std::uint16_t d, dmin;
  NPUGRAPH_QUANT_BLOCK_FNS(Q2_K, kQuantBlockK);
};
struct BlockQ3_K {               // dequantise only
  std::uint8_t hmask[kQuantBlockK / 8];
  std::uint8_t qs[kQuantBlockK / 4];
  std::uint8_t scales[12];       // 16 6-bit scales
  std::uint16_t d;
  NPUGRAPH_QUANT_BLOCK_FNS(Q3_K, kQuantBlockK);
};
struct BlockQ4_K {
  std::uint16_t d, dmin;
  std::uint8_t scales[12];       // 8 6-bit scales and 8 6-bit minimums
  std::uint8_t qs[kQuantBlockK / 2];
  NPUGRAPH_QUANT_BLOCK_FNS(Q4_K, kQuantBlockK);
  NPUGRAPH_QUANT_BLOCK_QUANTIZE;
};
struct BlockQ5_K {
  std::uint16_t d, dmin;
  std::uint8_t scales[12];
  std::uint8_t qh[kQuantBlockK / 8];
  std::uint8_t qs[kQuantBlockK / 2];
  NPUGRAPH_QUANT_BLOCK_FNS(Q5_K, kQuantBlockK);
  NPUGRAPH_QUANT_BLOCK_QUANTIZE;
};
struct BlockQ6_K {
  std::uint8_t ql[kQuantBlockK / 2];  // low 4 bits
  std::uint8_t qh[kQuantBlockK / 4];  // high 2 bits
  std::int8_t scales[kQuantBlockK / 16];
  std::uint16_t d;
  NPUGRAPH_QUANT_BLOCK_FNS(Q6_K, kQuantBlockK);
  NPUGRAPH_QUANT_BLOCK_QUANTIZE;
};

#undef NPUGRAPH_QUANT_BLOCK_FNS
#undef NPUGRAPH_QUANT_BLOCK_QUANTIZE

}  // namespace npugraph::ops
