// The decode-engine ops' CUDA kernels without a GPU: the __host__ __device__ math of their
// *_cuda_core.hpp run by host loops over the grid the launchers use (the phases of each kernel in
// the order its __syncthreads separate them; inside a phase each thread writes only its own
// elements, so running the threads one after another computes what the GPU computes), over
// parameter blocks filled as the ops fill them, compared with the CPU ops. Runs in every build but
// the TSan one (the headers are plain C++ without nvcc, so NPUGRAPH_CUDA=OFF runs it too); it says
// nothing about a GPU run, which has not happened yet.
//
// Bitwise against the CPU op where the CUDA kernel repeats the CPU kernel's rounding steps:
// rms_norm / add_rms_norm, rotary_embedding, embedding (float and Q4_0 / Q4_1 / Q8_0 tables),
// reshape_and_cache, argmax. With a tolerance where it cannot:
//   - swiglu: expf against Highway's Exp: 2 eps max(1, |ref|) with eps 2^-21 for float32 output,
//     the output dtype's half ulp otherwise (expect_close);
//   - linear / weight_quant_linear: another summation order than the CPU kernel's; both against a
//     float64 reference within K * 2^-24 * sum_k |x w| (the bound of any float32 summation order)
//     plus y's rounding;
//   - sample: the token the CPU draws, for the seeds used here (the sums' association and expf
//     differ in the last bits: Note [Sampling on CUDA]).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "npugraph/ops/embedding.hpp"
#include "npugraph/ops/kv_cache.hpp"
#include "npugraph/ops/linear.hpp"
#include "npugraph/ops/quant.hpp"
#include "npugraph/ops/rms_norm.hpp"
#include "npugraph/ops/rope.hpp"
#include "npugraph/ops/sampling.hpp"
#include "npugraph/ops/swiglu.hpp"
#include "ops/activation/swiglu_cuda_core.hpp"
#include "ops/embedding/embedding_cuda_core.hpp"
#include "ops/kv_cache/cache_cuda_core.hpp"
#include "ops/linear/linear_cuda_core.hpp"
#include "ops/llm/llm_ops_util.hpp"
#include "ops/norm/rms_norm_cuda_core.hpp"
#include "ops/rope/rope_cuda_core.hpp"
#include "ops/sampling/sampling_cuda_check.hpp"
#include "ops/sampling/sampling_cuda_core.hpp"
#include "support/host_tensors.hpp"

