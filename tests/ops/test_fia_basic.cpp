// Basic FIA contracts: a hand-computed case (which also checks the reference), lse conventions,
// zero-fill, masked rows, the `.out` form's contracts, determinism, strided inputs, the head/dim
// limits and large batches. Hand-computed mask and padding cases are in test_fia_hand.cpp.
#include <cmath>
#include <limits>
#include <vector>

#include "npugraph/error.hpp"
#include "ops/attention/fia_plan.hpp"
#include "ops/fia_case.hpp"
#include "support/throws.hpp"

namespace fia_test {
namespace {

namespace ng = npugraph;
using ng::ops::FiaOptions;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Runs the `.out` form with NaN-prefilled outputs (so untouched elements show) and synchronizes.
struct OutRun {
  Tensor out, lse;
};
OutRun run_out(const Tensor& q, const Tensor& k, const Tensor& v, const FiaOptions& opt,
               const Shape& lse_shape) {
  OutRun r{filled_tensor(q.shape(), q.dtype(), std::nan("")),
           filled_tensor(lse_shape, DType::f32, std::nan(""))};
  const Tensor ws = ng::ops::fia_max_workspace(q, k, v, opt);
  ng::ops::fused_infer_attention_score_out(q, k, v, opt, ws, r.out, r.lse);
  ng::current_stream().synchronize();
  return r;
}

// One head, D = 2, two keys: s = scale * q.k, p = softmax(s), out = p0 v0 + p1 v1.
TEST(FiaHand, OneHeadTwoKeys) {
  std::vector<double> qv{1, 0}, kv{1, 0, 0, 1}, vv{1, 2, 3, 4};
  const Tensor q = host_tensor(qv, {1, 1, 1, 2}, DType::f32);
  const Tensor k = host_tensor(kv, {1, 1, 2, 2}, DType::f32);
  const Tensor v = host_tensor(vv, {1, 1, 2, 2}, DType::f32);
  // scale 2: s = [2, 0]; p0 = e^2 / (e^2 + 1).
  const double p0 = std::exp(2.0) / (std::exp(2.0) + 1), p1 = 1 - p0;
  const double want_out[2] = {p0 * 1 + p1 * 3, p0 * 2 + p1 * 4};
  const double want_lse = std::log(std::exp(2.0) + 1);

  RefArgs a{.layout = "BNSD", .Skv = 2, .Dk = 2, .scale = 2.0};
  const RefResult ref = fia_reference(a, {qv, kv, vv, {}, {}});
  EXPECT_NEAR(ref.out[0], want_out[0], 1e-12);
  EXPECT_NEAR(ref.out[1], want_out[1], 1e-12);
  EXPECT_NEAR(ref.lse[0], want_lse, 1e-12);

  const FiaOptions opt{.scale = 2.0, .input_layout = "BNSD", .softmax_lse_flag = true};
  const OutRun r = run_out(q, k, v, opt, {1, 1, 1, 1});
  const auto out = read_back(r.out);
  EXPECT_NEAR(out[0], want_out[0], 1e-6);
  EXPECT_NEAR(out[1], want_out[1], 1e-6);
  EXPECT_NEAR(read_back(r.lse)[0], want_lse, 1e-6);
}

// GQA by hand: 2 query heads share 1 KV head; D = 1, one key: out = v, lse = scale * q * k.
TEST(FiaHand, GqaSharesKvHead) {
  std::vector<double> qv{2, -3}, kv{0.5}, vv{7};
  const Tensor q = host_tensor(qv, {1, 1, 2}, DType::f32);  // BSH, N = 2, D = 1
  const Tensor k = host_tensor(kv, {1, 1, 1}, DType::f32);
  const Tensor v = host_tensor(vv, {1, 1, 1}, DType::f32);
  const FiaOptions opt{.num_heads = 2, .num_key_value_heads = 1, .softmax_lse_flag = true};
  const OutRun r = run_out(q, k, v, opt, {1, 2, 1, 1});
  EXPECT_EQ(read_back(r.out), (std::vector<double>{7, 7}));
  EXPECT_EQ(read_back(r.lse), (std::vector<double>{1.0, -1.5}));
}

// Rows past the actual query length are zero-filled with lse +inf; a kv length of 0 and a band
// that misses every column give 0 and +inf too (sparse_mode 0 applies the band with a full mask).
TEST(FiaRows, ZeroFillAndFullyMasked) {
  std::vector<double> qv, kv, vv;
  const Tensor q = random_tensor(qv, {2, 2, 4, 8}, DType::f16, 11);
  const Tensor k = random_tensor(kv, {2, 2, 6, 8}, DType::f16, 12);
  const Tensor v = random_tensor(vv, {2, 2, 6, 8}, DType::f16, 13);
  // Batch 0: 2 valid rows, next_tokens = -1 hides everything from row 0. Batch 1: kv length 0.
  const FiaOptions opt{.atten_mask = filled_tensor({4, 6}, DType::boolean, 0),
                       .actual_seq_lengths = {2, 4},
                       .actual_seq_lengths_kv = {6, 0},
                       .num_heads = 2,
                       .next_tokens = -1,
                       .input_layout = "BNSD",
                       .softmax_lse_flag = true};
  const OutRun r = run_out(q, k, v, opt, {2, 2, 4, 1});
  const auto out = read_back(r.out), lse = read_back(r.lse);
  for (int b = 0; b < 2; ++b)
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 4; ++i) {
        const bool empty = b == 1 || i == 0 || i >= 2;
        const double l = lse[(b * 2 + n) * 4 + i];
        if (empty) {
          EXPECT_EQ(l, kInf) << b << n << i;
        } else {
          EXPECT_TRUE(std::isfinite(l)) << b << n << i;
        }
        for (int d = 0; d < 8; ++d) {
          const double o = out[((b * 2 + n) * 4 + i) * 8 + d];
          if (empty) EXPECT_EQ(o, 0.0) << b << n << i << d;
          else EXPECT_TRUE(std::isfinite(o)) << b << n << i << d;
        }
      }
  // Row 1 of batch 0 sees only column 0 (j - i <= -1): its output is v[0] exactly.
  for (int n = 0; n < 2; ++n)
    for (int d = 0; d < 8; ++d)
      EXPECT_EQ(out[((0 * 2 + n) * 4 + 1) * 8 + d], vv[(n * 6 + 0) * 8 + d]);
}

// A key/value S of 0 gives zeros and lse +inf (torch_npu: "S2 = 0 fills the output with zeros");
// a query S of 0 is an empty call.
TEST(FiaRows, EmptyKeyAndEmptyQuery) {
  std::vector<double> qv;
  const Tensor q = random_tensor(qv, {2, 3, 8}, DType::f16, 91);  // BSH, N = 2, D = 4
  const Tensor k = filled_tensor({2, 0, 8}, DType::f16, 0);
  const Tensor v = filled_tensor({2, 0, 8}, DType::f16, 0);
  const FiaOptions opt{.num_heads = 2, .softmax_lse_flag = true};
  const OutRun r = run_out(q, k, v, opt, {2, 2, 3, 1});
  for (double x : read_back(r.out)) EXPECT_EQ(x, 0.0);
  for (double x : read_back(r.lse)) EXPECT_EQ(x, kInf);
  const Tensor q0 = filled_tensor({2, 0, 8}, DType::f16, 0);
  const Tensor k1 = random_tensor(qv, {2, 5, 8}, DType::f16, 92);
  const auto e = ng::ops::fused_infer_attention_score(q0, k1, k1, opt);
  ng::current_stream().synchronize();
  EXPECT_EQ(e.attention_out.shape(), (Shape{2, 0, 8}));
  EXPECT_EQ(e.softmax_lse.shape(), (Shape{2, 2, 0, 1}));
}

// Every visible score -inf (scale * q.k overflows to -inf) is treated as nothing visible.
TEST(FiaRows, AllScoresMinusInfinity) {
  std::vector<double> kv{-1, -1}, vv{3, 4};
  const Tensor k = host_tensor(kv, {1, 2, 1}, DType::f32);
  const Tensor v = host_tensor(vv, {1, 2, 1}, DType::f32);
  std::vector<double> big{3e38};
  const Tensor q_big = host_tensor(big, {1, 1, 1}, DType::f32);
  const FiaOptions opt{.scale = 3e38, .softmax_lse_flag = true};
  const OutRun r = run_out(q_big, k, v, opt, {1, 1, 1, 1});
  EXPECT_EQ(read_back(r.out)[0], 0.0);
  EXPECT_EQ(read_back(r.lse)[0], kInf);
}

// A NaN input gives a NaN row, never a silently finite one.
TEST(FiaRows, NanPropagates) {
  std::vector<double> qv{std::nan("")}, kv{1, 2}, vv{3, 4};
  const Tensor q = host_tensor(qv, {1, 1, 1}, DType::f32);
  const Tensor k = host_tensor(kv, {1, 2, 1}, DType::f32);
  const Tensor v = host_tensor(vv, {1, 2, 1}, DType::f32);
  const OutRun r = run_out(q, k, v, {.softmax_lse_flag = true}, {1, 1, 1, 1});
  EXPECT_TRUE(std::isnan(read_back(r.out)[0]));
  EXPECT_TRUE(std::isnan(read_back(r.lse)[0]));
}

TEST(FiaLse, FirstElementZeroedWithoutFlagAndEagerZero) {
  std::vector<double> qv, kv, vv;
  const Tensor q = random_tensor(qv, {1, 3, 16}, DType::bf16, 21);
  const Tensor k = random_tensor(kv, {1, 5, 16}, DType::bf16, 22);
  const Tensor v = random_tensor(vv, {1, 5, 16}, DType::bf16, 23);
  const FiaOptions opt{.num_heads = 2};
  // `.out` form: the first element of the caller's lse (a float16 [3] here) becomes 0, as torch_npu's
  // placeholder holds 0; the rest keep their sentinel.
  const Tensor lse = filled_tensor({3}, DType::f16, 42.0);
  const Tensor out = filled_tensor(q.shape(), DType::bf16, 0.0);
  ng::ops::fused_infer_attention_score_out(q, k, v, opt, ng::ops::fia_max_workspace(q, k, v, opt),
                                           out, lse);
  ng::current_stream().synchronize();
  EXPECT_EQ(read_back(lse), (std::vector<double>{0.0, 42.0, 42.0}));
  // An lse that overlaps the output is refused (it is written).
  EXPECT_TRUE(ngtest::throws<ng::ArgumentError>(
      [&] {
        ng::ops::fused_infer_attention_score_out(q, k, v, opt, ng::ops::fia_max_workspace(q, k, v, opt),
                                                 out, out);
      },
      {"softmax_lse", "overlap"}));
  // Eager form: a 1-element float32 0.
  const auto r = ng::ops::fused_infer_attention_score(q, k, v, opt);
  ng::current_stream().synchronize();
  EXPECT_EQ(r.softmax_lse.shape(), (Shape{1}));
  EXPECT_EQ(r.softmax_lse.dtype(), DType::f32);
  EXPECT_EQ(read_back(r.softmax_lse)[0], 0.0);
  EXPECT_TRUE(bitwise_equal(r.attention_out, out));
}

TEST(FiaLse, EagerShapePerLayout) {
  for (const std::string layout : {"BNSD", "BSND", "BSH"}) {
    std::vector<double> qv, kv, vv;
    const Tensor q = random_tensor(qv, layout_shape(layout, 2, 4, 3, 8), DType::f32, 1);
    const Tensor k = random_tensor(kv, layout_shape(layout, 2, 2, 5, 8), DType::f32, 2);
    const Tensor v = random_tensor(vv, layout_shape(layout, 2, 2, 5, 8), DType::f32, 3);
    const auto r = ng::ops::fused_infer_attention_score(
        q, k, v, {.num_heads = 4, .input_layout = layout, .num_key_value_heads = 2,
                  .softmax_lse_flag = true});
    ng::current_stream().synchronize();
    EXPECT_EQ(r.softmax_lse.shape(), (Shape{2, 4, 3, 1})) << layout;
    EXPECT_EQ(r.attention_out.shape(), q.shape()) << layout;
  }
}

// Decode ignores actual_seq_lengths, pre_tokens, next_tokens and sparse_mode.
TEST(FiaDecode, IgnoresQueryLengthsAndBand) {
  std::vector<double> qv, kv, vv;
  const Tensor q = random_tensor(qv, {2, 4, 1, 32}, DType::f16, 31);
  const Tensor k = random_tensor(kv, {2, 4, 40, 32}, DType::f16, 32);
  const Tensor v = random_tensor(vv, {2, 4, 40, 32}, DType::f16, 33);
  FiaOptions base{.actual_seq_lengths_kv = {40, 17}, .num_heads = 4, .scale = 0.125,
                  .input_layout = "BNSD", .softmax_lse_flag = true};
  const auto a = ng::ops::fused_infer_attention_score(q, k, v, base);
  FiaOptions odd = base;
  odd.actual_seq_lengths = {29, 100};
  odd.pre_tokens = -7;
  odd.next_tokens = -7;
  odd.sparse_mode = 3;
  const auto b = ng::ops::fused_infer_attention_score(q, k, v, odd);
  ng::current_stream().synchronize();
  EXPECT_TRUE(bitwise_equal(a.attention_out, b.attention_out));
  EXPECT_TRUE(bitwise_equal(a.softmax_lse, b.softmax_lse));
}

// A shape big enough for many parallel chunks: two eager runs, and a serial run of the kernel on
// the calling thread (ExecContext without a pool), are bitwise equal.
TEST(FiaDeterminism, EagerTwiceAndSerialKernelAreBitwiseEqual) {
  std::vector<double> qv, kv, vv;
  const Tensor q = random_tensor(qv, {2, 32, 8 * 32}, DType::f16, 41);  // BSH, N = 8, D = 32
  const Tensor k = random_tensor(kv, {2, 160, 2 * 32}, DType::f16, 42);
  const Tensor v = random_tensor(vv, {2, 160, 2 * 32}, DType::f16, 43);
  const FiaOptions opt{.atten_mask = compressed_mask(), .actual_seq_lengths = {32, 20},
                       .actual_seq_lengths_kv = {160, 100}, .num_heads = 8, .scale = 0.2,
                       .num_key_value_heads = 2, .sparse_mode = 3, .softmax_lse_flag = true};
  ng::ops::attention::FiaParams header;
  ng::ops::attention::FiaPlan planned(q, k, v, opt, header);
  ng::ops::attention::plan_fia(planned);
  const ng::ops::attention::FiaWorkspacePlan& plan = planned.workspace();
  EXPECT_GT(plan.chunks, 16);  // really parallel (the simple kernel's chunks)

  const auto r1 = ng::ops::fused_infer_attention_score(q, k, v, opt);
  const auto r2 = ng::ops::fused_infer_attention_score(q, k, v, opt);
  ng::current_stream().synchronize();
  EXPECT_TRUE(bitwise_equal(r1.attention_out, r2.attention_out));
  EXPECT_TRUE(bitwise_equal(r1.softmax_lse, r2.softmax_lse));

  const Tensor out = filled_tensor(q.shape(), DType::f16, 0);
  const Tensor lse = filled_tensor({2, 8, 32, 1}, DType::f32, 0);
  const Tensor ws = filled_tensor({plan.total_bytes}, DType::u8, 0);
  ng::ops::attention::FiaParamBuffer block;
  ng::ops::attention::build_fia_params(q, k, v, opt, ws, out, lse, block);
  const auto bytes = block.bytes();
  ng::ops::fia_kernel().cpu(bytes.data(), bytes.size(), ng::ExecContext(nullptr, 1));
  EXPECT_TRUE(bitwise_equal(r1.attention_out, out));
  EXPECT_TRUE(bitwise_equal(r1.softmax_lse, lse));
}

// Strided (non-contiguous) inputs give bitwise the result of contiguous ones.
TEST(FiaStrides, NonContiguousInputs) {
  std::vector<double> qv, kv, vv;
  const Tensor q = random_tensor(qv, {1, 2, 3, 8}, DType::f32, 51);  // BNSD
  const Tensor k = random_tensor(kv, {1, 2, 5, 8}, DType::f32, 52);
  const Tensor v = random_tensor(vv, {1, 2, 5, 8}, DType::f32, 53);
  // The same key stored as [1, 5, 2, 8] (BSND memory) and viewed as BNSD through strides.
  std::vector<double> kt(kv.size());
  for (int n = 0; n < 2; ++n)
    for (int s = 0; s < 5; ++s)
      for (int d = 0; d < 8; ++d) kt[(s * 2 + n) * 8 + d] = kv[(n * 5 + s) * 8 + d];
  const Tensor kt_mem = host_tensor(kt, {1, 5, 2, 8}, DType::f32);
  const Tensor k_strided = Tensor::from_blob(kt_mem.data(), {1, 2, 5, 8}, {80, 8, 16, 1},
                                             DType::f32, kt_mem.storage());
  ASSERT_FALSE(k_strided.is_contiguous());
  const FiaOptions opt{.num_heads = 2, .input_layout = "BNSD", .softmax_lse_flag = true};
  const auto a = ng::ops::fused_infer_attention_score(q, k, v, opt);
  const auto b = ng::ops::fused_infer_attention_score(q, k_strided, v, opt);
  ng::current_stream().synchronize();
  EXPECT_TRUE(bitwise_equal(a.attention_out, b.attention_out));
  EXPECT_TRUE(bitwise_equal(a.softmax_lse, b.softmax_lse));
}

// atten_mask and pse_shift may be strided views (e.g. a slice of a bigger mask): same result.
TEST(FiaStrides, StridedMaskAndPse) {
  std::vector<double> qv, kv, vv, mv, pv;
  const Tensor q = random_tensor(qv, {2, 2, 3, 8}, DType::f32, 54);
  const Tensor k = random_tensor(kv, {2, 2, 5, 8}, DType::f32, 55);
  const Tensor v = random_tensor(vv, {2, 2, 5, 8}, DType::f32, 56);
  const Tensor big_mask = random_tensor(mv, {2, 1, 3, 10}, DType::u8, 57, 0, 1);
  const Tensor big_pse = random_tensor(pv, {2, 2, 3, 10}, DType::f32, 58);
  const Tensor mask = Tensor::from_blob(big_mask.data(), {2, 1, 3, 5}, {30, 30, 10, 2}, DType::u8,
                                        big_mask.storage());
  const Tensor pse = Tensor::from_blob(big_pse.data(), {2, 2, 3, 5}, {60, 30, 10, 2}, DType::f32,
                                       big_pse.storage());
  std::vector<double> mc, pc;
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 5; ++j) mc.push_back(mv[(b * 3 + i) * 10 + 2 * j]);
  for (int b = 0; b < 2; ++b)
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 5; ++j) pc.push_back(pv[((b * 2 + n) * 3 + i) * 10 + 2 * j]);
  FiaOptions opt{.pse_shift = pse, .atten_mask = mask, .num_heads = 2, .input_layout = "BNSD",
                 .sparse_mode = 1, .softmax_lse_flag = true};
  const auto a = ng::ops::fused_infer_attention_score(q, k, v, opt);
  opt.atten_mask = host_tensor(mc, {2, 1, 3, 5}, DType::u8);
  opt.pse_shift = host_tensor(pc, {2, 2, 3, 5}, DType::f32);
  const auto c = ng::ops::fused_infer_attention_score(q, k, v, opt);
  ng::current_stream().synchronize();
  EXPECT_TRUE(bitwise_equal(a.attention_out, c.attention_out));
  EXPECT_TRUE(bitwise_equal(a.softmax_lse, c.softmax_lse));
}

