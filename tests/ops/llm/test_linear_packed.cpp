// The rows16 weight layout (QuantLayout, Note [Packed weights] in linear_packed_simd.cpp): where
// pack_rows16 puts each byte (written out here from the Note), the round trip, and
// weight_quant_linear on packed weights — with q8 activations against the Note's formula evaluated
// here from the rows layout's blocks, batch invariance, the float32 paths bitwise the rows
// layout's, capture -> replay and task update bitwise, two threads, and the layout's errors. The
// simd_target_* ctests run these on AVX2, SSE4 and SCALAR as well (the suite name starts with
// LinearQuant).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "hwy/targets.h"
#include "npugraph/ops/embedding.hpp"
#include "npugraph/ops/linear.hpp"
#include "npugraph/ops/quant.hpp"
#include "ops/linear/linear_params.hpp"
#include "ops/llm/llm_ops_util.hpp"
#include "ops/llm/quant_weights.hpp"
#include "ops/simd_target.hpp"

namespace llm_ops_test {
namespace {

using ng::ops::Activations;
using ng::ops::QuantLayout;
using ng::ops::QuantType;
using ng::ops::QuantWeight;
const ng::ops::QuantLinearOptions kQ8{.activations = Activations::q8};
constexpr QuantType kTypes[] = {QuantType::q4_0, QuantType::q4_1, QuantType::q5_0, QuantType::q8_0};

const std::byte* row_block(const QuantWeight& w, std::int64_t n, std::int64_t b) {
  return w.data() + n * w.row_bytes() + b * static_cast<std::int64_t>(ng::ops::quant_block_bytes(w.type()));
}

TEST(LinearQuantPacked, EveryByteIsWhereTheNoteSays) {
  const std::int64_t N = 37, K = 96, nb = K / 32;  // 3 groups, the last with 5 rows
  for (QuantType type : kTypes) {
    const QuantWeight w = random_weight(type, N, K, 11);
    const QuantWeight p = ng::ops::pack_rows16(w);
    EXPECT_EQ(p.layout(), QuantLayout::rows16);
    const auto bb = static_cast<std::int64_t>(ng::ops::quant_block_bytes(type));
    const std::int64_t hdr = type == QuantType::q4_1 ? 4 : type == QuantType::q5_0 ? 6 : 2, qbytes = bb - hdr;
    ASSERT_EQ(p.bytes().nbytes(), static_cast<std::size_t>(48 * nb * bb)) << "three whole groups";
    const auto* pb = p.data();
    for (std::int64_t n = 0; n < 48; ++n)
      for (std::int64_t b = 0; b < nb; ++b) {
        // Group n / 16, block b: 16 scales, (Q4_1) 16 minimums, then vectors of 64 bytes.
        const std::byte* gb = pb + (n / 16) * 16 * nb * bb + b * 16 * bb;
        const std::int64_t r = n % 16;
        const std::byte zero[4] = {};
        const std::byte* src = n < N ? row_block(w, n, b) : nullptr;
        auto expect = [&](const std::byte* at, std::int64_t off, int len, const char* what) {
          EXPECT_EQ(0, std::memcmp(at, src ? src + off : zero, static_cast<std::size_t>(len)))
              << ng::ops::quant_type_name(type) << " row " << n << " block " << b << " " << what;
        };
        expect(gb + 2 * r, 0, 2, "d");
        if (type == QuantType::q4_1) expect(gb + 32 + 2 * r, 2, 2, "m");
        if (type == QuantType::q5_0) expect(gb + 32 + 4 * r, 2, 4, "qh");  // a vector, row r's lane
        for (std::int64_t j = 0; j < qbytes / 4; ++j)
          expect(gb + 16 * hdr + 64 * j + 4 * r, hdr + 4 * j, 4, "quants");
      }
    const QuantWeight back = ng::ops::unpack_rows(p);
    EXPECT_EQ(back.layout(), QuantLayout::rows);
    ASSERT_EQ(back.bytes().nbytes(), w.bytes().nbytes());
    EXPECT_EQ(0, std::memcmp(back.data(), w.data(), w.bytes().nbytes()));
    std::vector<float> a(static_cast<std::size_t>(N * K)), c(a.size());
    ng::ops::dequantize_rows(w, 0, N, a.data());
    ng::ops::dequantize_rows(p, 0, N, c.data());
    EXPECT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * sizeof(float)));
  }
}

