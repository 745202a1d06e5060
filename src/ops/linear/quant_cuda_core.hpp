// Element j of a row of Q4_0 / Q4_1 / Q8_0 blocks (npugraph/ops/quant.hpp) as __host__ __device__
// code, for the embedding and linear CUDA kernels: ggml's dequantisation bit for bit (the scale's
// half bits converted exactly, then one multiply and, for Q4_1, one add; the product is exact in
// float32, so fused or not the add rounds once). Blocks are read byte by byte: a row of 18- or
// 34-byte blocks has no alignment to rely on. The formats are spelled by ggml's type numbers and
// byte sizes here, not by including quant.hpp (nvcc compiles this header; quant.cpp checks that
// the numbers are QuantType's and the BlockQ* sizes).
#pragma once

#include "ops/activation/cuda_io.hpp"

namespace npugraph::ops {
enum class QuantType : std::uint32_t;  // npugraph/ops/quant.hpp
}  // namespace npugraph::ops

namespace npugraph::ops::quant_cuda {

using namespace cuda_io;

inline constexpr std::uint32_t kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 8;  // ggml type numbers
inline constexpr std::int64_t kQ4_0Bytes = 18, kQ4_1Bytes = 20, kQ8_0Bytes = 34, kBlock = 32;

NG_HD inline float half_at(const std::uint8_t* b) {
  return half_to_float(static_cast<std::uint16_t>(b[0] | (b[1] << 8)));
}

NG_HD inline float dequant(QuantType type, const std::byte* row, std::int64_t j) {
  const auto* r = reinterpret_cast<const std::uint8_t*>(row);
  const std::int64_t blk = j / kBlock, e = j % kBlock;
  const int lane = static_cast<int>(e % (kBlock / 2));
  const bool high = e >= kBlock / 2;
  switch (static_cast<std::uint32_t>(type)) {
    case kQ4_0: {
      const std::uint8_t* b = r + blk * kQ4_0Bytes;
      const int q = high ? (b[2 + lane] >> 4) : (b[2 + lane] & 0xf);
      return fmul(static_cast<float>(q - 8), half_at(b));
    }
    case kQ4_1: {
      const std::uint8_t* b = r + blk * kQ4_1Bytes;
      const int q = high ? (b[4 + lane] >> 4) : (b[4 + lane] & 0xf);
      return fadd(fmul(static_cast<float>(q), half_at(b)), half_at(b + 2));
    }
    default: {
      const std::uint8_t* b = r + blk * kQ8_0Bytes;
      return fmul(static_cast<float>(static_cast<std::int8_t>(b[2 + e])), half_at(b));
    }
  }
}

}  // namespace npugraph::ops::quant_cuda
