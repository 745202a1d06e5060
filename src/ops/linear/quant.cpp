// QuantWeight's checks and the host helpers over the quantisation table (Note [Quantisation table]
// in quant_formats.cpp): each looks up the type's row.
#include "npugraph/ops/quant.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "npugraph/dtype.hpp"
#include "npugraph/error.hpp"
#include "npugraph/memory.hpp"
#include "ops/linear/quant_cuda_core.hpp"
#include "ops/linear/quant_pack.hpp"

namespace npugraph::ops {

// The CUDA kernels' spelling of the formats (quant_cuda_core.hpp) is this header's.
static_assert(quant_cuda::kQ4_0 == static_cast<std::uint32_t>(QuantType::q4_0) &&
              quant_cuda::kQ4_1 == static_cast<std::uint32_t>(QuantType::q4_1) &&
              quant_cuda::kQ8_0 == static_cast<std::uint32_t>(QuantType::q8_0));
static_assert(quant_cuda::kQ4_0Bytes == sizeof(BlockQ4_0) && quant_cuda::kQ4_1Bytes == sizeof(BlockQ4_1) &&
              quant_cuda::kQ8_0Bytes == sizeof(BlockQ8_0) && quant_cuda::kBlock == kQuantBlock);
// The rows whose cuda flag is set are the block formats quant_cuda::dequant reads.
static_assert([] {
  for (const QuantTraits& t : kGgmlTypes) {
    const auto n = static_cast<std::uint32_t>(t.type);
    if (t.cuda && t.block > 1 && n != quant_cuda::kQ4_0 && n != quant_cuda::kQ4_1 && n != quant_cuda::kQ8_0)
      return false;
  }
  return true;
}(), "a row with cuda = true needs its case in quant_cuda::dequant (quant_cuda_core.hpp)");

QuantWeight::QuantWeight(Tensor bytes, QuantType type, std::int64_t rows, std::int64_t cols,
                         QuantLayout layout)
    : type_(type), layout_(layout), rows_(rows), cols_(cols) {
  NG_CHECK_ARG(layout == QuantLayout::rows || layout == QuantLayout::rows16, "QuantWeight: layout = ",
               static_cast<int>(layout), ": must be QuantLayout::rows or QuantLayout::rows16");
  NG_CHECK_ARG(is_quant_type(static_cast<std::uint32_t>(type)), "QuantWeight: type = ",
               static_cast<std::uint32_t>(type), ": must be one of ", quant_type_names());
  NG_CHECK_ARG(rows > 0, "QuantWeight: rows = ", rows, ": must be positive");
  NG_CHECK_ARG(cols > 0 && cols % quant_block_size(type) == 0, "QuantWeight: cols = ", cols,
               ": must be a positive multiple of the block size ", quant_block_size(type), " of ",
               quant_type_name(type));
  NG_CHECK_ARG(layout == QuantLayout::rows || quant_traits(type).rows16, "QuantWeight: layout = rows16 for ",
               quant_type_name(type), ": rows16 lays out Q4_0, Q4_1 and Q8_0 only");
  NG_CHECK_ARG(bytes.defined(), "QuantWeight: bytes is undefined");
  NG_CHECK_ARG(bytes.dtype() == DType::u8 || bytes.dtype() == DType::i8, "QuantWeight: bytes = ",
               bytes.str(), ": must be uint8 or int8 (raw blocks)");
  NG_CHECK_ARG(bytes.is_contiguous(), "QuantWeight: bytes = ", bytes.str(), ": must be contiguous");
  const bool packed = layout == QuantLayout::rows16;
  const std::int64_t stored = packed ? quant_pack::packed_bytes(rows, row_bytes()) / row_bytes() : rows;
  const auto need = static_cast<std::size_t>(stored * row_bytes());
  NG_CHECK_ARG(bytes.nbytes() == need, "QuantWeight: bytes = ", bytes.str(), " (", bytes.nbytes(),
               " bytes): must hold exactly ", need, " bytes for ", quant_type_name(type), "[", rows,
               ", ", cols, "]", packed ? " rows16" : "", " (", stored, " rows of ", blocks_per_row(),
               " blocks of ", quant_block_bytes(type), " bytes", packed ? ": whole groups of 16 rows" : "",
               ")");
  bytes_ = std::move(bytes);
}

std::string QuantWeight::str() const {
  return detail::cat(quant_type_name(type_), "[", rows_, ", ", cols_, "]",
                     layout_ == QuantLayout::rows16 ? " rows16" : "");
}

std::string quant_type_names() {
  std::string out;
  for (const QuantTraits& t : kQuantTable) out += detail::cat(out.empty() ? "" : ", ", t.name);
  return out;
}

void dequantize_blocks(QuantType type, const std::byte* src, float* y, std::int64_t n) {
  const QuantTraits* row = find_quant_traits(static_cast<std::uint32_t>(type));
  NG_CHECK_ARG(row != nullptr, "dequantize_blocks: type = ", static_cast<std::uint32_t>(type),
               ": must be one of ", quant_type_names());
  const std::int64_t block = quant_block_size(type);
  NG_CHECK_ARG(n >= 0 && n % block == 0, "dequantize_blocks: n = ", n, ": must be a multiple of the ",
               block, "-element blocks of ", quant_type_name(type));
  row->dequantize(src, y, n / block);
}

void dequantize_rows(const QuantWeight& w, std::int64_t row0, std::int64_t count, float* dst) {
  NG_CHECK_ARG(w.defined(), "dequantize_rows: weight is undefined");
  NG_CHECK_ARG(row0 >= 0 && count >= 0 && row0 + count <= w.rows(), "dequantize_rows: rows [",
               row0, ", ", row0 + count, "): must lie in [0, ", w.rows(), ") of ", w.str());
  NG_CHECK_ARG(w.bytes().device().is_cpu(), "dequantize_rows: weight = ", w.str(), " on ",
               w.bytes().device().str(), ": must be on the cpu (a host helper reads its bytes)");
  if (w.layout() == QuantLayout::rows16) {
    std::vector<std::byte> row(static_cast<std::size_t>(w.row_bytes()));
    for (std::int64_t r = 0; r < count; ++r) {
      quant_pack::unpack(w.type(), w.data(), w.cols(), row0 + r, 1, row.data());
      dequantize_blocks(w.type(), row.data(), dst + r * w.cols(), w.cols());
    }
    return;
  }
  for (std::int64_t r = 0; r < count; ++r)
    dequantize_blocks(w.type(), w.data() + (row0 + r) * w.row_bytes(), dst + r * w.cols(), w.cols());
}

QuantWeight pack_rows16(const QuantWeight& w) {
  NG_CHECK_ARG(w.defined(), "pack_rows16: weight is undefined");
  NG_CHECK_ARG(w.layout() == QuantLayout::rows, "pack_rows16: weight = ", w.str(),
               ": must be in the rows layout (it is packed already)");
  NG_CHECK_AS(UnsupportedError, quant_traits(w.type()).rows16, "pack_rows16: weight = ", w.str(),
              ": rows16 lays out Q4_0, Q4_1 and Q8_0 only (keep ", quant_type_name(w.type()),
              " in the rows layout)");
  NG_CHECK_ARG(w.bytes().device().is_cpu(), "pack_rows16: weight = ", w.str(), " on ",
               w.bytes().device().str(), ": must be on the cpu (a host helper reads its bytes)");
  const std::int64_t bytes = quant_pack::packed_bytes(w.rows(), w.row_bytes());
  Tensor out = empty({bytes}, DType::u8);
  quant_pack::pack(w.type(), w.data(), w.rows(), w.cols(), static_cast<std::byte*>(out.data()));
  return QuantWeight(std::move(out), w.type(), w.rows(), w.cols(), QuantLayout::rows16);
}

QuantWeight unpack_rows(const QuantWeight& w) {
  NG_CHECK_ARG(w.defined(), "unpack_rows: weight is undefined");
  NG_CHECK_ARG(w.layout() == QuantLayout::rows16, "unpack_rows: weight = ", w.str(),
               ": must be in the rows16 layout");
  NG_CHECK_ARG(w.bytes().device().is_cpu(), "unpack_rows: weight = ", w.str(), " on ",
               w.bytes().device().str(), ": must be on the cpu (a host helper reads its bytes)");
  Tensor out = empty({w.rows(), w.row_bytes()}, DType::u8);
  quant_pack::unpack(w.type(), w.data(), w.cols(), 0, w.rows(), static_cast<std::byte*>(out.data()));
  return QuantWeight(std::move(out), w.type(), w.rows(), w.cols());
}

QuantWeight quantize(QuantType type, std::span<const float> values, std::int64_t rows,
                     std::int64_t cols) {
  const QuantTraits* row = find_quant_traits(static_cast<std::uint32_t>(type));
  NG_CHECK_ARG(row != nullptr, "quantize: type = ", static_cast<std::uint32_t>(type),
               ": must be one of ", quant_type_names());
  const std::int64_t block = quant_block_size(type);
  NG_CHECK_ARG(rows > 0 && cols > 0 && cols % block == 0, "quantize: [", rows, ", ", cols,
               "]: rows must be positive and cols a positive multiple of the ", block,
               "-element blocks of ", quant_type_name(type));
  NG_CHECK_ARG(values.size() == static_cast<std::size_t>(rows * cols), "quantize: values has ",
               values.size(), " floats: must hold rows * cols = ", rows * cols);
  Tensor bytes = empty({rows, cols / block * static_cast<std::int64_t>(quant_block_bytes(type))}, DType::u8);
  row->quantize(values.data(), static_cast<std::byte*>(bytes.data()), rows * cols / block);
  return QuantWeight(std::move(bytes), type, rows, cols);
}

}  // namespace npugraph::ops