// The Note's formula from the rows layout's blocks and x's quants (the kernel's quantiser, checked
// against its definition in test_linear_q8.cpp). fma is one rounding on the targets with FMA; SSE4
// multiplies then adds, so there the result is compared within float32 rounding.
struct Want {
  std::vector<float> y;
  std::vector<double> bound;
};
Want formula(const std::vector<float>& x, std::int64_t T, const QuantWeight& w) {
  const std::int64_t N = w.rows(), K = w.cols(), nb = K / 32;
  std::vector<std::int8_t> q(x.size());
  std::vector<float> d(static_cast<std::size_t>(T * nb));
  ng::ops::linear_impl::quantize_rows_q8(x.data(), T, K, K, {q.data(), d.data()});
  Want r;
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t n = 0; n < N; ++n) {
      float acc = 0;
      double mag = 0;
      for (std::int64_t b = 0; b < nb; ++b) {
        const auto* blk = reinterpret_cast<const std::uint8_t*>(row_block(w, n, b));
        std::uint16_t dh, mh = 0;
        std::memcpy(&dh, blk, 2);
        if (w.type() == QuantType::q4_1) std::memcpy(&mh, blk + 2, 2);
        const float dw = ng::f16_bits_to_f32(dh), mw = ng::f16_bits_to_f32(mh);
        const std::int8_t* xq = q.data() + (t * nb + b) * 32;
        std::int32_t dot = 0, S = 0;
        for (int j = 0; j < 32; ++j) S += xq[j];
        if (w.type() == QuantType::q8_0) {
          for (int j = 0; j < 32; ++j) dot += static_cast<std::int8_t>(blk[2 + j]) * xq[j];
        } else {
          const bool q5 = w.type() == QuantType::q5_0;
          const std::uint8_t* qs = blk + (w.type() == QuantType::q4_1 ? 4 : q5 ? 6 : 2);
          std::uint32_t qh = 0;  // Q5_0: element j's fifth bit is bit j
          if (q5) std::memcpy(&qh, blk + 2, 4);
          for (int j = 0; j < 16; ++j)
            dot += ((qs[j] & 15) + 16 * static_cast<int>((qh >> j) & 1)) * xq[j] +
                   ((qs[j] >> 4) + 16 * static_cast<int>((qh >> (16 + j)) & 1)) * xq[j + 16];
          if (w.type() == QuantType::q4_0) dot -= 8 * S;
          if (q5) dot -= 16 * S;
        }
        const float dx = d[static_cast<std::size_t>(t * nb + b)];
        acc = std::fma(static_cast<float>(dot) * dx, dw, acc);
        mag += std::fabs(static_cast<double>(dot) * dx * dw);
        if (w.type() == QuantType::q4_1) {
          acc = std::fma(static_cast<float>(S) * dx, mw, acc);
          mag += std::fabs(static_cast<double>(S) * dx * mw);
        }
      }
      r.y.push_back(acc);
      r.bound.push_back(2 * static_cast<double>(nb + 2) * 1.2e-7 * mag + 1e-30);
    }
  return r;
}

bool fused_target() { return ng::ops::simd_dispatch_target() != HWY_SSE4; }