namespace llm_ops_test {
namespace {

namespace ops = ng::ops;
constexpr int kThreads = ops::cuda_io::kThreads;

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// ---- rms_norm / add_rms_norm: rms_norm_kernel's three phases per row ----

void emulate_rms_norm(const ops::norm_impl::RmsNormParams& p, bool add) {
  namespace cc = ops::norm_impl::cuda_core;
  for (std::int64_t r = 0; r < p.rows; ++r) {
    if (add)
      for (std::int64_t i = 0; i < p.H; ++i) cc::add_element(p, r, i);
    double lanes[4];
    for (int j = 0; j < 4; ++j) lanes[j] = cc::lane_sum(p, add, r, j);
    const float rstd = cc::rstd_of(p, lanes);
    if (p.rstd) p.rstd[r] = rstd;
    for (std::int64_t i = 0; i < p.H; ++i) cc::out_element(p, add, r, i, rstd);
  }
}

TEST(DecodeCudaEmulation, RmsNormAndAddRmsNormAreBitwiseTheCpuOps) {
  for (const DType dt : {DType::f32, DType::f16, DType::bf16})
    for (const std::int64_t H : {576, 67}) {
      SCOPED_TRACE(testing::Message() << ng::dtype_name(dt) << " H " << H);
      // 9 rows: the float32 kernel's two groups of four rows side by side, then one alone
      // (Note [RMSNorm lanes]); H 67: a tail past the last quad and the last vector.
      const Tensor x = random_tensor({9, H}, 1, dt, -2, 2), x2 = random_tensor({9, H}, 2, dt);
      const Tensor g = random_tensor({H}, 3, dt, 0.5f, 1.5f);
      const auto cpu = ops::npu_rms_norm(x, g, 1e-5);
      const auto cpu_add = ops::npu_add_rms_norm(x, x2, g, 1e-6);
      ng::device_synchronize();
      ops::norm_impl::RmsNormParams p;
      const Tensor y = zeros_like(cpu.y), rstd = zeros_like(cpu.rstd);
      p.x1 = x.data();
      p.gamma = g.data();
      p.y = y.data();
      p.rstd = rstd.data_ptr<float>();
      p.rows = 9;
      p.H = H;
      p.epsilon = 1e-5;
      p.x_dtype = p.gamma_dtype = p.y_dtype = p.x_out_dtype = dt;
      emulate_rms_norm(p, false);
      EXPECT_TRUE(same_bytes(y, cpu.y));
      EXPECT_TRUE(same_bytes(rstd, cpu.rstd));
      const Tensor xo = zeros_like(cpu_add.x);
      p.x2 = x2.data();
      p.x_out = xo.data();
      p.epsilon = 1e-6;
      emulate_rms_norm(p, true);
      EXPECT_TRUE(same_bytes(xo, cpu_add.x));
      EXPECT_TRUE(same_bytes(y, cpu_add.y));
      EXPECT_TRUE(same_bytes(rstd, cpu_add.rstd));
    }
}

// ---- rotary_embedding: one item per thread of the grid ----

TEST(DecodeCudaEmulation, RotaryEmbeddingIsBitwiseTheCpuOpInBothStylesPartialAndInPlace) {
  const Tensor pos = int_tensor({0, 7, 4095, 123456}, {4});
  // D 64 and rot 32 fill the float32 kernel's vectors; D 20 (10 pairs) and rot 12 leave a tail.
  for (const ops::RopeStyle style : {ops::RopeStyle::neox, ops::RopeStyle::norm})
    for (const auto& [D, rot] : std::vector<std::pair<std::int64_t, std::int64_t>>{{64, 0}, {64, 32}, {20, 0}, {20, 12}})
      for (const DType dt : {DType::f32, DType::f16}) {
        SCOPED_TRACE(testing::Message() << "neox " << (style == ops::RopeStyle::neox) << " D " << D << " rot "
                                        << rot << " " << ng::dtype_name(dt));
        const Tensor x = random_tensor({4, 3, D}, 5, dt, -3, 3);
        // with Llama 3's per-pair divisors and a linear scale (Note [RoPE scaling])
        std::vector<float> ffv(static_cast<std::size_t>((rot == 0 ? D : rot) / 2));
        for (std::size_t i = 0; i < ffv.size(); ++i) ffv[i] = 1.0f + static_cast<float>(i % 3);
        const Tensor ff = make_tensor(ffv, {static_cast<std::int64_t>(ffv.size())});
        const ops::RopeOptions opt{.theta = 100000.0, .style = style, .rotary_dim = rot, .freq_scale = 0.5, .freq_factors = ff};
        const Tensor cpu = ops::rotary_embedding(pos, x, opt, dt);
        const Tensor in_place = random_tensor({4, 3, D}, 5, dt, -3, 3);
        ops::rotary_embedding_out(pos, in_place, in_place, opt);
        ng::device_synchronize();
        ops::rope_impl::RopeParams p;
        const Tensor out = zeros_like(cpu);
        p.positions = pos.data_ptr<std::int32_t>();
        p.x = x.data();
        p.out = out.data();
        p.T = 4;
        p.heads = 3;
        p.D = D;
        p.rot = rot == 0 ? D : rot;
        p.theta = 100000.0;
        p.freq_scale = 0.5;
        p.freq_factors = ff.data_ptr<float>();
        p.neox = style == ops::RopeStyle::neox;
        p.x_dtype = p.out_dtype = dt;
        namespace cc = ops::rope_impl::cuda_core;
        for (std::int64_t k = 0; k < cc::item_count(p); ++k) cc::item(p, k);
        EXPECT_TRUE(same_bytes(out, cpu));
        const Tensor emu_in_place = random_tensor({4, 3, D}, 5, dt, -3, 3);
        p.x = p.out = emu_in_place.data();
        for (std::int64_t k = 0; k < cc::item_count(p); ++k) cc::item(p, k);
        EXPECT_TRUE(same_bytes(emu_in_place, in_place));
      }
}

// ---- swiglu ----

TEST(DecodeCudaEmulation, SwigluMatchesTheCpuOpWithinExpsUlps) {
  for (const auto& [din, dout, eps] : {std::tuple{DType::f32, DType::f32, 0x1p-21}, {DType::bf16, DType::f32, 0x1p-21},
                                       {DType::f32, DType::f16, 0x1p-11}, {DType::bf16, DType::bf16, 0x1p-8}}) {
    SCOPED_TRACE(testing::Message() << ng::dtype_name(din) << " -> " << ng::dtype_name(dout));
    const Tensor x = random_tensor({3, 2 * 77}, 9, din, -12, 12);
    const Tensor cpu = ng::empty({3, 77}, dout);
    ops::swiglu_out(x, cpu);
    ng::device_synchronize();
    ops::swiglu_impl::SwigluParams p;
    const Tensor out = zeros_like(cpu);
    p.gate = x.data();
    p.up = static_cast<const std::byte*>(x.data()) + 77 * x.element_size();
    p.out = out.data();
    p.rows = 3;
    p.H = 77;
    p.in_stride = 154;
    p.in_dtype = din;
    p.out_dtype = dout;
    for (std::int64_t k = 0; k < p.rows * p.H; ++k) ops::swiglu_impl::cuda_core::element(p, k);
    ngtest::expect_close(out, cpu, eps, "swiglu");
  }
}

// ---- embedding ----

void emulate_embedding(const ops::embedding_impl::EmbeddingParams& p) {
  for (std::int64_t k = 0; k < p.T * p.H; ++k) ops::embedding_impl::cuda_core::element(p, k);
}

TEST(DecodeCudaEmulation, EmbeddingIsBitwiseTheCpuOpForFloatAndQuantTablesAndABadIdWritesNaN) {
  const Tensor ids = int_tensor({3, 0, 9, 3}, {4});
  for (const ops::QuantType qt : {ops::QuantType::q4_0, ops::QuantType::q4_1, ops::QuantType::q8_0})
    for (const DType dout : {DType::f32, DType::f16}) {
      const auto table = ops::quantize(qt, random_values(10 * 96, 11), 10, 96);
      const Tensor cpu = ops::embedding(ids, table, dout);
      ng::device_synchronize();
      ops::embedding_impl::EmbeddingParams p;
      const Tensor out = zeros_like(cpu);
      p.ids = ids.data_ptr<std::int32_t>();
      p.table = table.data();
      p.out = out.data();
      p.T = 4;
      p.V = 10;
      p.H = 96;
      p.row_bytes = table.row_bytes();
      p.quant = true;
      p.quant_type = qt;
      p.out_dtype = dout;
      emulate_embedding(p);
      EXPECT_TRUE(same_bytes(out, cpu)) << ops::quant_type_name(qt) << " -> " << ng::dtype_name(dout);
    }
  for (const DType dt : {DType::f32, DType::f16, DType::bf16}) {
    const Tensor table = random_tensor({10, 40}, 12, dt);
    const Tensor cpu = ops::embedding(ids, table, DType::f32);
    ng::device_synchronize();
    ops::embedding_impl::EmbeddingParams p;
    const Tensor out = zeros_like(cpu);
    p.ids = ids.data_ptr<std::int32_t>();
    p.table = static_cast<const std::byte*>(table.data());
    p.out = out.data();
    p.T = 4;
    p.V = 10;
    p.H = 40;
    p.row_bytes = 40 * table.element_size();
    p.table_dtype = dt;
    emulate_embedding(p);
    EXPECT_TRUE(same_bytes(out, cpu)) << ng::dtype_name(dt);
    const Tensor bad = int_tensor({3, 10}, {2});  // the CPU kernel throws a TaskError for ids[1]
    p.ids = bad.data_ptr<std::int32_t>();
    p.T = 2;
    emulate_embedding(p);
    const float* o = out.data_ptr<float>();
    EXPECT_EQ(0, std::memcmp(o, cpu.data_ptr<float>(), 40 * sizeof(float)));
    for (int i = 40; i < 80; ++i) EXPECT_TRUE(std::isnan(o[i])) << i;
  }
}

// ---- reshape_and_cache: cache_kernel's two phases per token ----

void emulate_cache(const ops::cache_impl::CacheParams& p) {
  namespace cc = ops::cache_impl::cuda_core;
  for (std::int64_t t = 0; t < p.T; ++t) {
    bool skip = false;
    for (int tid = 0; tid < kThreads; ++tid) skip = cc::skip_share(p, t, tid, kThreads) || skip;
    if (!skip && p.slots[t] >= 0)
      for (std::int64_t i = 0; i < p.H; ++i) cc::copy_element(p, t, i);
  }
}

TEST(DecodeCudaEmulation, ReshapeAndCacheIsBitwiseTheCpuOpWithRepeatedAndNegativeSlots) {
  const std::vector<std::int32_t> slots{5, -1, 2, 5, 0};  // slot 5 twice: the later token stays
  for (const auto& [dkv, dc] : {std::pair{DType::f32, DType::f16}, {DType::f32, DType::f32}, {DType::bf16, DType::bf16}})
    for (bool head_major : {false, true}) {  // [2 blocks, 4 slots, 2 heads * 8] or [2, 2 heads, 4, 8]
      const ng::Shape cs = head_major ? ng::Shape{2, 2, 4, 8} : ng::Shape{2, 4, 16};
      const Tensor k = random_tensor({5, 2, 8}, 13, dkv), v = random_tensor({5, 2, 8}, 14, dkv);
      const Tensor kc = random_tensor(cs, 15, dc), vc = random_tensor(cs, 16, dc);
      const Tensor ekc = random_tensor(cs, 15, dc), evc = random_tensor(cs, 16, dc);
      const Tensor sm = int_tensor(slots, {5});
      ops::reshape_and_cache(k, v, kc, vc, sm,
                             head_major ? ops::KvCacheLayout::head_major : ops::KvCacheLayout::token_major);
      ng::device_synchronize();
      ops::cache_impl::CacheParams p{k.data(), v.data(), ekc.data(), evc.data(), sm.data_ptr<std::int32_t>(),
                                     5, 16, 8, dkv, dc, head_major, head_major ? 4 : 0, head_major ? 8 : 0};
      emulate_cache(p);
      EXPECT_TRUE(same_bytes(ekc, kc)) << ng::dtype_name(dc);
      EXPECT_TRUE(same_bytes(evc, vc)) << ng::dtype_name(dc);
      // A slot past the capacity: the CPU kernel writes nothing and throws; the CUDA one writes nothing.
      const Tensor bad = int_tensor({1, 8, 3, 4, 0}, {5});
      const Tensor before = zeros_like(ekc);
      std::memcpy(before.data(), ekc.data(), ekc.nbytes());
      p.slots = bad.data_ptr<std::int32_t>();
      emulate_cache(p);
      EXPECT_TRUE(same_bytes(ekc, before));
    }
}

// ---- linear / weight_quant_linear: a warp per weight row, its lanes and butterfly ----

void emulate_linear(const ops::linear_impl::LinearParams& p) {
  namespace cc = ops::linear_impl::cuda_core;
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t t0 = 0; t0 < p.T; t0 += cc::kRowsPerPass) {
      const int rows = static_cast<int>(std::min<std::int64_t>(p.T - t0, cc::kRowsPerPass));
      float lanes[cc::kWarp][cc::kRowsPerPass];
      for (int l = 0; l < cc::kWarp; ++l) cc::lane_chains(p, t0, rows, n, l, lanes[l]);
      for (int off = cc::kWarp / 2; off > 0; off /= 2) {
        float next[cc::kWarp][cc::kRowsPerPass];
        for (int l = 0; l < cc::kWarp; ++l)
          for (int r = 0; r < cc::kRowsPerPass; ++r) next[l][r] = cc::butterfly(lanes[l][r], lanes[l ^ off][r]);
        std::memcpy(lanes, next, sizeof lanes);
      }
      for (int r = 0; r < rows; ++r) cc::finish(p, t0 + r, n, lanes[0][r]);
    }
}

// |got - ref| <= K 2^-24 sum|x w| + y's rounding, per output.
void expect_linear_close(const Tensor& got, const std::vector<double>& ref, const std::vector<double>& mag,
                         std::int64_t K, const char* what) {
  const double ulp = got.dtype() == DType::f32 ? 0x1p-24 : got.dtype() == DType::f16 ? 0x1p-11 : 0x1p-8;
  int bad = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double g = at(got, static_cast<std::int64_t>(i));
    const double bound = static_cast<double>(K) * 0x1p-24 * mag[i] + ulp * std::abs(ref[i]) * 1.01;
    if (std::abs(g - ref[i]) > bound && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "] = " << g << ", the reference's " << ref[i] << " (bound " << bound << ")";
  }
}

TEST(DecodeCudaEmulation, LinearAndWeightQuantLinearAgreeWithAFloat64ReferenceAsTheCpuOpsDo) {
  const std::int64_t N = 37, K = 96;
  for (const std::int64_t T : {1, 5, 17}) {
    const std::vector<float> xv = random_values(static_cast<std::size_t>(T * K), 20 + T, -2, 2);
    const Tensor x = make_tensor(xv, {T, K});
    const Tensor bias = random_tensor({N}, 21);
    const std::vector<float> wv = random_values(static_cast<std::size_t>(N * K), 22);
    struct Case {
      const char* name;
      bool quant;
      ops::QuantType qt;
      DType wdt;
    };
    for (const Case& c : {Case{"Q4_0", true, ops::QuantType::q4_0, DType::f32}, Case{"Q4_1", true, ops::QuantType::q4_1, DType::f32},
                          Case{"Q8_0", true, ops::QuantType::q8_0, DType::f32}, Case{"f32", false, {}, DType::f32},
                          Case{"f16", false, {}, DType::f16}, Case{"bf16", false, {}, DType::bf16}})
      for (const DType dout : {DType::f32, DType::f16}) {
        SCOPED_TRACE(testing::Message() << c.name << " T " << T << " out " << ng::dtype_name(dout));
        ops::QuantWeight qw;
        Tensor dense;
        std::vector<float> w(static_cast<std::size_t>(N * K));  // the weight values the kernels see
        if (c.quant) {
          qw = ops::quantize(c.qt, wv, N, K);
          ops::dequantize_rows(qw, 0, N, w.data());
        } else {
          dense = make_tensor(wv, {N, K}, c.wdt);
          w = floats(dense);
        }
        const Tensor cpu = c.quant ? ops::weight_quant_linear(x, qw, bias, dout) : ops::linear(x, dense, bias, dout);
        ng::device_synchronize();
        std::vector<double> ref(static_cast<std::size_t>(T * N)), mag(ref.size());
        for (std::int64_t t = 0; t < T; ++t)
          for (std::int64_t n = 0; n < N; ++n) {
            double s = at(bias, n), m = std::abs(at(bias, n));
            for (std::int64_t k = 0; k < K; ++k) {
              s += static_cast<double>(xv[t * K + k]) * w[n * K + k];
              m += std::abs(static_cast<double>(xv[t * K + k]) * w[n * K + k]);
            }
            ref[t * N + n] = s;
            mag[t * N + n] = m;
          }
        ops::linear_impl::LinearParams p;
        const Tensor out = zeros_like(cpu);
        p.x = x.data_ptr<float>();
        p.w = c.quant ? qw.data() : static_cast<const std::byte*>(dense.data());
        p.bias = bias.data_ptr<float>();
        p.y = out.data();
        p.T = T;
        p.N = N;
        p.K = K;
        p.x_stride = K;
        p.y_stride = N;
        p.w_row_bytes = c.quant ? qw.row_bytes() : K * dense.element_size();
        p.type = c.quant ? ops::ggml_type(c.qt)
                 : c.wdt == DType::f32 ? ops::GgmlType::F32
                 : c.wdt == DType::f16 ? ops::GgmlType::F16
                                       : ops::GgmlType::BF16;
        p.y_dtype = dout;
        emulate_linear(p);
        expect_linear_close(out, ref, mag, K, "emulated");
        expect_linear_close(cpu, ref, mag, K, "cpu");
      }
  }
}

// ---- argmax / sample: a block per row, its threads' shares and the shared-memory reductions ----

ops::sampling_impl::cuda_core::Best emulate_block_argmax(const float* x, std::int64_t V) {
  namespace cc = ops::sampling_impl::cuda_core;
  std::vector<cc::Best> red(kThreads);
  for (int t = 0; t < kThreads; ++t) red[t] = cc::argmax_share(x, V, t, kThreads);
  for (int s = kThreads / 2; s > 0; s /= 2)
    for (int t = 0; t < s; ++t) red[t] = cc::better(red[t], red[t + s]);
  return red[0];
}

std::int32_t emulate_sample_row(const ops::sampling_impl::SampleParams& p, std::int64_t r) {
  namespace cc = ops::sampling_impl::cuda_core;
  const float* x = p.logits + r * p.V;
  if (ops::sampling_impl::row_sampling(p, r).temperature != 0) {
    std::vector<float> maxes(kThreads);
    for (int t = 0; t < kThreads; ++t) maxes[t] = cc::max_share(x, p.V, t, kThreads);
    for (int s = kThreads / 2; s > 0; s /= 2)
      for (int t = 0; t < s; ++t) maxes[t] = maxes[t + s] > maxes[t] ? maxes[t + s] : maxes[t];
    if (cc::is_finite(maxes[0])) {
      std::vector<double> mass(kThreads);
      for (int c = 0; c < kThreads; ++c) mass[c] = cc::chunk_mass(x, p.V, maxes[0], cc::inv_temperature(p, r), c, kThreads);
      return cc::draw(x, p.V, maxes[0], cc::inv_temperature(p, r), mass.data(), kThreads, cc::row_uniform(p, r));
    }
  }
  const cc::Best b = emulate_block_argmax(x, p.V);
  return static_cast<std::int32_t>(b.i < p.V ? b.i : 0);
}

// Rows with ties, NaNs, signed zeros, infinities and all -inf, plus random rows.
std::vector<float> hard_rows(std::int64_t V) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = random_values(static_cast<std::size_t>(8 * V), 30, -4, 4);
  v[0 * V + 700] = v[0 * V + 300] = 9.0f;                                    // tie: 300
  v[1 * V + 900] = std::nanf(""), v[1 * V + 901] = std::nanf(""), v[1 * V + 5] = inf;  // NaN 900
  for (std::int64_t j = 0; j < V; ++j) v[2 * V + j] = -inf;                  // all -inf: 0
  for (std::int64_t j = 0; j < V; ++j) v[3 * V + j] = (j % 3) ? -0.0f : 0.0f;  // +0 / -0: 0
  v[4 * V + V - 1] = inf;                                                    // the last
  v[5 * V + 1] = -inf;
  return v;
}

