// Dequantisation of a GGUF tensor's bytes to float32 through the quantisation table
// (npugraph/ops/quant_table.hpp): every type npugraph reads is a row with a dequantiser, bitwise
// ggml's dequantize_row_* (Note [Quantisation table] in src/ops/linear/quant_formats.cpp).
#include <string>

#include "npugraph/error.hpp"
#include "npugraph/llm/gguf.hpp"

namespace npugraph::llm {
namespace {

// "F32, F16, Q4_0, ..." : the rows with a dequantiser (messages).
std::string dequantizable_names() {
  std::string out;
  for (const GgmlTypeTraits& t : ops::kGgmlTypes)
    if (t.dequantizable()) out += npugraph::detail::cat(out.empty() ? "" : ", ", t.name);
  return out;
}

}  // namespace

void dequantize_row(GgmlType type, std::span<const std::byte> src, std::span<float> dst) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  NG_CHECK_ARG(traits.dequantizable(), "dequantize_row: type ", traits.name, " (",
               static_cast<std::uint32_t>(type), ") is not one npugraph dequantizes (",
               dequantizable_names(), ")");
  const auto block = static_cast<std::size_t>(traits.block);
  NG_CHECK_ARG(dst.size() % block == 0, "dequantize_row: ", dst.size(), " elements of ",
               traits.name, " are not a whole number of ", block, "-element blocks");
  const std::size_t blocks = dst.size() / block;
  NG_CHECK_ARG(src.size() == blocks * traits.block_bytes, "dequantize_row: ", dst.size(),
               " elements of ", traits.name, " take ", blocks * traits.block_bytes,
               " bytes, the source has ", src.size());
  traits.dequantize(src.data(), dst.data(), static_cast<std::int64_t>(blocks));
}

}  // namespace npugraph::llm
