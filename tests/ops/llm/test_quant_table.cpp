// The quantisation table (Note [Quantisation table]): each row against ggml's format (the GGUF
// reader's own type table), every type's dequantisation against a slow element-by-element reading
// of its layout written here from ggml-common.h, hand-made Q5_0 / Q4_K / Q6_K blocks, the
// quantisers' round trips, weight_quant_linear on the types without SIMD sources against a
// double-precision reference (GEMV and GEMM bitwise alike, capture -> update -> replay bitwise),
// the embedding of a K-quant table, and the errors a type's missing kernels give.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "npugraph/llm/gguf.hpp"
#include "npugraph/ops/embedding.hpp"
#include "npugraph/ops/linear.hpp"
#include "npugraph/ops/quant.hpp"
#include "ops/llm/llm_ops_util.hpp"
#include "ops/llm/quant_weights.hpp"

namespace llm_ops_test {
namespace {

using ng::ops::QuantType;
using ng::ops::QuantWeight;

constexpr QuantType kAll[] = {QuantType::q4_0, QuantType::q4_1, QuantType::q5_0, QuantType::q8_0,
                              QuantType::q4_k, QuantType::q5_k, QuantType::q6_k};
constexpr QuantType kTableOnly[] = {QuantType::q5_0, QuantType::q4_k, QuantType::q5_k, QuantType::q6_k};

std::string name_of(QuantType t) { return std::string(ng::ops::quant_type_name(t)); }

double half_at(const std::uint8_t* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return ng::f16_bits_to_f32(h);
}

// Element e of block `b` as ggml-common.h lays it out, in double (every product is exact, so the
// float of the double result is the one rounding ggml's float code makes).
double element(QuantType type, const std::uint8_t* b, int e) {
  auto nib = [](std::uint8_t v, int hi) { return hi ? v >> 4 : v & 15; };
  switch (type) {
    case QuantType::q4_0: return (nib(b[2 + e % 16], e / 16) - 8) * half_at(b);
    case QuantType::q4_1: return nib(b[4 + e % 16], e / 16) * half_at(b) + half_at(b + 2);
    case QuantType::q8_0: return static_cast<std::int8_t>(b[2 + e]) * half_at(b);
    case QuantType::q5_0: {
      const int high = (b[2 + e / 8] >> (e % 8)) & 1;  // qh as a little-endian uint32: bit e
      return ((nib(b[6 + e % 16], e / 16) | high << 4) - 16) * half_at(b);
    }
    case QuantType::q4_k:
    case QuantType::q5_k: {
      const std::uint8_t* sc = b + 4;
      const int s = e / 32, l = e % 32;
      const int scale = s < 4 ? sc[s] & 63 : (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
      const int min = s < 4 ? sc[s + 4] & 63 : (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
      const bool five = type == QuantType::q5_k;
      const std::uint8_t* qs = b + 16 + (five ? 32 : 0);
      int q = nib(qs[32 * (s / 2) + l], s % 2);
      if (five) q |= ((b[16 + l] >> s) & 1) << 4;
      return half_at(b) * scale * q - half_at(b + 2) * min;
    }
    case QuantType::q6_k: {
      const int h = e / 128, r = e % 128;
      const int low = nib(b[64 * h + r % 64], r / 64);
      const int high = (b[128 + 32 * h + r % 32] >> (2 * (r / 32))) & 3;
      return half_at(b + 208) * static_cast<std::int8_t>(b[192 + e / 16]) * ((low | high << 4) - 32);
    }
  }
  return NAN;
}

TEST(QuantTable, RowsAreGgmlsFormats) {
  for (const ng::ops::QuantTraits& t : ng::ops::kQuantTable) {
    const auto& g = ng::llm::ggml_type_traits(static_cast<ng::llm::GgmlType>(static_cast<std::uint32_t>(t.type)));
    EXPECT_EQ(t.name, g.name);
    EXPECT_EQ(t.block, g.block) << t.name;
    EXPECT_EQ(t.block_bytes, g.block_bytes) << t.name;
    EXPECT_TRUE(ng::ops::is_quant_type(static_cast<std::uint32_t>(t.type)));
  }
  EXPECT_FALSE(ng::ops::is_quant_type(7));   // Q5_1: a ggml type without a row
  EXPECT_FALSE(ng::ops::is_quant_type(11));  // Q3_K
  EXPECT_EQ(ng::ops::quant_type_names(), "Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K");
}

TEST(QuantTable, DequantizeFollowsTheLayoutElementByElement) {
  for (QuantType type : kAll) {
    const std::int64_t block = ng::ops::quant_block_size(type), blocks = 9;
    const auto bytes = random_blocks(type, blocks, 40 + static_cast<std::uint32_t>(type));
    std::vector<float> got(static_cast<std::size_t>(blocks * block));
    ng::ops::dequantize_blocks(type, bytes.data(), got.data(), blocks * block);
    const auto* u = reinterpret_cast<const std::uint8_t*>(bytes.data());
    int bad = 0;
    for (std::int64_t i = 0; i < blocks * block && bad < 3; ++i) {
      const float want = static_cast<float>(element(type, u + (i / block) * ng::ops::quant_block_bytes(type),
                                                    static_cast<int>(i % block)));
      if (std::memcmp(&want, &got[i], sizeof want) != 0) {
        ++bad;
        ADD_FAILURE() << name_of(type) << " element " << i << ": " << got[i] << ", layout says " << want;
      }
    }
  }
}

TEST(QuantTable, HandMadeBlocks) {
  float y[256];
  // Q5_0, d = 0.25: element j's quant = its nibble | bit j of qh << 4, minus 16.
  ng::ops::BlockQ5_0 b5{half_bits(0.25f), {0x01, 0x00, 0x00, 0x80}, {}};  // bits 0 and 31 set
  for (int j = 0; j < 16; ++j) b5.qs[j] = static_cast<std::uint8_t>(j | (15 - j) << 4);
  ng::ops::dequantize_blocks(QuantType::q5_0, reinterpret_cast<const std::byte*>(&b5), y, 32);
  EXPECT_EQ(y[0], (0 + 16 - 16) * 0.25f);
  EXPECT_EQ(y[1], (1 - 16) * 0.25f);
  EXPECT_EQ(y[16], (15 - 16) * 0.25f);
  EXPECT_EQ(y[31], (0 + 16 - 16) * 0.25f);  // nibble 15 - 15 = 0, fifth bit set
  // Q4_K, d = 1, dmin = 0.5, sub-block s: scale 8 s + 1, minimum 63 - 8 s (s >= 4 need the high
  // bits), quant of element l = l % 16:  x = (8 s + 1) * (l % 16) - 0.5 * (63 - 8 s).
  ng::ops::BlockQ4_K bk{};
  bk.d = half_bits(1.0f);
  bk.dmin = half_bits(0.5f);
  for (int s = 0; s < 8; ++s) {
    const int sc = 8 * s + 1, mn = 63 - 8 * s;
    if (s < 4) {
      bk.scales[s] = static_cast<std::uint8_t>(bk.scales[s] | sc);
      bk.scales[s + 4] = static_cast<std::uint8_t>(bk.scales[s + 4] | mn);
    } else {
      bk.scales[s + 4] = static_cast<std::uint8_t>((sc & 15) | (mn & 15) << 4);
      bk.scales[s - 4] = static_cast<std::uint8_t>(bk.scales[s - 4] | (sc >> 4) << 6);
      bk.scales[s] = static_cast<std::uint8_t>(bk.scales[s] | (mn >> 4) << 6);
    }
    for (int l = 0; l < 32; ++l)
      bk.qs[32 * (s / 2) + l] = static_cast<std::uint8_t>(bk.qs[32 * (s / 2) + l] | (l % 16) << (4 * (s % 2)));
  }
  ng::ops::dequantize_blocks(QuantType::q4_k, reinterpret_cast<const std::byte*>(&bk), y, 256);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32, l = e % 32;
    ASSERT_EQ(y[e], static_cast<float>((8 * s + 1) * (l % 16) - 0.5 * (63 - 8 * s))) << "Q4_K element " << e;
  }
  // Q6_K, d = 0.5, scales[i] = i - 8 (negative ones too), quant of element e = e % 64:
  // x = 0.5 * (e / 16 - 8) * (e % 64 - 32).
  ng::ops::BlockQ6_K b6{};
  b6.d = half_bits(0.5f);
  for (int i = 0; i < 16; ++i) b6.scales[i] = static_cast<std::int8_t>(i - 8);
  for (int e = 0; e < 256; ++e) {
    const int q = e % 64, h = e / 128, r = e % 128;
    b6.ql[64 * h + r % 64] = static_cast<std::uint8_t>(b6.ql[64 * h + r % 64] | (q & 15) << (4 * (r / 64)));
    b6.qh[32 * h + r % 32] = static_cast<std::uint8_t>(b6.qh[32 * h + r % 32] | (q >> 4) << (2 * (r / 32)));
  }
  ng::ops::dequantize_blocks(QuantType::q6_k, reinterpret_cast<const std::byte*>(&b6), y, 256);
  for (int e = 0; e < 256; ++e)
    ASSERT_EQ(y[e], 0.5f * static_cast<float>((e / 16 - 8) * (e % 64 - 32))) << "Q6_K element " << e;
}

// Round trips: Q5_0 (ggml's reference quantiser) within half a step amax / 16 (a whole step for
// values of the sign opposite to the block's extreme, which the range [-16 d, 15 d] clamps); the
// K-quants within 0.7 of the super-block's largest sub-block step plus its minimum's 6-bit
// rounding (the step itself rounded to 6 bits of the largest one moves each quant by up to 0.12
// of it).
TEST(QuantTable, QuantizersRoundTrip) {
  const std::int64_t rows = 3, cols = 512;
  const auto v = random_values(static_cast<std::size_t>(rows * cols), 5, -2.0f, 1.5f);
  for (QuantType type : kTableOnly) {
    const QuantWeight w = ng::ops::quantize(type, v, rows, cols);
    std::vector<float> back(v.size());
    ng::ops::dequantize_rows(w, 0, rows, back.data());
    const std::int64_t block = ng::ops::quant_block_size(type);
    for (std::int64_t b0 = 0; b0 < rows * cols; b0 += block) {
      float lo = 0, hi = 0, amax = 0, max_step = 0;
      for (std::int64_t i = b0; i < b0 + block; ++i) {
        lo = std::min(lo, v[i]);
        hi = std::max(hi, v[i]);
        amax = std::max(amax, std::fabs(v[i]));
      }
      const int sub = type == QuantType::q6_k ? 16 : 32;
      for (std::int64_t s = b0; s < b0 + block; s += sub) {
        float slo = 0, shi = 0, sam = 0;
        for (std::int64_t i = s; i < s + sub; ++i) {
          slo = std::min(slo, v[i]);
          shi = std::max(shi, v[i]);
          sam = std::max(sam, std::fabs(v[i]));
        }
        max_step = std::max(max_step, type == QuantType::q6_k ? sam / 32
                                      : type == QuantType::q5_k ? (shi - slo) / 31 : (shi - slo) / 15);
      }
      const float tol = type == QuantType::q5_0 ? amax / 16 : 0.7f * max_step + -lo / 63;
      for (std::int64_t i = b0; i < b0 + block; ++i)
        ASSERT_NEAR(back[i], v[i], tol + 1e-6f) << name_of(type) << " element " << i;
    }
  }
}

// ---- weight_quant_linear on the table types --------------------------------------------------------

std::vector<float> dequantized(const QuantWeight& w) {
  std::vector<float> v(static_cast<std::size_t>(w.rows() * w.cols()));
  ng::ops::dequantize_rows(w, 0, w.rows(), v.data());
  return v;
}

// y against sum_k x w in double, within the bound of a float32 chain of the same terms.
void expect_matches_reference(const Tensor& x, const QuantWeight& w, const Tensor& y, const std::string& what) {
  const std::vector<float> xv = floats(x), wv = dequantized(w), yv = floats(y);
  const std::int64_t T = x.size(0), N = w.rows(), K = w.cols();
  int bad = 0;
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t n = 0; n < N && bad < 3; ++n) {
      double s = 0, a = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(xv[t * K + k]) * wv[n * K + k];
        s += p;
        a += std::fabs(p);
      }
      const double tol = (static_cast<double>(K) / 4 + 8) * 1.2e-7 * a + 1e-30;
      if (!(std::fabs(yv[t * N + n] - s) <= tol)) {
        ++bad;
        ADD_FAILURE() << what << ": y[" << t << ", " << n << "] = " << yv[t * N + n] << ", reference " << s;
      }
    }
}

TEST(QuantTableLinear, MatchesTheReferenceGemvAndGemm) {
  std::uint32_t seed = 300;
  for (QuantType type : kTableOnly) {
    const std::int64_t blk = ng::ops::quant_block_size(type);
    for (const auto& [T, N, kb] : std::vector<std::array<std::int64_t, 3>>{
             {1, 1, 1}, {1, 37, 2}, {3, 13, 3}, {8, 64, 6}, {16, 9, 2}, {17, 21, 1}, {40, 33, 3}}) {
      const std::int64_t K = kb * blk;
      const QuantWeight w = random_weight(type, N, K, ++seed);
      const Tensor x = random_tensor({T, K}, ++seed);
      const Tensor y = ng::ops::weight_quant_linear(x, w);
      ng::device_synchronize();
      expect_matches_reference(x, w, y, name_of(type) + " T=" + std::to_string(T) + " N=" +
                                            std::to_string(N) + " K=" + std::to_string(K));
    }
  }
}

// The SIMD sources see exactly the table's values: x = unit rows e_k give y[k, n] = w[n, k] bitwise
// (one product by 1, the rest by 0), through the GEMV (16 rows at a time) and the GEMM (all K).
TEST(QuantTableLinear, UnitRowsReadBackTheDequantisedWeights) {
  for (QuantType type : kTableOnly) {
    const std::int64_t N = 5, K = 2 * ng::ops::quant_block_size(type);
    const QuantWeight w = random_weight(type, N, K, 71);
    const std::vector<float> want = dequantized(w);
    Tensor eye = ng::empty({K, K}, DType::f32);
    for (std::int64_t i = 0; i < K * K; ++i) eye.data_ptr<float>()[i] = i / K == i % K ? 1.0f : 0.0f;
    for (std::int64_t T : {std::int64_t{16}, K}) {
      for (std::int64_t k0 = 0; k0 < K; k0 += T) {
        const Tensor x = Tensor::from_blob(eye.data_ptr<float>() + k0 * K, {T, K}, DType::f32, eye.storage());
        const Tensor y = ng::ops::weight_quant_linear(x, w);
        ng::device_synchronize();
        for (std::int64_t t = 0; t < T; ++t)
          for (std::int64_t n = 0; n < N; ++n)
            ASSERT_EQ(at(y, t * N + n), want[n * K + k0 + t])
                << name_of(type) << " T=" << T << " row " << n << " element " << k0 + t;
      }
    }
  }
}

// Note [Linear kernels]: each output row is its own row of x's chain, so GEMV (T <= 16) and GEMM
// (T > 16) rows equal single-row calls bitwise.
TEST(QuantTableLinear, RowsAreBatchInvariant) {
  for (QuantType type : kTableOnly) {
    const std::int64_t N = 29, K = 2 * ng::ops::quant_block_size(type);
    const QuantWeight w = random_weight(type, N, K, 61);
    for (std::int64_t T : {3, 16, 17, 40}) {
      const Tensor x = random_tensor({T, K}, 62);
      const Tensor y = ng::ops::weight_quant_linear(x, w);
      ng::device_synchronize();
      for (std::int64_t t = 0; t < T; ++t) {
        const Tensor xt = Tensor::from_blob(x.data_ptr<float>() + t * K, {1, K}, DType::f32, x.storage());
        const Tensor yt = ng::ops::weight_quant_linear(xt, w);
        ng::device_synchronize();
        ASSERT_EQ(0, std::memcmp(yt.data(), y.data_ptr<float>() + t * N, N * sizeof(float)))
            << name_of(type) << " T=" << T << " row " << t;
      }
    }
  }
}

TEST(QuantTableLinear, UpdatedReplayEqualsEagerBitwise) {
  for (QuantType type : kTableOnly) {
    const QuantWeight w = random_weight(type, 70, 512, 81);
    for (std::int64_t T : {1, 4, 20}) {
      const Tensor y = ng::empty({T, 70}, DType::f32);
      expect_updated_replay_matches_eager(w, random_tensor({T, 512}, 82), random_tensor({T, 512}, 83), y, {});
    }
  }
}

TEST(QuantTableEmbedding, RowsAreTheDequantisedRows) {
  const QuantWeight table = random_weight(QuantType::q6_k, 12, 512, 91);
  const Tensor ids = int_tensor({3, 0, 11, 3}, {4});
  const Tensor out = ng::ops::embedding(ids, table);
  ng::device_synchronize();
  const std::vector<float> all = dequantized(table);
  for (int t = 0; t < 4; ++t)
    EXPECT_EQ(0, std::memcmp(out.data_ptr<float>() + t * 512, all.data() + ids.data_ptr<std::int32_t>()[t] * 512,
                             512 * sizeof(float)));
}

TEST(QuantTableErrors, MissingKernelsAndBlocksAreNamed) {
  const QuantWeight w = random_weight(QuantType::q4_k, 8, 256, 1);
  EXPECT_TRUE(ngtest::throws<ng::UnsupportedError>([&] { ng::ops::pack_rows16(w); },
                                                   {"pack_rows16: weight = Q4_K[8, 256]",
                                                    "rows16 lays out Q4_0, Q4_1 and Q8_0 only"}));
  EXPECT_ARG_ERROR(QuantWeight(w.bytes(), QuantType::q4_k, 8, 256, ng::ops::QuantLayout::rows16),
                   "QuantWeight: layout = rows16 for Q4_K", "rows16 lays out Q4_0, Q4_1 and Q8_0 only");
  EXPECT_ARG_ERROR(QuantWeight(ng::empty({144}, DType::u8), QuantType::q4_k, 1, 128), "QuantWeight: cols = 128",
                   "multiple of the block size 256 of Q4_K");
  EXPECT_ARG_ERROR(QuantWeight(ng::empty({100}, DType::u8), QuantType::q6_k, 1, 256),
                   "bytes = uint8[100] (100 bytes)", "exactly 210 bytes for Q6_K[1, 256]");
  std::vector<float> out(32);
  EXPECT_ARG_ERROR(ng::ops::dequantize_blocks(QuantType::q5_k, w.data(), out.data(), 32),
                   "dequantize_blocks: n = 32", "multiple of the 256-element blocks of Q5_K");
  EXPECT_ARG_ERROR(ng::ops::quantize(QuantType::q6_k, std::vector<float>(64), 1, 64), "quantize: [1, 64]",
                   "multiple of the 256-element blocks of Q6_K");
  // The runtime stays usable: the same weight runs with float activations afterwards.
  const Tensor y = ng::ops::weight_quant_linear(random_tensor({1, 256}, 2), w);
  ng::device_synchronize();
  EXPECT_TRUE(std::isfinite(at(y, 0)));
}

}  // namespace
}  // namespace llm_ops_test
