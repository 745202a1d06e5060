// QuantWeight's checks, ggml's dequantize_row_* and quantize_row_*_ref for Q4_0, Q4_1 and Q8_0.
//
// Dequantisation is one float multiply (and one add for Q4_1) per element with an exact product
// (quant.hpp), so values are bitwise ggml's whether or not the add is fused; the SIMD kernels
// (linear_simd.cpp) compute the same values.
#include "npugraph/ops/quant.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "npugraph/dtype.hpp"
#include "npugraph/error.hpp"
#include "ops/linear/quant_cuda_core.hpp"
#include "ops/linear/quant_pack.hpp"

namespace npugraph::ops {

// The CUDA kernels' spelling of the formats (quant_cuda_core.hpp) is this header's.
static_assert(quant_cuda::kQ4_0 == static_cast<std::uint32_t>(QuantType::q4_0) &&
              quant_cuda::kQ4_1 == static_cast<std::uint32_t>(QuantType::q4_1) &&
              quant_cuda::kQ8_0 == static_cast<std::uint32_t>(QuantType::q8_0));
static_assert(quant_cuda::kQ4_0Bytes == sizeof(BlockQ4_0) && quant_cuda::kQ4_1Bytes == sizeof(BlockQ4_1) &&
              quant_cuda::kQ8_0Bytes == sizeof(BlockQ8_0) && quant_cuda::kBlock == kQuantBlock);

namespace {

template <class Block>
Block load_block(const std::byte* p) {
  Block b;
  std::memcpy(&b, p, sizeof(Block));
  return b;
}

float half_to_float(std::uint16_t bits) { return f16_bits_to_f32(bits); }

void quantize_q4_0(const float* x, std::byte* out, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i, x += kQuantBlock) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j)
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    const float d = max / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_0 b{};
    b.d = f32_to_f16_bits(d);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      const float x0 = x[j] * id, x1 = x[j + kQuantBlock / 2] * id;
      const auto q0 = static_cast<std::uint8_t>(std::min(15, static_cast<int>(static_cast<std::int8_t>(x0 + 8.5f))));
      const auto q1 = static_cast<std::uint8_t>(std::min(15, static_cast<int>(static_cast<std::int8_t>(x1 + 8.5f))));
      b.qs[j] = static_cast<std::uint8_t>(q0 | (q1 << 4));
    }
    std::memcpy(out + i * sizeof b, &b, sizeof b);
  }
}

void quantize_q4_1(const float* x, std::byte* out, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i, x += kQuantBlock) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < kQuantBlock; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_1 b{};
    b.d = f32_to_f16_bits(d);
    b.m = f32_to_f16_bits(min);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      const float x0 = (x[j] - min) * id, x1 = (x[j + kQuantBlock / 2] - min) * id;
      const auto q0 = static_cast<std::uint8_t>(std::min(15, static_cast<int>(static_cast<std::int8_t>(x0 + 0.5f))));
      const auto q1 = static_cast<std::uint8_t>(std::min(15, static_cast<int>(static_cast<std::int8_t>(x1 + 0.5f))));
      b.qs[j] = static_cast<std::uint8_t>(q0 | (q1 << 4));
    }
    std::memcpy(out + i * sizeof b, &b, sizeof b);
  }
}

void quantize_q8_0(const float* x, std::byte* out, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i, x += kQuantBlock) {
    float amax = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 b{};
    b.d = f32_to_f16_bits(d);
    for (int j = 0; j < kQuantBlock; ++j) b.qs[j] = static_cast<std::int8_t>(std::round(x[j] * id));
    std::memcpy(out + i * sizeof b, &b, sizeof b);
  }
}

}  // namespace

