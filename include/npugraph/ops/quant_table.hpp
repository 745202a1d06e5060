// The quantisation table: one row per ggml type number, in the shape of ggml's type traits
// (Note [Quantisation table] in src/ops/linear/quant_formats.cpp).
//
// A row says what the format is (name, elements and bytes per block), what npugraph can do with it
// (dequantise, quantise) and which kernels compute on it. Rows of the types with a block struct
// (quant_blocks.hpp) are made from the struct, so their sizes and functions are the struct's; the
// other ggml types have rows that only name and size them (a file holding one is read, and refused
// by name where its values are needed). The kernels build their dispatch from the rows' flags at
// compile time and static_assert that every flagged row has a kernel (linear_simd.cpp,
// linear_q8_simd.cpp, linear_packed_simd.cpp); the flags' implications are asserted below.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "npugraph/ops/ggml_type.hpp"
#include "npugraph/ops/quant_blocks.hpp"

namespace npugraph::ops {

// `blocks` whole blocks at `src` (any alignment) -> blocks * block floats.
using DequantizeFn = void (*)(const std::byte* src, float* dst, std::int64_t blocks);
// blocks * block floats -> `blocks` whole blocks.
using QuantizeFn = void (*)(const float* src, std::byte* dst, std::int64_t blocks);

// The kernels a type has (what weight_quant_linear, linear and embedding can run on).
struct QuantKernels {
  bool linear = false;   // the float32-activation GEMV / GEMM (linear_simd.cpp: Src<type>); the
                         // embedding lookup; a quantised type with it is a QuantType
  bool q8 = false;       // the GEMV with q8 activations (linear_q8_simd.cpp; Activations::q8)
  bool rows16 = false;   // pack_rows16 lays it out and the packed q8 GEMV reads it
                         // (linear_packed_simd.cpp, quant_pack.cpp; QuantLayout::rows16)
  bool cuda = false;     // the cuda kernels read it (quant_cuda_core.hpp)
};

struct QuantTraits {
  GgmlType type{};
  std::string_view name;          // as ggml and gguf-py spell it: "Q4_K"; empty: not a type
  std::int64_t block = 1;         // elements per block
  std::size_t block_bytes = 0;
  std::size_t quants_at = 0;      // where a block's quants (qs, or Q6_K's ql) start
  DequantizeFn dequantize = nullptr;  // nullptr: npugraph does not read its values
  QuantizeFn quantize = nullptr;      // nullptr: no quantiser
  // Whether those are set, as flags: the compile-time checks below read these, since comparing a
  // function's address with nullptr is not a constant expression under -fsanitize=address (GCC).
  bool reads = false, quantises = false;
  // Its kernels (QuantKernels): the row's flags, as the callers ask for them.
  bool linear = false;
  bool q8_kernel = false;
  bool rows16 = false;
  bool cuda = false;

