// Block-quantised weights: ggml's block formats as the ops layer sees them, one row of the
// quantisation table per type (quant_table.hpp; Note [Quantisation table] in
// src/ops/linear/quant_formats.cpp); the blocks are quant_blocks.hpp.
//
// A QuantWeight is a [rows, cols] matrix stored row after row, each row cols / block elements of
// blocks, byte for byte as ggml (ggml-common.h) and GGUF files lay them out. The ops layer defines
// the blocks itself (it does not include the model-file reader, docs/architecture.md); the numbers of
// QuantType are ggml's type numbers (GgmlType), so a reader can convert a file's type with a cast
// after checking it with is_quant_type.
//
// Dequantisation is ggml's dequantize_row_* bit for bit: the half-float scales converted exactly,
// then float products (and one float add or subtract for the formats with a minimum). Every product
// here is exact in float32 (a half times a scale of at most 8 bits times a quant of at most 6 bits
// fits 24 bits), so the one add rounds once whether or not the compiler fuses it into a multiply-add
// (GCC contracts in C++ even under -std=c++20): every implementation here, scalar or SIMD, gives
// ggml's values.
//   Q4_0  x[j] = float(nibble_j - 8) * d                      blocks of 32, 18 bytes
//   Q4_1  x[j] = float(nibble_j) * d + m                      blocks of 32, 20 bytes
//   Q5_0  x[j] = float((nibble_j | bit_j << 4) - 16) * d      blocks of 32, 22 bytes
//   Q8_0  x[j] = float(q_j) * d                               blocks of 32, 34 bytes
//   Q4_K  x = (d * sc_s) * q - (dmin * m_s), 8 sub-blocks of 32 with 6-bit sc, m   256, 144 bytes
//   Q5_K  as Q4_K with a fifth bit per quant                                        256, 176 bytes
//   Q6_K  x = (d * sc_s) * (q - 32), 16 sub-blocks of 16 with int8 sc               256, 210 bytes
// where, in the 32-element formats, element j < 16 of a block is the low nibble of qs[j] and
// element j + 16 its high nibble (the K-quants' orders are in quant_formats.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "npugraph/ops/quant_table.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph::ops {

// The block-quantised types the ops compute on: the table's rows with a linear kernel and blocks
// (computable_quant(); kQuantTable below). The numbers are ggml's (GgmlType).
enum class QuantType : std::uint32_t {
  q4_0 = 2, q4_1 = 3, q5_0 = 6, q8_0 = 8, q4_k = 12, q5_k = 13, q6_k = 14,
};

// The rows of the QuantTypes, in type-number order (derived from kGgmlTypes).
inline constexpr std::size_t kQuantTypeCount = [] {
  std::size_t n = 0;
  for (const QuantTraits& t : kGgmlTypes) n += t.computable_quant() ? 1 : 0;
  return n;
}();
inline constexpr std::array<QuantTraits, kQuantTypeCount> kQuantTable = [] {
  std::array<QuantTraits, kQuantTypeCount> out{};
  std::size_t n = 0;
  for (const QuantTraits& t : kGgmlTypes)
    if (t.computable_quant()) out[n++] = t;
  return out;
}();
// QuantType's enumerators are the table's computable rows, no more and no fewer.
static_assert(kQuantTypeCount == 7 && kGgmlTypes[2].computable_quant() && kGgmlTypes[3].computable_quant() &&
                  kGgmlTypes[6].computable_quant() && kGgmlTypes[8].computable_quant() &&
                  kGgmlTypes[12].computable_quant() && kGgmlTypes[13].computable_quant() &&
                  kGgmlTypes[14].computable_quant(),
              "a row with a linear kernel needs its QuantType enumerator (quant.hpp)");