TEST(LinearQuantPacked, Q8ActivationsComputeTheNotesFormula) {
  struct Case { std::int64_t N, K, T; };
  for (QuantType type : kTypes)
    for (const Case c : {Case{16, 32, 1}, Case{37, 96, 1}, Case{64, 576, 1}, Case{50, 256, 3},
                         Case{48, 128, 8}, Case{33, 64, 16}, Case{40, 160, 5}, Case{17, 96, 13},
                         // prefill's row counts: the packed kernel serves every T
                         Case{33, 96, 17}, Case{40, 160, 40}, Case{20, 64, 129}}) {
      const QuantWeight w = random_weight(type, c.N, c.K, 21 + static_cast<std::uint32_t>(c.N));
      const std::vector<float> xv = random_values(static_cast<std::size_t>(c.T * c.K), 22, -2.0f, 2.0f);
      const Tensor y = ng::ops::weight_quant_linear(make_tensor(xv, {c.T, c.K}), ng::ops::pack_rows16(w), {},
                                                    DType::f32, kQ8);
      ng::device_synchronize();
      const Want want = formula(xv, c.T, w);
      const std::string what = std::string(ng::ops::quant_type_name(type)) + " N=" + std::to_string(c.N) +
                               " K=" + std::to_string(c.K) + " T=" + std::to_string(c.T);
      for (std::size_t i = 0; i < want.y.size(); ++i) {
        const float got = at(y, static_cast<std::int64_t>(i));
        if (fused_target()) {
          ASSERT_EQ(0, std::memcmp(&got, &want.y[i], sizeof got)) << what << " output " << i << ": " << got << " want " << want.y[i];
        } else {
          ASSERT_NEAR(got, want.y[i], want.bound[i]) << what << " output " << i;
        }
      }
    }
}

TEST(LinearQuantPacked, HandComputedQ4_1Block) {
  // One Q4_1 row of one block: nibble j = j % 16, d = 0.5, m = -1. x = the quants 1..32 with
  // amax 127 forced by the last value, so x quantises to itself (d_x = 1). Then
  // y = float(sum n_j q_j) * 1 * 0.5 + float(sum q_j) * 1 * -1.
  std::vector<std::byte> blk(20);
  const std::uint16_t d = half_bits(0.5f), m = half_bits(-1.0f);
  std::memcpy(blk.data(), &d, 2);
  std::memcpy(blk.data() + 2, &m, 2);
  for (int j = 0; j < 16; ++j) blk[static_cast<std::size_t>(4 + j)] = static_cast<std::byte>(j | (j << 4));
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[static_cast<std::size_t>(j)] = static_cast<float>(j + 1);
  x[31] = 127;
  double dot = 0, S = 0;
  for (int j = 0; j < 32; ++j) {
    dot += (j % 16) * x[static_cast<std::size_t>(j)];
    S += x[static_cast<std::size_t>(j)];
  }
  const QuantWeight w = weight_from(QuantType::q4_1, blk.data(), blk.size(), 1, 32);
  const Tensor y = ng::ops::weight_quant_linear(make_tensor(x, {1, 32}), ng::ops::pack_rows16(w), {},
                                                DType::f32, kQ8);
  ng::device_synchronize();
  EXPECT_EQ(at(y, 0), static_cast<float>(dot * 0.5 - S));
}

