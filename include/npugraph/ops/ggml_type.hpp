// ggml's tensor element types (enum ggml_type): the numbers are the GGUF file format. One enum for
// the model-file reader (npugraph/llm/gguf.hpp) and the ops layer's quantisation table
// (npugraph/ops/quant_table.hpp), which has a row for each number. Plain C++: nvcc includes it
// through the linear kernel's parameter block.
#pragma once

#include <cstddef>
#include <cstdint>

namespace npugraph::ops {

enum class GgmlType : std::uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

// One past the largest type number (the table's length); 4, 5, 31-33 and 36-38 were removed from
// ggml and are no type.
inline constexpr std::size_t kGgmlTypeCount = 40;

}  // namespace npugraph::ops
