// ggml's tensor types as data, and dequantisation of the block formats to float32: the types the
// ops layer computes on through its quantisation table (npugraph/ops/quant.hpp), the others here.
//
// Each value is computed as ggml's reference dequantize_row_* computes it, one float multiply (and one
// float add for the formats with a minimum), so results are bitwise equal to ggml's and to gguf-py's
// numpy code. This file must not be built with -ffp-contract=fast (the project builds ISO C++, where
// GCC does not contract).
#include <array>
#include <type_traits>
#include <cstring>

#include "npugraph/dtype.hpp"
#include "npugraph/error.hpp"
#include "npugraph/llm/gguf.hpp"
#include "npugraph/ops/quant.hpp"

namespace npugraph::llm {
namespace {

// Indexed by the type number; name empty for numbers that are not a type (4, 5, 31-33, 36-38 were
// removed from ggml and must not appear in files).
constexpr std::size_t kTypeCount = 40;
constexpr std::array<GgmlTypeTraits, kTypeCount> kTraits = [] {
  std::array<GgmlTypeTraits, kTypeCount> t{};
  auto set = [&t](GgmlType type, std::string_view name, std::int64_t block, std::size_t bytes,
                  bool dequantizable) {
    t[static_cast<std::size_t>(type)] = {name, block, bytes, dequantizable};
  };
  set(GgmlType::F32, "F32", 1, 4, true);
  set(GgmlType::F16, "F16", 1, 2, true);
  set(GgmlType::Q4_0, "Q4_0", 32, 18, true);
  set(GgmlType::Q4_1, "Q4_1", 32, 20, true);
  set(GgmlType::Q5_0, "Q5_0", 32, 22, true);
  set(GgmlType::Q5_1, "Q5_1", 32, 24, true);
  set(GgmlType::Q8_0, "Q8_0", 32, 34, true);
  set(GgmlType::Q8_1, "Q8_1", 32, 36, false);
  set(GgmlType::Q2_K, "Q2_K", 256, 84, true);
  set(GgmlType::Q3_K, "Q3_K", 256, 110, true);
  set(GgmlType::Q4_K, "Q4_K", 256, 144, true);
  set(GgmlType::Q5_K, "Q5_K", 256, 176, true);
  set(GgmlType::Q6_K, "Q6_K", 256, 210, true);
  set(GgmlType::Q8_K, "Q8_K", 256, 292, false);
  set(GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66, false);
  set(GgmlType::IQ2_XS, "IQ2_XS", 256, 74, false);
  set(GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98, false);
  set(GgmlType::IQ1_S, "IQ1_S", 256, 50, false);
  set(GgmlType::IQ4_NL, "IQ4_NL", 32, 18, false);
  set(GgmlType::IQ3_S, "IQ3_S", 256, 110, false);
  set(GgmlType::IQ2_S, "IQ2_S", 256, 82, false);
  set(GgmlType::IQ4_XS, "IQ4_XS", 256, 136, false);
  set(GgmlType::I8, "I8", 1, 1, false);
  set(GgmlType::I16, "I16", 1, 2, false);
  set(GgmlType::I32, "I32", 1, 4, false);
  set(GgmlType::I64, "I64", 1, 8, false);
  set(GgmlType::F64, "F64", 1, 8, false);
  set(GgmlType::IQ1_M, "IQ1_M", 256, 56, false);
  set(GgmlType::BF16, "BF16", 1, 2, true);
  set(GgmlType::TQ1_0, "TQ1_0", 256, 54, false);
  set(GgmlType::TQ2_0, "TQ2_0", 256, 66, false);
  set(GgmlType::MXFP4, "MXFP4", 32, 17, false);
  return t;
}();

constexpr GgmlTypeTraits kUnknown{"?", 1, 1, false};

float half(std::uint16_t bits) { return f16_bits_to_f32(bits); }

template <class Block>
Block load_block(const std::byte* p) {
  Block b;
  std::memcpy(&b, p, sizeof(Block));
  return b;
}

void q5_1(const std::byte* src, float* y, std::size_t blocks) {
  for (std::size_t i = 0; i < blocks; ++i, y += 32) {
    const auto b = load_block<BlockQ5_1>(src + i * sizeof(BlockQ5_1));
    const float d = half(b.d), m = half(b.m);
    std::uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    for (int j = 0; j < 16; ++j) {
      const int x0 = (b.qs[j] & 0x0f) | (static_cast<int>((qh >> j) & 1u) << 4);
      const int x1 = (b.qs[j] >> 4) | (static_cast<int>((qh >> (j + 16)) & 1u) << 4);
      const float p0 = static_cast<float>(x0) * d;
      const float p1 = static_cast<float>(x1) * d;
      y[j] = p0 + m;
      y[j + 16] = p1 + m;
    }
  }
}

// ---- K-quants: 256-element super-blocks of 16 or 8 sub-blocks, each with its own scale -------------
// Element e of a super-block; the layouts are ggml-common.h's block_q{2..6}_K. Each value is the
// sub-block's scale (a float product) times the quant, minus the sub-block's float minimum.

constexpr int kQK_K = 256;

void q2_k(const std::byte* src, float* y, std::size_t blocks) {
  struct B { std::uint8_t scales[16]; std::uint8_t qs[64]; std::uint16_t d, dmin; };
  static_assert(sizeof(B) == 84);
  for (std::size_t i = 0; i < blocks; ++i, y += kQK_K) {
    const auto b = load_block<B>(src + i * sizeof(B));
    const float d = half(b.d), dmin = half(b.dmin);
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, s = (e % 128) / 32, l = e % 32, sub = e / 16;
      const int q = (b.qs[32 * h + l] >> (2 * s)) & 3;
      const float dl = d * static_cast<float>(b.scales[sub] & 0xf);
      const float ml = dmin * static_cast<float>(b.scales[sub] >> 4);
      const float p = dl * static_cast<float>(q);
      y[e] = p - ml;
    }
  }
}

void q3_k(const std::byte* src, float* y, std::size_t blocks) {
  struct B { std::uint8_t hmask[32]; std::uint8_t qs[64]; std::uint8_t scales[12]; std::uint16_t d; };
  static_assert(sizeof(B) == 110);
  for (std::size_t i = 0; i < blocks; ++i, y += kQK_K) {
    const auto b = load_block<B>(src + i * sizeof(B));
    const float d = half(b.d);
    float dl[16];
    for (int k = 0; k < 16; ++k) {  // 6-bit scales: low nibbles in bytes 0-7, high 2 bits in 8-11
      const int low = k < 8 ? (b.scales[k] & 0xf) : (b.scales[k - 8] >> 4);
      const int high = (b.scales[8 + k % 4] >> (2 * (k / 4))) & 3;
      dl[k] = d * static_cast<float>(static_cast<std::int8_t>(low | (high << 4)) - 32);
    }
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, s = (e % 128) / 32, l = e % 32;
      const int low = (b.qs[32 * h + l] >> (2 * s)) & 3;
      const int bit = (b.hmask[l] >> (e / 32)) & 1;
      y[e] = dl[e / 16] * static_cast<float>(low - (bit ? 0 : 4));
    }
  }
}

}  // namespace