// The limits: N = 256, GQA ratio 64, D = 512.
TEST(FiaLimits, MaxHeadsRatioAndDim) {
  RefArgs a{.layout = "BSND", .B = 1, .N = 256, .KVN = 4, .Sq = 1, .Skv = 3, .Dk = 512, .scale = 0.05};
  std::vector<double> qv, kv, vv;
  const Tensor q = random_tensor(qv, layout_shape(a.layout, 1, 256, 1, 512), DType::bf16, 61);
  const Tensor k = random_tensor(kv, layout_shape(a.layout, 1, 4, 3, 512), DType::bf16, 62);
  const Tensor v = random_tensor(vv, layout_shape(a.layout, 1, 4, 3, 512), DType::bf16, 63);
  const auto r = ng::ops::fused_infer_attention_score(
      q, k, v, {.num_heads = 256, .scale = 0.05, .input_layout = "BSND", .num_key_value_heads = 4});
  ng::current_stream().synchronize();
  const RefResult ref = fia_reference(a, {qv, kv, vv, {}, {}});
  const auto out = read_back(r.attention_out);
  double worst = 0;
  for (std::size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::abs(out[i] - ref.out[i]));
  EXPECT_LE(worst, 4e-3);
}

// More batches than the parameter block holds inline (its tail then lives on the heap).
TEST(FiaBatch, LargeBatchMatchesReference) {
  const std::int64_t B = ng::ops::attention::FiaParamBuffer::kInlineBatch + 6;
  RefArgs a{.layout = "BSND", .B = B, .N = 2, .KVN = 1, .Sq = 3, .Skv = 5, .Dk = 4, .scale = 0.7};
  for (std::int64_t b = 0; b < B; ++b) {
    a.actual_seq_lengths.push_back(b % 4);
    a.actual_seq_lengths_kv.push_back((b * 7) % 6);
  }
  std::vector<double> qv, kv, vv;
  const Tensor q = random_tensor(qv, layout_shape(a.layout, B, 2, 3, 4), DType::f32, 81);
  const Tensor k = random_tensor(kv, layout_shape(a.layout, B, 1, 5, 4), DType::f32, 82);
  const Tensor v = random_tensor(vv, layout_shape(a.layout, B, 1, 5, 4), DType::f32, 83);
  const auto r = ng::ops::fused_infer_attention_score(
      q, k, v, {.actual_seq_lengths = a.actual_seq_lengths,
                .actual_seq_lengths_kv = a.actual_seq_lengths_kv, .num_heads = 2, .scale = 0.7,
                .input_layout = "BSND", .num_key_value_heads = 1, .softmax_lse_flag = true});
  ng::current_stream().synchronize();
  const RefResult ref = fia_reference(a, {qv, kv, vv, {}, {}});
  const auto out = read_back(r.attention_out), lse = read_back(r.softmax_lse);
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref.out[i], 1e-5) << i;
  for (std::size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(ref.lse[i])) ASSERT_EQ(lse[i], ref.lse[i]) << i;
    else ASSERT_NEAR(lse[i], ref.lse[i], 1e-5 * (1 + std::abs(ref.lse[i]))) << i;
  }
}