// The table's row for a ggml type number when it is a QuantType; nullptr otherwise.
constexpr const QuantTraits* find_quant_traits(std::uint32_t ggml_type) noexcept {
  const QuantTraits* t = find_ggml_type(ggml_type);
  return t && t->computable_quant() ? t : nullptr;
}
// Whether a ggml type number is one of the QuantTypes.
constexpr bool is_quant_type(std::uint32_t ggml_type) noexcept { return find_quant_traits(ggml_type) != nullptr; }
constexpr GgmlType ggml_type(QuantType type) noexcept { return static_cast<GgmlType>(type); }
// The row of a QuantType (a value outside the enum gets a row named "?" with no kernels).
inline constexpr QuantTraits kUnknownQuant = quant_table_detail::sized(GgmlType{0}, "?", kQuantBlock, 0);
constexpr const QuantTraits& quant_traits(QuantType type) noexcept {
  const QuantTraits* t = find_quant_traits(static_cast<std::uint32_t>(type));
  return t ? *t : kUnknownQuant;
}
constexpr std::size_t quant_block_bytes(QuantType type) noexcept { return quant_traits(type).block_bytes; }
constexpr std::int64_t quant_block_size(QuantType type) noexcept { return quant_traits(type).block; }
constexpr std::string_view quant_type_name(QuantType type) noexcept { return quant_traits(type).name; }
// "Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K" (messages)
std::string quant_type_names();

// How a QuantWeight's blocks are ordered.
//   rows    ggml's: row after row, each row's blocks in order (what GGUF files hold).
//   rows16  for weight_quant_linear on the cpu (Q4_0, Q4_1, Q5_0, Q8_0): groups of 16 rows, block by
//           block, each block's 16 scales (and minimums, or Q5_0's fifth bits) together and its
//           quants interleaved so that one 32-bit SIMD lane
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
  // kernels; the host helpers below take cpu weights only) of exactly rows * (cols / block)
  // blocks (rows16: ceil(rows / 16) * 16 rows of them), any shape ([rows, row_bytes] or flat);
  // cols a positive multiple of the type's block size, rows positive; rows16 only for the types
  // whose table row says so. ArgumentError naming the argument, its value and the rule otherwise.
  QuantWeight(Tensor bytes, QuantType type, std::int64_t rows, std::int64_t cols,
              QuantLayout layout = QuantLayout::rows);

  bool defined() const { return bytes_.defined(); }
  const Tensor& bytes() const { return bytes_; }
  QuantType type() const { return type_; }
  QuantLayout layout() const { return layout_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t block_size() const { return quant_block_size(type_); }
  std::int64_t blocks_per_row() const { return cols_ / block_size(); }
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

// Host helpers (no stream work): ggml's dequantize_row_* of `n` elements (a multiple of the type's
// block size) from the blocks at `src` (any alignment) into dst.
void dequantize_blocks(QuantType type, const std::byte* src, float* dst, std::int64_t n);
// Rows [row0, row0 + count) of `w` as float32, row-major into dst (count * cols floats); either
// layout.
void dequantize_rows(const QuantWeight& w, std::int64_t row0, std::int64_t count, float* dst);

// The same matrix in the rows16 layout (new bytes on the cpu; `w` must be a cpu weight in the rows
// layout), and back. Host helpers, not stream ops: a model loader packs its weights once. On the
// cpu, weight_quant_linear with q8 activations runs rows16 weights through a kernel that keeps
// one row per SIMD lane (Note [Packed weights]); every other use of a rows16 weight either unpacks
// it first (the float32 paths and the cpu embedding lookup, bitwise the rows layout's results) or
// refuses it (the cuda kernels).
QuantWeight pack_rows16(const QuantWeight& w);
QuantWeight unpack_rows(const QuantWeight& w);

// Quantisers: `values` holds rows * cols floats (row-major, cols a positive multiple of the type's
// block size); returns a new QuantWeight over freshly allocated bytes. Q4_0, Q4_1, Q5_0 and Q8_0
// are ggml's reference quantisers (quantize_row_*_ref) bit for bit; the K-quants are a plain
// min/max quantiser (valid blocks within one step of each value, not ggml's searching one). For
// tests, benchmarks and converting float weights; not a stream op.
QuantWeight quantize(QuantType type, std::span<const float> values, std::int64_t rows,
                     std::int64_t cols);

}  // namespace npugraph::ops