// Every T (1-16: whole tiles of rows of x, a last partial tile, two tiles; then prefill's row
// counts, which the packed kernel serves too; Note [Packed weights]) gives each row the bits of a
// single-row call.
TEST(LinearQuantPacked, RowsAreBatchInvariantAndTheFloatPathsAreTheRowsLayouts) {
  const std::int64_t N = 45, K = 192;
  std::vector<std::int64_t> counts;
  for (std::int64_t T = 2; T <= 16; ++T) counts.push_back(T);
  for (std::int64_t T : {17, 23, 40, 128}) counts.push_back(T);
  for (QuantType type : kTypes) {
    const QuantWeight w = random_weight(type, N, K, 31);
    const QuantWeight p = ng::ops::pack_rows16(w);
    for (const std::int64_t T : counts) {
      const Tensor x = random_tensor({T, K}, 32);
      const Tensor y = ng::ops::weight_quant_linear(x, p, {}, DType::f32, kQ8);
      ng::device_synchronize();
      for (std::int64_t t = 0; t < T; ++t) {
        const Tensor xt = Tensor::from_blob(x.data_ptr<float>() + t * K, {1, K}, DType::f32, x.storage());
        const Tensor yt = ng::ops::weight_quant_linear(xt, p, {}, DType::f32, kQ8);
        ng::device_synchronize();
        ASSERT_EQ(0, std::memcmp(yt.data(), y.data_ptr<float>() + t * N, N * sizeof(float)))
            << ng::ops::quant_type_name(type) << " T=" << T << " row " << t;
      }
    }
    // Float32 activations (GEMV and GEMM): the rows layout's bits. The rows layout's q8 GEMV stops
    // at 16 rows (its float32 GEMM above); rows16's q8 kernel does not.
    for (std::int64_t T : {1, 5, 17, 40}) {
      const Tensor x = random_tensor({T, K}, 33);
      const Tensor bias = random_tensor({N}, 34);
      const Tensor yp = ng::ops::weight_quant_linear(x, p, bias, DType::bf16);
      const Tensor yw = ng::ops::weight_quant_linear(x, w, bias, DType::bf16);
      const Tensor yq = ng::ops::weight_quant_linear(x, p, {}, DType::f32, kQ8);
      const Tensor yrq = ng::ops::weight_quant_linear(x, w, {}, DType::f32, kQ8);
      const Tensor yf = ng::ops::weight_quant_linear(x, w);
      ng::device_synchronize();
      EXPECT_TRUE(ngtest::bitwise_equal(yp, yw)) << ng::ops::quant_type_name(type) << " T=" << T;
      if (T > 16) {
        EXPECT_TRUE(ngtest::bitwise_equal(yrq, yf)) << ng::ops::quant_type_name(type) << " T=" << T;
        EXPECT_FALSE(ngtest::bitwise_equal(yq, yf)) << ng::ops::quant_type_name(type) << " T=" << T
                                                    << ": rows16 with q8 activations computed float32";
      }
    }
  }
}

TEST(LinearQuantPacked, BiasAndHalfOutputs) {
  const QuantWeight p = ng::ops::pack_rows16(random_weight(QuantType::q4_1, 20, 64, 41));
  // 9 rows of x: a whole 8-row tile and one more; rows 0-15 of a group are stored as a vector, 16-19 one by one.
  const Tensor x = random_tensor({9, 64}, 42), bias = random_tensor({20}, 43);
  const Tensor y = ng::ops::weight_quant_linear(x, p, {}, DType::f32, kQ8);
  const Tensor yb = ng::ops::weight_quant_linear(x, p, bias, DType::f16, kQ8);
  const Tensor yf = ng::ops::weight_quant_linear(x, p, bias, DType::f32, kQ8);
  ng::device_synchronize();
  for (std::int64_t i = 0; i < 9 * 20; ++i) {
    EXPECT_EQ(at(yb, i), static_cast<float>(ng::half(at(y, i) + at(bias, i % 20)))) << i;
    EXPECT_EQ(at(yf, i), at(y, i) + at(bias, i % 20)) << i;
  }
}

TEST(LinearQuantPacked, ReplayAndUpdateEqualEagerBitwise) {
  const QuantWeight p = ng::ops::pack_rows16(random_weight(QuantType::q4_1, 100, 256, 51));
  for (std::int64_t T : {1, 8}) {
    const Tensor x = random_tensor({T, 256}, 52);
    const Tensor y = ng::empty({T, 100}, DType::f32);
    expect_replay_matches_eager({y}, [&] { ng::ops::weight_quant_linear_out(x, p, {}, y, kQ8); });
  }
  expect_updated_replay_matches_eager(p, random_tensor({2, 256}, 53), random_tensor({2, 256}, 54),
                                      ng::empty({2, 100}, DType::f32), kQ8);
}

