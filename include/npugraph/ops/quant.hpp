// Block-quantised weights: ggml's Q4_0, Q4_1 and Q8_0 formats as the ops layer sees them.
//
// A QuantWeight is a [rows, cols] matrix stored row after row, each row cols / 32 blocks of 32
// elements, byte for byte as ggml (ggml-common.h) and GGUF files lay them out. The ops layer defines
// the blocks itself (it does not include the model-file reader, docs/architecture.md); the numbers of
// QuantType are ggml's type numbers, so a reader can convert a file's type with a cast after
// checking it is one of these.
//
// Dequantisation is ggml's dequantize_row_* bit for bit: the half-float scale converted exactly,
// then one float multiply (and one float add for Q4_1). A quant (at most 8 bits) times a half scale
// (11 significant bits) is exact in float32, so the add rounds once whether or not the compiler
// fuses it into a multiply-add (GCC contracts in C++ even under -std=c++20): every implementation
// here, scalar or SIMD, gives ggml's values.
//   Q4_0  x[j] = float(nibble_j - 8) * d
//   Q4_1  x[j] = float(nibble_j) * d + m
//   Q8_0  x[j] = float(q_j) * d
// where element j < 16 of a block is the low nibble of qs[j] and element j + 16 its high nibble.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "npugraph/tensor.hpp"

namespace npugraph::ops {

enum class QuantType : std::uint32_t { q4_0 = 2, q4_1 = 3, q8_0 = 8 };

inline constexpr std::int64_t kQuantBlock = 32;  // elements per block, every format here

struct BlockQ4_0 {               // x[j] = (nibble - 8) * d
  std::uint16_t d;               // IEEE half bits
  std::uint8_t qs[kQuantBlock / 2];
};
struct BlockQ4_1 {               // x[j] = nibble * d + m
  std::uint16_t d;
  std::uint16_t m;
  std::uint8_t qs[kQuantBlock / 2];
};
struct BlockQ8_0 {               // x[j] = qs[j] * d
  std::uint16_t d;
  std::int8_t qs[kQuantBlock];
};
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ8_0) == 34);

// Bytes of one block of `type`; its name as ggml spells it ("Q4_1").
constexpr std::size_t quant_block_bytes(QuantType type) noexcept {
  switch (type) {
    case QuantType::q4_0: return sizeof(BlockQ4_0);
    case QuantType::q4_1: return sizeof(BlockQ4_1);
    case QuantType::q8_0: return sizeof(BlockQ8_0);
  }
  return 0;
}
constexpr std::string_view quant_type_name(QuantType type) noexcept {
  switch (type) {
    case QuantType::q4_0: return "Q4_0";
    case QuantType::q4_1: return "Q4_1";
    case QuantType::q8_0: return "Q8_0";
  }
  return "?";
}
// Whether a ggml type number is one of the QuantTypes.
constexpr bool is_quant_type(std::uint32_t ggml_type) noexcept {
  return ggml_type == 2 || ggml_type == 3 || ggml_type == 8;
}

// How a QuantWeight's blocks are ordered.
//   rows    ggml's: row after row, each row's blocks in order (what GGUF files hold).
//   rows16  for weight_quant_linear on the cpu: groups of 16 rows, block by block, each block's 16
//           scales (and minimums) together and its quants interleaved so that one 32-bit SIMD lane
//           holds one row (Note [Packed weights] in src/ops/linear/linear_packed_simd.cpp); the
//           last group padded with zero rows, so ceil(rows / 16) * 16 rows of bytes. Made by
//           pack_rows16, read back by unpack_rows and dequantize_rows.
enum class QuantLayout : std::uint8_t { rows, rows16 };

// Rows of a rows16 group.
inline constexpr std::int64_t kQuantPackRows = 16;

// A [rows, cols] block-quantised matrix over a byte tensor (shared, not copied).
class QuantWeight {
 public:
  QuantWeight() = default;
  // `bytes`: a contiguous uint8 or int8 tensor (on the cpu, or on a cuda device for the CUDA
  // kernels; the host helpers below take cpu weights only) of exactly rows * (cols / 32) blocks
  // (rows16: ceil(rows / 16) * 16 rows of them), any shape ([rows, row_bytes] or flat); cols a
  // positive multiple of 32, rows positive. ArgumentError naming the argument, its value and the
  // rule otherwise.
  QuantWeight(Tensor bytes, QuantType type, std::int64_t rows, std::int64_t cols,
              QuantLayout layout = QuantLayout::rows);

  bool defined() const { return bytes_.defined(); }
  const Tensor& bytes() const { return bytes_; }
  QuantType type() const { return type_; }
  QuantLayout layout() const { return layout_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t blocks_per_row() const { return cols_ / kQuantBlock; }
  std::int64_t row_bytes() const {
    return blocks_per_row() * static_cast<std::int64_t>(quant_block_bytes(type_));
  }
  const std::byte* data() const { return static_cast<const std::byte*>(bytes_.data()); }
  // "Q4_1[1536, 576]" ("Q4_1[1536, 576] rows16" for the rows16 layout)
  std::string str() const;

 private:
  Tensor bytes_;
  QuantType type_ = QuantType::q8_0;
  QuantLayout layout_ = QuantLayout::rows;
  std::int64_t rows_ = 0, cols_ = 0;
};

// Host helpers (no stream work): ggml's dequantize_row_* of `n` elements (a multiple of 32) from
// the blocks at `src` (any alignment) into dst.
void dequantize_blocks(QuantType type, const std::byte* src, float* dst, std::int64_t n);
// Rows [row0, row0 + count) of `w` as float32, row-major into dst (count * cols floats); either
// layout.
void dequantize_rows(const QuantWeight& w, std::int64_t row0, std::int64_t count, float* dst);

// The same matrix in the rows16 layout (new bytes on the cpu; `w` must be a cpu weight in the rows
// layout), and back. Host helpers, not stream ops: a model loader packs its weights once. On the
// cpu, weight_quant_linear with q8 activations runs rows16 weights through a kernel that keeps
// one row per SIMD lane (Note [Packed weights]); every other use of a rows16 weight either unpacks
// it first (the float32 paths, bitwise the rows layout's results) or refuses it (embedding, the
// cuda kernels).
QuantWeight pack_rows16(const QuantWeight& w);
QuantWeight unpack_rows(const QuantWeight& w);

// ggml's reference quantisers (quantize_row_*_ref): `values` holds rows * cols floats (row-major,
// cols a positive multiple of 32); returns a new QuantWeight over freshly allocated bytes. For
// tests, benchmarks and converting float weights; not a stream op.
QuantWeight quantize(QuantType type, std::span<const float> values, std::int64_t rows,
                     std::int64_t cols);

}  // namespace npugraph::ops