const GgmlTypeTraits* ggml_type_traits(std::uint32_t type) noexcept {
  if (type >= kTypeCount || kTraits[type].name.empty()) return nullptr;
  return &kTraits[type];
}

const GgmlTypeTraits& ggml_type_traits(GgmlType type) noexcept {
  const GgmlTypeTraits* t = ggml_type_traits(static_cast<std::uint32_t>(type));
  return t ? *t : kUnknown;
}

void dequantize_row(GgmlType type, std::span<const std::byte> src, std::span<float> dst) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  NG_CHECK_ARG(traits.dequantizable, "dequantize_row: type ", traits.name, " (",
               static_cast<std::uint32_t>(type), ") is not one npugraph dequantizes (F32, F16, BF16, "
               "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K)");
  const auto block = static_cast<std::size_t>(traits.block_size);
  NG_CHECK_ARG(dst.size() % block == 0, "dequantize_row: ", dst.size(), " elements of ",
               traits.name, " are not a whole number of ", block, "-element blocks");
  const std::size_t blocks = dst.size() / block;
  NG_CHECK_ARG(src.size() == blocks * traits.block_bytes, "dequantize_row: ", dst.size(),
               " elements of ", traits.name, " take ", blocks * traits.block_bytes,
               " bytes, the source has ", src.size());
  const std::byte* s = src.data();
  float* y = dst.data();
  switch (type) {
    case GgmlType::F32:
      if (!dst.empty()) std::memcpy(y, s, src.size());
      return;
    case GgmlType::F16:
      for (std::size_t i = 0; i < blocks; ++i) {
        std::uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        y[i] = half(h);
      }
      return;
    case GgmlType::BF16:
      for (std::size_t i = 0; i < blocks; ++i) {
        std::uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        y[i] = bf16_bits_to_f32(h);
      }
      return;
    case GgmlType::Q5_1: return q5_1(s, y, blocks);
    case GgmlType::Q2_K: return q2_k(s, y, blocks);
    case GgmlType::Q3_K: return q3_k(s, y, blocks);
    default: break;
  }
  // The types the ops layer computes on: its table's dequantisers (Note [Quantisation table]).
  if (ops::is_quant_type(static_cast<std::uint32_t>(type)))
    return ops::dequantize_blocks(static_cast<ops::QuantType>(type), s, y, static_cast<std::int64_t>(dst.size()));
  NG_THROW(InternalError, "dequantize_row: no kernel for ", traits.name);
}

}  // namespace npugraph::llm