TEST(DecodeCudaEmulation, ArgmaxIsTheCpuOpsIndexOnTiesNaNsZerosAndInfinities) {
  const std::int64_t V = 1003;
  const Tensor logits = make_tensor(hard_rows(V), {8, V});
  const Tensor cpu = ops::argmax(logits);
  ng::device_synchronize();
  for (std::int64_t r = 0; r < 8; ++r) {
    const auto b = emulate_block_argmax(logits.data_ptr<float>() + r * V, V);
    EXPECT_EQ(b.i, cpu.data_ptr<std::int32_t>()[r]) << "row " << r;
  }
  EXPECT_EQ(cpu.data_ptr<std::int32_t>()[0], 300);
  EXPECT_EQ(cpu.data_ptr<std::int32_t>()[1], 900);
}

TEST(DecodeCudaEmulation, SampleDrawsTheCpuOpsTokensAndItsPhiloxIsTheCpus) {
  namespace cc = ops::sampling_impl::cuda_core;
  for (std::uint64_t seed : {0ull, 1ull, 0xdeadbeefcafef00dull})
    for (std::uint64_t step : {0ull, 77ull, ~0ull})
      for (std::uint64_t row : {0ull, 3ull})
        EXPECT_EQ(cc::uniform(seed, step, row), ops::sampling_uniform(seed, step, row));
  const std::int64_t V = 1003, B = 8;
  const Tensor logits = make_tensor(hard_rows(V), {B, V});
  std::vector<std::int64_t> seeds(B), steps0(B, 0);
  for (std::int64_t b = 0; b < B; ++b) seeds[b] = 1000 + b;
  const Tensor seeds_t = ngtest::int_tensor(seeds, {B}, DType::i64);
  for (const double temp : {0.0, 0.7, 1.0, 2.5}) {
    const Tensor steps = ngtest::int_tensor(steps0, {B}, DType::i64);
    ops::sampling_impl::SampleParams p;
    p.logits = logits.data_ptr<float>();
    p.seeds = seeds_t.data_ptr<std::int64_t>();
    p.steps = steps.data_ptr<std::int64_t>();
    p.B = B;
    p.V = V;
    p.temperature = temp;
    for (int step = 0; step < 6; ++step) {
      const Tensor cpu = ops::sample(logits, seeds_t, steps, {.temperature = temp});
      ng::device_synchronize();
      for (std::int64_t r = 0; r < B; ++r)
        EXPECT_EQ(emulate_sample_row(p, r), cpu.data_ptr<std::int32_t>()[r])
            << "temperature " << temp << " step " << step << " row " << r;
      for (std::int64_t r = 0; r < B; ++r) steps.data_ptr<std::int64_t>()[r] += 1;
    }
  }
}