QuantWeight::QuantWeight(Tensor bytes, QuantType type, std::int64_t rows, std::int64_t cols,
                         QuantLayout layout)
    : type_(type), layout_(layout), rows_(rows), cols_(cols) {
  NG_CHECK_ARG(layout == QuantLayout::rows || layout == QuantLayout::rows16, "QuantWeight: layout = ",
               static_cast<int>(layout), ": must be QuantLayout::rows or QuantLayout::rows16");
  NG_CHECK_ARG(type == QuantType::q4_0 || type == QuantType::q4_1 || type == QuantType::q8_0,
               "QuantWeight: type = ", static_cast<std::uint32_t>(type),
               ": must be Q4_0 (2), Q4_1 (3) or Q8_0 (8)");
  NG_CHECK_ARG(rows > 0, "QuantWeight: rows = ", rows, ": must be positive");
  NG_CHECK_ARG(cols > 0 && cols % kQuantBlock == 0, "QuantWeight: cols = ", cols,
               ": must be a positive multiple of the block size ", kQuantBlock, " of ",
               quant_type_name(type));
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

void dequantize_blocks(QuantType type, const std::byte* src, float* y, std::int64_t n) {
  NG_CHECK_ARG(n >= 0 && n % kQuantBlock == 0, "dequantize_blocks: n = ", n,
               ": must be a multiple of ", kQuantBlock);
  const std::int64_t blocks = n / kQuantBlock;
  constexpr int H = kQuantBlock / 2;
  switch (type) {
    case QuantType::q4_0:
      for (std::int64_t i = 0; i < blocks; ++i, y += kQuantBlock) {
        const auto b = load_block<BlockQ4_0>(src + i * sizeof(BlockQ4_0));
        const float d = half_to_float(b.d);
        for (int j = 0; j < H; ++j) {
          y[j] = static_cast<float>((b.qs[j] & 0x0f) - 8) * d;
          y[j + H] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
        }
      }
      return;
    case QuantType::q4_1:
      for (std::int64_t i = 0; i < blocks; ++i, y += kQuantBlock) {
        const auto b = load_block<BlockQ4_1>(src + i * sizeof(BlockQ4_1));
        const float d = half_to_float(b.d), m = half_to_float(b.m);
        for (int j = 0; j < H; ++j) {
          const float p0 = static_cast<float>(b.qs[j] & 0x0f) * d;
          const float p1 = static_cast<float>(b.qs[j] >> 4) * d;
          y[j] = p0 + m;
          y[j + H] = p1 + m;
        }
      }
      return;
    case QuantType::q8_0:
      for (std::int64_t i = 0; i < blocks; ++i, y += kQuantBlock) {
        const auto b = load_block<BlockQ8_0>(src + i * sizeof(BlockQ8_0));
        const float d = half_to_float(b.d);
        for (int j = 0; j < kQuantBlock; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
      }
      return;
  }
  NG_THROW(ArgumentError, "dequantize_blocks: type = ", static_cast<std::uint32_t>(type),
           ": must be Q4_0, Q4_1 or Q8_0");
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
  NG_CHECK_ARG(rows > 0 && cols > 0 && cols % kQuantBlock == 0, "quantize: [", rows, ", ", cols,
               "]: rows must be positive and cols a positive multiple of ", kQuantBlock);
  NG_CHECK_ARG(values.size() == static_cast<std::size_t>(rows * cols), "quantize: values has ",
               values.size(), " floats: must hold rows * cols = ", rows * cols);
  const std::int64_t blocks = rows * cols / kQuantBlock;
  Tensor bytes = empty({rows, cols / kQuantBlock * static_cast<std::int64_t>(quant_block_bytes(type))},
                       DType::u8);
  auto* out = static_cast<std::byte*>(bytes.data());
  switch (type) {
    case QuantType::q4_0: quantize_q4_0(values.data(), out, blocks); break;
    case QuantType::q4_1: quantize_q4_1(values.data(), out, blocks); break;
    case QuantType::q8_0: quantize_q8_0(values.data(), out, blocks); break;
    default:
      NG_THROW(ArgumentError, "quantize: type = ", static_cast<std::uint32_t>(type),
               ": must be Q4_0, Q4_1 or Q8_0");
  }
  return QuantWeight(std::move(bytes), type, rows, cols);
}

}  // namespace npugraph::ops