// The workspace depends on shapes only, and exactly fia_workspace_bytes bytes suffice.
TEST(FiaWorkspace, ShapesOnlyAndExactSizeSuffices) {
  std::vector<double> qv, kv, vv;
  const Tensor q = random_tensor(qv, {2, 4, 64}, DType::f16, 71);
  const Tensor k = random_tensor(kv, {2, 9, 64}, DType::f16, 72);
  const Tensor v = random_tensor(vv, {2, 9, 64}, DType::f16, 73);
  const FiaOptions a{.num_heads = 4};
  const FiaOptions b{.actual_seq_lengths = {1, 2}, .actual_seq_lengths_kv = {0, 3}, .num_heads = 4,
                     .scale = 7, .pre_tokens = 1, .next_tokens = 0};
  const std::int64_t bytes = ng::ops::fia_workspace_bytes(q, k, v, a);
  EXPECT_EQ(bytes, ng::ops::fia_workspace_bytes(q, k, v, b));
  EXPECT_EQ(ng::ops::fia_max_workspace(q, k, v, a).nbytes(), static_cast<std::size_t>(bytes));
  EXPECT_EQ(ng::ops::fia_max_workspace(q, k, v, a).dtype(), DType::u8);

  // An odd base address is fine too: the kernel aligns inside the slack.
  const Tensor big = filled_tensor({bytes + 1}, DType::u8, 0);
  const Tensor ws = Tensor::from_blob(static_cast<std::uint8_t*>(big.data()) + 1, {bytes},
                                      DType::u8, big.storage());
  const Tensor out = filled_tensor(q.shape(), DType::f16, 0);
  const Tensor lse = filled_tensor({1}, DType::f32, 0);
  ng::ops::fused_infer_attention_score_out(q, k, v, b, ws, out, lse);
  const auto eager = ng::ops::fused_infer_attention_score(q, k, v, b);
  ng::current_stream().synchronize();
  EXPECT_TRUE(bitwise_equal(out, eager.attention_out));
}

TEST(FiaKernel, MalformedBlockIsATaskError) {
  std::byte junk[16] = {};
  EXPECT_THROW(ng::ops::fia_kernel().cpu(junk, sizeof junk, ng::ExecContext(nullptr, 1)),
               ng::TaskError);
  EXPECT_STREQ(ng::ops::fia_kernel().name, "fused_infer_attention_score");
}

}  // namespace
}  // namespace fia_test