TEST(DecodeCudaEmulation, PerRowTemperaturesDrawTheCpuOpsTokens) {
  // sample_rows_out with temperatures alone (what the CUDA backend takes): each row its own
  // temperature (0, a NaN and -1 read as greedy), the draw's counter (step, 0) for every row.
  const std::int64_t V = 1003, B = 8;
  const Tensor logits = make_tensor(hard_rows(V), {B, V});
  std::vector<std::int64_t> seeds(B, 5), steps0(B, 3);  // every row the same seed and step
  const Tensor seeds_t = ngtest::int_tensor(seeds, {B}, DType::i64);
  const Tensor steps = ngtest::int_tensor(steps0, {B}, DType::i64);
  const std::vector<float> temps{0.0f, 0.7f, 1.0f, 2.5f, std::nanf(""), -1.0f, 0.3f, 1.0f};
  Tensor t = ng::empty({B}, DType::f32);
  std::copy(temps.begin(), temps.end(), t.data_ptr<float>());
  ops::sampling_impl::SampleParams p;
  p.logits = logits.data_ptr<float>();
  p.seeds = seeds_t.data_ptr<std::int64_t>();
  p.steps = steps.data_ptr<std::int64_t>();
  p.B = B;
  p.V = V;
  p.per_row = true;
  p.row_temperature = t.data_ptr<float>();
  Tensor cpu = ng::empty({B}, DType::i32);
  ops::sample_rows_out(logits, seeds_t, steps, {.temperature = t}, cpu);
  ng::device_synchronize();
  const Tensor greedy = ops::argmax(logits);
  ng::device_synchronize();
  for (std::int64_t r = 0; r < B; ++r) {
    EXPECT_EQ(emulate_sample_row(p, r), cpu.data_ptr<std::int32_t>()[r]) << "row " << r;
    if (!(temps[r] > 0)) {
      EXPECT_EQ(cpu.data_ptr<std::int32_t>()[r], greedy.data_ptr<std::int32_t>()[r]) << "row " << r;
    }
  }
}

TEST(DecodeCudaRefusal, SampleOnCudaRefusesTopKAndTopPNamingTheArgumentAndValue) {
  using ops::sampling_impl::sample_cuda_unsupported;
  const ng::Device gpu = ng::Device::cuda(0);
  EXPECT_EQ(sample_cuda_unsupported({.temperature = 0.8}, 100, gpu), "");
  EXPECT_EQ(sample_cuda_unsupported({.temperature = 0.8, .top_k = 100}, 100, gpu), "");
  EXPECT_EQ(sample_cuda_unsupported({.temperature = 0, .top_k = 5, .top_p = 0.5}, 100, gpu), "");
  const std::string k = sample_cuda_unsupported({.temperature = 0.8, .top_k = 40}, 100, gpu);
  for (const char* part : {"sample on cuda:0", "top_k = 40", "not supported on the CUDA backend"})
    EXPECT_NE(k.find(part), std::string::npos) << k;
  const std::string tp = sample_cuda_unsupported({.temperature = 0.8, .top_p = 0.9}, 100, gpu);
  EXPECT_NE(tp.find("top_p = 0.9"), std::string::npos) << tp;
}

}  // namespace
}  // namespace llm_ops_test