// The packed kernel's per-call sums of x live in the launching thread's buffers (RunPackedQ8).
TEST(LinearQuantPacked, ThreadsOnTheirOwnStreamsGetTheSingleThreadedBits) {
  expect_threads_get_single_threaded_bits(ng::ops::pack_rows16(random_weight(QuantType::q4_0, 1024, 256, 61)), 62,
                                          kQ8);
}

TEST(LinearQuantPacked, LayoutErrors) {
  const QuantWeight w = random_weight(QuantType::q4_1, 20, 64, 71);
  const QuantWeight p = ng::ops::pack_rows16(w);
  EXPECT_ARG_ERROR(ng::ops::pack_rows16(p), "pack_rows16: weight = Q4_1[20, 64] rows16",
                   "must be in the rows layout");
  EXPECT_ARG_ERROR(ng::ops::unpack_rows(w), "unpack_rows: weight = Q4_1[20, 64]",
                   "must be in the rows16 layout");
  EXPECT_ARG_ERROR(ng::ops::pack_rows16(QuantWeight()), "pack_rows16: weight is undefined");
  // rows16 bytes are whole groups: 32 rows' worth for 20 rows, not 20 rows'.
  EXPECT_ARG_ERROR(QuantWeight(w.bytes(), QuantType::q4_1, 20, 64, QuantLayout::rows16),
                   "QuantWeight: bytes = ", "must hold exactly 1280 bytes for Q4_1[20, 64] rows16",
                   "whole groups of 16 rows");
  EXPECT_ARG_ERROR(QuantWeight(p.bytes(), QuantType::q4_1, 20, 64, static_cast<QuantLayout>(5)),
                   "QuantWeight: layout = 5", "must be QuantLayout::rows or QuantLayout::rows16");
  const Tensor ids = ng::empty({2}, DType::i32);
  ids.data_ptr<std::int32_t>()[0] = 1;
  ids.data_ptr<std::int32_t>()[1] = 2;
  // The runtime stays usable: the packed weight still runs, and the rows weight embeds.
  const Tensor y = ng::ops::weight_quant_linear(random_tensor({1, 64}, 72), p, {}, DType::f32, kQ8);
  const Tensor e = ng::ops::embedding(ids, w);
  ng::device_synchronize();
  EXPECT_TRUE(std::isfinite(at(y, 19)));
  EXPECT_TRUE(std::isfinite(at(e, 0)));
}

// A rows16 table embeds the same values as its rows layout (a tied output projection's packed copy
// serves the lookup), in every group and padding-adjacent row.
TEST(LinearQuantPacked, EmbeddingReadsRows16Tables) {
  for (QuantType type : kTypes) {
    const QuantWeight w = random_weight(type, 37, 96, 81);
    const QuantWeight p = ng::ops::pack_rows16(w);
    const Tensor ids = ng::empty({37}, DType::i32);
    for (std::int32_t i = 0; i < 37; ++i) ids.data_ptr<std::int32_t>()[i] = (i * 11) % 37;
    for (DType dt : {DType::f32, DType::f16}) {
      const Tensor a = ng::ops::embedding(ids, w, dt), b = ng::ops::embedding(ids, p, dt);
      ng::device_synchronize();
      EXPECT_TRUE(ngtest::bitwise_equal(a, b)) << ng::ops::quant_type_name(type);
    }
    // and against dequantize_rows directly (an id's row, not its neighbour's)
    std::vector<float> want(96);
    ng::ops::dequantize_rows(w, 36, 1, want.data());
    const Tensor one = ng::empty({1}, DType::i32);
    one.data_ptr<std::int32_t>()[0] = 36;
    const Tensor got = ng::ops::embedding(one, p);
    ng::device_synchronize();
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), sizeof(float) * 96)) << ng::ops::quant_type_name(type);
  }
}

}  // namespace
}  // namespace llm_ops_test