  constexpr bool defined() const noexcept { return !name.empty(); }
  constexpr bool dequantizable() const noexcept { return reads; }
  // A block-quantised type the ops compute on: the QuantTypes (npugraph/ops/quant.hpp).
  constexpr bool computable_quant() const noexcept { return linear && block > 1; }
};

namespace quant_table_detail {

// A row made from a block struct: sizes, quants' offset and functions are the struct's.
template <class Block>
constexpr QuantTraits row(std::string_view name, QuantKernels kernels = {}) {
  QuantTraits t;
  t.type = Block::kType;
  t.name = name;
  t.block = Block::kElems;
  t.block_bytes = sizeof(Block);
  if constexpr (requires { Block::ql; }) t.quants_at = offsetof(Block, ql);  // Q6_K's low bits
  else if constexpr (requires { Block::qs; }) t.quants_at = offsetof(Block, qs);
  t.dequantize = &Block::dequantize;
  t.reads = true;
  if constexpr (requires { &Block::quantize; }) {
    t.quantize = &Block::quantize;
    t.quantises = true;
  }
  t.linear = kernels.linear;
  t.q8_kernel = kernels.q8;
  t.rows16 = kernels.rows16;
  t.cuda = kernels.cuda;
  return t;
}

// A row that only names and sizes a type (no block struct: npugraph does not read it).
constexpr QuantTraits sized(GgmlType type, std::string_view name, std::int64_t block, std::size_t bytes) {
  QuantTraits t;
  t.type = type;
  t.name = name;
  t.block = block;
  t.block_bytes = bytes;
  return t;
}

constexpr QuantKernels kFloat{.linear = true, .cuda = true};              // F32, F16, BF16
constexpr QuantKernels kCpu{.linear = true, .q8 = true};                  // SIMD + q8 GEMV
constexpr QuantKernels kAll{.linear = true, .q8 = true, .rows16 = true, .cuda = true};
constexpr QuantKernels kCpuRows16{.linear = true, .q8 = true, .rows16 = true};  // Q5_0: no cuda kernel

constexpr std::array<QuantTraits, kGgmlTypeCount> make_table() {
  using G = GgmlType;
  const QuantTraits rows[] = {
      row<BlockF32>("F32", kFloat),
      row<BlockF16>("F16", kFloat),
      row<BlockBF16>("BF16", kFloat),
      row<BlockQ4_0>("Q4_0", kAll),
      row<BlockQ4_1>("Q4_1", kAll),
      row<BlockQ5_0>("Q5_0", kCpuRows16),
      row<BlockQ5_1>("Q5_1"),
      row<BlockQ8_0>("Q8_0", kAll),
      row<BlockQ2_K>("Q2_K"),
      row<BlockQ3_K>("Q3_K"),
      row<BlockQ4_K>("Q4_K", kCpu),
      row<BlockQ5_K>("Q5_K", kCpu),
      row<BlockQ6_K>("Q6_K", kCpu),
      sized(G::Q8_1, "Q8_1", 32, 36),
      sized(G::Q8_K, "Q8_K", 256, 292),
      sized(G::IQ2_XXS, "IQ2_XXS", 256, 66),
      sized(G::IQ2_XS, "IQ2_XS", 256, 74),
      sized(G::IQ3_XXS, "IQ3_XXS", 256, 98),
      sized(G::IQ1_S, "IQ1_S", 256, 50),
      sized(G::IQ4_NL, "IQ4_NL", 32, 18),
      sized(G::IQ3_S, "IQ3_S", 256, 110),
      sized(G::IQ2_S, "IQ2_S", 256, 82),
      sized(G::IQ4_XS, "IQ4_XS", 256, 136),
      sized(G::I8, "I8", 1, 1),
      sized(G::I16, "I16", 1, 2),
      sized(G::I32, "I32", 1, 4),
      sized(G::I64, "I64", 1, 8),
      sized(G::F64, "F64", 1, 8),
      sized(G::IQ1_M, "IQ1_M", 256, 56),
      sized(G::TQ1_0, "TQ1_0", 256, 54),
      sized(G::TQ2_0, "TQ2_0", 256, 66),
      sized(G::MXFP4, "MXFP4", 32, 17),
  };
  std::array<QuantTraits, kGgmlTypeCount> t{};
  for (const QuantTraits& r : rows) t[static_cast<std::size_t>(r.type)] = r;
  return t;
}

}  // namespace quant_table_detail

// Indexed by the type number; rows of numbers that are no type are empty (defined() false).
inline constexpr std::array<QuantTraits, kGgmlTypeCount> kGgmlTypes = quant_table_detail::make_table();

// The row of a type number read from a file; nullptr for numbers that are not (or no longer) a type.
constexpr const QuantTraits* find_ggml_type(std::uint32_t type) noexcept {
  return type < kGgmlTypeCount && kGgmlTypes[type].defined() ? &kGgmlTypes[type] : nullptr;
}
// The row of a GgmlType (a value outside the enum gets a row named "?" that can do nothing).
inline constexpr QuantTraits kUnknownGgmlType = quant_table_detail::sized(GgmlType{0xffffffffu}, "?", 1, 1);
constexpr const QuantTraits& ggml_traits(GgmlType type) noexcept {
  const QuantTraits* t = find_ggml_type(static_cast<std::uint32_t>(type));
  return t ? *t : kUnknownGgmlType;
}

// What the flags promise of each other (a row that breaks one does not compile).
constexpr bool rows_are_consistent() {
  for (std::size_t i = 0; i < kGgmlTypeCount; ++i) {
    const QuantTraits& t = kGgmlTypes[i];
    if (!t.defined()) continue;
    if (static_cast<std::size_t>(t.type) != i) return false;           // indexed by its number
    if (t.block < 1 || t.block_bytes == 0) return false;
    if (t.linear && !t.dequantizable()) return false;                       // kernels read ggml's values
    if (t.computable_quant() && !t.quantises) return false;                 // tests and converters quantise
    if (t.q8_kernel && !t.computable_quant()) return false;                 // q8 GEMV: quantised weights
    if (t.rows16 && (!t.q8_kernel || t.block != kQuantBlock)) return false; // rows16 feeds the q8 GEMV
    if (t.cuda && !t.linear) return false;
  }
  return true;
}
static_assert(rows_are_consistent(), "kGgmlTypes: a row's flags contradict each other (quant_table.hpp)");

}  // namespace npugraph::ops
