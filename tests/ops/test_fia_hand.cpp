// Hand-computed FIA cases for every mask mode, left padding, TND, the shared prefix, paged KV,
// antiquant, the quantised output, rope and pse. Each case is checked against the kernel AND the
// reference, so the reference itself is checked.
//
// Most cases use a zero query: every score is 0, so a row's output is the mean of the values it
// sees and its lse is log(count). With one head, D = 1 and values 1, 10, 100, ..., the output
// names the visible set (e.g. 11 / 2 = 5.5 is {0, 1}).
#include <cmath>
#include <limits>
#include <vector>

#include "ops/fia_case.hpp"

namespace fia_test {
namespace {

namespace ng = npugraph;
using ng::ops::FiaOptions;
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Hand {
  std::vector<double> out, lse;
};

// Runs the `.out` form (outputs prefilled with NaN, so anything untouched shows) and the reference.
struct HandRun {
  Hand kernel, reference;
};
HandRun run(std::vector<double> qv, const Shape& qs, std::vector<double> kv, const Shape& ks,
        std::vector<double> vv, const Shape& vs, const FiaOptions& opt, RefArgs ref,
        DType kv_dtype = DType::f32) {
  const Tensor q = host_tensor(qv, qs, DType::f32);
  const Tensor k = host_tensor(kv, ks, kv_dtype);
  const Tensor v = host_tensor(vv, vs, kv_dtype);
  const Shape out_shape = ng::ops::fia_output_shape(q, k, v, opt);
  const Tensor out = filled_tensor(out_shape, opt.quant_scale2.defined() ? DType::i8 : DType::f32,
                                   opt.quant_scale2.defined() ? 99 : std::nan(""));
  const Tensor lse = filled_tensor(ng::ops::fia_lse_shape(q, k, v, opt), DType::f32, std::nan(""));
  ng::ops::fused_infer_attention_score_out(q, k, v, opt, ng::ops::fia_max_workspace(q, k, v, opt),
                                           out, lse);
  ng::current_stream().synchronize();
  HandRun r;
  r.kernel = {read_back(out), read_back(lse)};
  const RefResult rr = fia_reference(ref, {qv, kv, vv, {}, {}});
  r.reference = {rr.out, rr.lse};
  return r;
}

// Checks kernel and reference against the hand values (lse: log(count), or +inf).
void expect_hand(const HandRun& r, const std::vector<double>& out, const std::vector<double>& counts) {
  ASSERT_EQ(r.kernel.out.size(), out.size());
  ASSERT_EQ(r.reference.out.size(), out.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    EXPECT_NEAR(r.kernel.out[i], out[i], 1e-6 * (1 + std::abs(out[i]))) << "kernel out " << i;
    EXPECT_NEAR(r.reference.out[i], out[i], 1e-9 * (1 + std::abs(out[i]))) << "reference out " << i;
  }
  ASSERT_EQ(r.kernel.lse.size(), counts.size());
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const double want = counts[i] == 0 ? kInf : std::log(counts[i]);
    if (counts[i] == 0) {
      EXPECT_EQ(r.kernel.lse[i], kInf) << "kernel lse " << i;
      EXPECT_EQ(r.reference.lse[i], kInf) << "reference lse " << i;
    } else {
      EXPECT_NEAR(r.kernel.lse[i], want, 1e-6) << "kernel lse " << i;
      EXPECT_NEAR(r.reference.lse[i], want, 1e-12) << "reference lse " << i;
    }
  }
}

// Zero query, Sq = 3, Skv = 5 (shift Lkv - Lq = 2), BNSD, one head, D = 1, values 10^j.
struct Modes {
  std::vector<double> q = std::vector<double>(3, 0.0), k = std::vector<double>(5, 1.0),
                      v = {1, 10, 100, 1000, 10000};
  HandRun go(FiaOptions opt, RefArgs ref) {
    opt.input_layout = "BNSD";
    opt.softmax_lse_flag = true;
    ref.layout = "BNSD";
    ref.Sq = 3;
    ref.Skv = 5;
    ref.sparse_mode = opt.sparse_mode;
    ref.pre_tokens = opt.pre_tokens;
    ref.next_tokens = opt.next_tokens;
    return run(q, {1, 1, 3, 1}, k, {1, 1, 5, 1}, v, {1, 1, 5, 1}, opt, ref);
  }
};

RefTensor mask_ref(const std::vector<double>& values, std::vector<std::int64_t> shape) {
  return {values, shape};
}

TEST(FiaHandMask, Mode0WithoutMaskIgnoresPreNext) {
  Modes m;
  expect_hand(m.go({.pre_tokens = 0, .next_tokens = -1}, {}),
              {11111.0 / 5, 11111.0 / 5, 11111.0 / 5}, {5, 5, 5});
}

TEST(FiaHandMask, Mode0MaskAndBand) {
  Modes m;
  std::vector<double> mv(15, 0.0);
  mv[1 * 5 + 0] = 1;  // row 1 cannot see column 0
  // pre 1, next 0: row 0 {0}, row 1 {0, 1} minus the mask = {1}, row 2 {1, 2}.
  const FiaOptions opt{.atten_mask = host_tensor(mv, {3, 5}, DType::boolean), .pre_tokens = 1,
                       .next_tokens = 0};
  expect_hand(m.go(opt, {.atten_mask = mask_ref(mv, {3, 5})}), {1, 10, 55}, {1, 1, 2});
}

TEST(FiaHandMask, Mode1MaskOnly) {
  Modes m;
  std::vector<double> mv = {0, 1, 1, 0, 0,   // row 0: {0, 3, 4}
                            1, 1, 1, 1, 1,   // row 1: nothing -> 0, +inf
                            0, 0, 0, 0, 1};  // row 2: {0, 1, 2, 3}
  const FiaOptions opt{.atten_mask = host_tensor(mv, {1, 1, 3, 5}, DType::u8), .pre_tokens = 0,
                       .next_tokens = 0, .sparse_mode = 1};  // pre/next ignored
  expect_hand(m.go(opt, {.atten_mask = mask_ref(mv, {1, 1, 3, 5})}), {11001.0 / 3, 0, 1111.0 / 4},
              {3, 0, 4});
}

TEST(FiaHandMask, Mode2TopLeftCausal) {
  Modes m;
  const FiaOptions opt{.atten_mask = compressed_mask(), .sparse_mode = 2};
  expect_hand(m.go(opt, {.atten_mask = {{}, {2048, 2048}}}), {1, 5.5, 37}, {1, 2, 3});
}

TEST(FiaHandMask, Mode3BottomRightCausal) {
  Modes m;
  const FiaOptions opt{.atten_mask = compressed_mask(), .sparse_mode = 3};
  expect_hand(m.go(opt, {.atten_mask = {{}, {2048, 2048}}}), {37, 1111.0 / 4, 11111.0 / 5},
              {3, 4, 5});
}

TEST(FiaHandMask, Mode4SlidingWindowAndEmptyBand) {
  Modes m;
  // pre 1, next 0 anchored bottom right: row i sees [i + 2 - 1, i + 2].
  FiaOptions opt{.atten_mask = compressed_mask(), .pre_tokens = 1, .next_tokens = 0, .sparse_mode = 4};
  expect_hand(m.go(opt, {.atten_mask = {{}, {2048, 2048}}}), {55, 550, 5500}, {2, 2, 2});
  // next -1, pre 0: the band is empty for every row: out 0, lse +inf.
  opt.pre_tokens = 0;
  opt.next_tokens = -1;
  expect_hand(m.go(opt, {.atten_mask = {{}, {2048, 2048}}}), {0, 0, 0}, {0, 0, 0});
}

TEST(FiaHandMask, DecodeIgnoresSparseModeButNotTheMask) {
  std::vector<double> q{0}, k(5, 1.0), v{1, 10, 100, 1000, 10000}, mv{0, 1, 0, 1, 0};
  const FiaOptions opt{.atten_mask = host_tensor(mv, {1, 5}, DType::i8), .pre_tokens = 0,
                       .next_tokens = -3, .input_layout = "BNSD", .sparse_mode = 3,
                       .softmax_lse_flag = true};
  RefArgs ref{.layout = "BNSD", .Sq = 1, .Skv = 5, .sparse_mode = 3,
              .atten_mask = mask_ref(mv, {1, 5})};
  ref.pre_tokens = 0;
  ref.next_tokens = -3;
  expect_hand(run(q, {1, 1, 1, 1}, k, {1, 1, 5, 1}, v, {1, 1, 5, 1}, opt, ref), {10101.0 / 3}, {3});
}

// Left padding: Sq = 4, query_padding_size 1, 2 valid rows -> physical rows 1, 2 (rows 0, 3
// zero-filled); Skv = 6, kv_padding_size 1, 4 valid keys -> physical 1..4. Mode 3: shift 2.
TEST(FiaHandPadding, LeftPaddingQueryAndKv) {
  std::vector<double> q(4, 0.0), k(6, 1.0), v{1, 10, 100, 1000, 10000, 100000};
  FiaOptions opt{.atten_mask = compressed_mask(), .actual_seq_lengths = {2},
                 .actual_seq_lengths_kv = {4},
                 .query_padding_size = int_tensor({1}, {1}, DType::i64),
                 .kv_padding_size = int_tensor({1}, {1}, DType::i64), .input_layout = "BSND",
                 .sparse_mode = 3, .softmax_lse_flag = true};
  RefArgs ref{.layout = "BSND", .Sq = 4, .Skv = 6, .sparse_mode = 3,
              .actual_seq_lengths = {2}, .actual_seq_lengths_kv = {4},
              .atten_mask = {{}, {2048, 2048}}, .query_padding_size = 1, .kv_padding_size = 1};
  // Row 1 (logical 0) sees keys {10, 100, 1000}; row 2 (logical 1) all four.
  expect_hand(run(q, {1, 4, 1, 1}, k, {1, 6, 1, 1}, v, {1, 6, 1, 1}, opt, ref),
              {0, 370, 11110.0 / 4, 0}, {0, 3, 4, 0});
  // Mode 0 with a mask under left padding: pre/next are ignored, the mask (logical indices) applies.
  // The mask is [Sq, Skv] = [4, 6] but indexed logically: logical row 0 cannot see logical key 2.
  std::vector<double> mv(24, 0.0);
  mv[0 * 6 + 2] = 1;
  opt.sparse_mode = ref.sparse_mode = 0;
  opt.atten_mask = host_tensor(mv, {4, 6}, DType::boolean);
  ref.atten_mask = mask_ref(mv, {4, 6});
  opt.pre_tokens = ref.pre_tokens = 0;
  opt.next_tokens = ref.next_tokens = 0;
  expect_hand(run(q, {1, 4, 1, 1}, k, {1, 6, 1, 1}, v, {1, 6, 1, 1}, opt, ref),
              {0, 10110.0 / 3, 11110.0 / 4, 0}, {0, 3, 4, 0});
  // Without actual_seq_lengths the padding is ignored (right padding): 4 rows see all 6 keys.
  opt = {.query_padding_size = int_tensor({1}, {1}, DType::i64), .input_layout = "BSND",
         .softmax_lse_flag = true};
  ref = {.layout = "BSND", .Sq = 4, .Skv = 6, .query_padding_size = 1};
  const double all = 111111.0 / 6;
  expect_hand(run(q, {1, 4, 1, 1}, k, {1, 6, 1, 1}, v, {1, 6, 1, 1}, opt, ref),
              {all, all, all, all}, {6, 6, 6, 6});
}

// TND, B = 2: query tokens {0, 1 | 2, 3, 4} (cum 2, 5) and one spare row; key tokens {0, 1, 2 | 3, 4}
// (cum 3, 5). Mode 3: batch 0 shift 1, batch 1 shift -1 (its row 0 sees nothing).
TEST(FiaHandLayouts, TndCumulativeLengths) {
  std::vector<double> q(6, 0.0), k(5, 1.0), v{1, 10, 100, 1000, 10000};
  const FiaOptions opt{.atten_mask = compressed_mask(), .actual_seq_lengths = {2, 5},
                       .actual_seq_lengths_kv = {3, 5}, .input_layout = "TND", .sparse_mode = 3,
                       .softmax_lse_flag = true};
  RefArgs ref{.layout = "TND", .B = 2, .Sq = 6, .Skv = 5, .sparse_mode = 3,
              .actual_seq_lengths = {2, 5}, .actual_seq_lengths_kv = {3, 5},
              .atten_mask = {{}, {2048, 2048}}};
  expect_hand(run(q, {6, 1, 1}, k, {5, 1, 1}, v, {5, 1, 1}, opt, ref),
              {5.5, 37, 0, 1000, 5500, 0}, {2, 3, 0, 1, 2, 0});
}

// A shared prefix of 2 tokens (values 1, 10) before 2 key tokens (100, 1000); mode 3 with Lq = 2:
// row 0 sees 3 columns, row 1 all 4. actual_shared_prefix_len 1 drops the second prefix token.
TEST(FiaHandFeatures, SharedPrefix) {
  std::vector<double> q(2, 0.0), k(2, 1.0), v{100, 1000}, kp(2, 1.0), vp{1, 10};
  FiaOptions opt{.atten_mask = compressed_mask(),
                 .key_shared_prefix = host_tensor(kp, {1, 1, 2, 1}, DType::f32),
                 .value_shared_prefix = host_tensor(vp, {1, 1, 2, 1}, DType::f32),
                 .input_layout = "BNSD", .sparse_mode = 3, .softmax_lse_flag = true};
  RefArgs ref{.layout = "BNSD", .Sq = 2, .Skv = 2, .sparse_mode = 3,
              .atten_mask = {{}, {2048, 2048}}, .key_shared_prefix = kp,
              .value_shared_prefix = vp, .prefix_seq = 2};
  expect_hand(run(q, {1, 1, 2, 1}, k, {1, 1, 2, 1}, v, {1, 1, 2, 1}, opt, ref), {37, 1111.0 / 4},
              {3, 4});
  opt.actual_shared_prefix_len = ref.actual_shared_prefix_len = {1};
  expect_hand(run(q, {1, 1, 2, 1}, k, {1, 1, 2, 1}, v, {1, 1, 2, 1}, opt, ref), {101.0 / 2, 367},
              {2, 3});
}

// Paged decode: block_size 16, table [2, 0]: tokens 0..15 are block 2, tokens 16..19 rows 0..3 of
// block 0. Block b row r holds the value 100 b + r.
TEST(FiaHandFeatures, PagedKvFollowsTheTable) {
  std::vector<double> q{0}, k(3 * 16, 1.0), v(3 * 16);
  for (int b = 0; b < 3; ++b)
    for (int r = 0; r < 16; ++r) v[b * 16 + r] = 100 * b + r;
  const FiaOptions opt{.actual_seq_lengths_kv = {20},
                       .block_table = int_tensor({2, 0}, {1, 2}, DType::i32),
                       .input_layout = "BSH", .block_size = 16, .softmax_lse_flag = true};
  RefArgs ref{.layout = "BSH", .Sq = 1, .Skv = 32, .actual_seq_lengths_kv = {20},
              .block_table = {2, 0}, .max_blocks = 2, .block_size = 16, .num_blocks = 3};
  double sum = 0;
  for (int r = 0; r < 16; ++r) sum += 200 + r;
  for (int r = 0; r < 4; ++r) sum += r;
  expect_hand(run(q, {1, 1, 1}, k, {3, 16, 1}, v, {3, 16, 1}, opt, ref), {sum / 20}, {20});
}

// Antiquant: value int8 x with per-channel scale s and offset o gives (x + o) * s; D = 2.
TEST(FiaHandFeatures, AntiquantPerChannelValue) {
  std::vector<double> q(2, 0.0), k{1, 1, 1, 1}, v{10, 20, 30, 40}, s{0.5, 0.25}, o{1, -2};
  FiaOptions o2;
  o2.key_antiquant_scale = host_tensor(s, {1, 2}, DType::f32);
  o2.key_antiquant_offset = host_tensor(o, {1, 2}, DType::f32);
  o2.value_antiquant_scale = o2.key_antiquant_scale;
  o2.value_antiquant_offset = o2.key_antiquant_offset;
  o2.input_layout = "BNSD";
  o2.softmax_lse_flag = true;
  RefArgs ref{.layout = "BNSD", .Sq = 1, .Skv = 2, .Dk = 2,
              .key_antiquant_scale = {s, {1, 2}}, .key_antiquant_offset = {o, {1, 2}},
              .value_antiquant_scale = {s, {1, 2}}, .value_antiquant_offset = {o, {1, 2}}};
  // Tokens: (11 * 0.5, 18 * 0.25) = (5.5, 4.5) and (31 * 0.5, 38 * 0.25) = (15.5, 9.5).
  expect_hand(run(q, {1, 1, 1, 2}, k, {1, 1, 2, 2}, v, {1, 1, 2, 2}, o2, ref, DType::i8),
              {10.5, 7.0}, {2});
}

// Antiquant of the key changes the scores: q = 1, k = 2 and 0 with scale 0.5: scores 1 and 0.
TEST(FiaHandFeatures, AntiquantPerTensorKey) {
  std::vector<double> q{1}, k{2, 0}, v{3, 5}, s{0.5, 1.0};
  FiaOptions opt;
  opt.antiquant_scale = host_tensor(s, {2}, DType::f32);
  opt.input_layout = "BNSD";
  opt.softmax_lse_flag = true;
  RefArgs ref{.layout = "BNSD", .Sq = 1, .Skv = 2, .antiquant_scale = {s, {2}}};
  const double e = std::exp(1.0);
  const HandRun r = run(q, {1, 1, 1, 1}, k, {1, 1, 2, 1}, v, {1, 1, 2, 1}, opt, ref, DType::i8);
  EXPECT_NEAR(r.kernel.out[0], (3 * e + 5) / (e + 1), 1e-6);
  EXPECT_NEAR(r.reference.out[0], (3 * e + 5) / (e + 1), 1e-12);
  EXPECT_NEAR(r.kernel.lse[0], std::log(e + 1), 1e-6);
  EXPECT_NEAR(r.reference.lse[0], std::log(e + 1), 1e-12);
}

// Quantised output: round half to even, offset, saturation; empty rows are 0.
TEST(FiaHandFeatures, QuantisedOutputRoundsHalfToEvenAndSaturates) {
  // Batch 0 averages 0.625, batch 1 0.375 (exact in float32).
  std::vector<double> q(4, 0.0), k(4, 1.0), v{0.625, 0.625, 0.375, 0.375};
  auto go = [&](double scale, double offset, std::vector<std::int64_t> kv_len) {
    std::vector<double> sv{scale}, ov{offset};
    FiaOptions opt;
    opt.actual_seq_lengths_kv = kv_len;
    opt.quant_scale2 = host_tensor(sv, {1}, DType::f32);
    opt.quant_offset2 = host_tensor(ov, {1}, DType::f32);
    opt.num_heads = 1;
    opt.input_layout = "BNSD";
    opt.softmax_lse_flag = true;
    RefArgs ref{.layout = "BNSD", .B = 2, .Sq = 2, .Skv = 2, .actual_seq_lengths_kv = kv_len,
                .quant_scale2 = {sv, {1}}, .quant_offset2 = {ov, {1}}};
    return run(q, {2, 1, 2, 1}, k, {2, 1, 2, 1}, v, {2, 1, 2, 1}, opt, ref);
  };
  // 0.625 * 4 = 2.5 -> 2 (down to even); 0.375 * 4 = 1.5 -> 2 (up to even).
  HandRun r = go(4, 0, {2, 2});
  EXPECT_EQ(r.kernel.out, (std::vector<double>{2, 2, 2, 2}));
  EXPECT_EQ(r.reference.out, r.kernel.out);
  // Offset 0.5: 3.0 -> 3, 2.0 -> 2.
  r = go(4, 0.5, {2, 2});
  EXPECT_EQ(r.kernel.out, (std::vector<double>{3, 3, 2, 2}));
  EXPECT_EQ(r.reference.out, r.kernel.out);
  // Saturation both ways; batch 1 with no keys: its rows are 0, not the offset.
  r = go(1000, 0, {2, 2});
  EXPECT_EQ(r.kernel.out, (std::vector<double>{127, 127, 127, 127}));
  r = go(-1000, 3, {2, 0});
  EXPECT_EQ(r.kernel.out, (std::vector<double>{-128, -128, 0, 0}));
  EXPECT_EQ(r.reference.out, r.kernel.out);
}

// Rope and pse: scores 0 and log 3 from either source give weights 1/4, 3/4.
TEST(FiaHandFeatures, RopeAndPseAddToTheScores) {
  const double l3 = std::log(3.0);
  std::vector<double> q{0}, k{1, 1}, v{1, 5}, qr{1}, kr{0, l3};
  // Rope: s_j = 1 * (q.k + q_rope.k_rope_j) = kr_j.
  const Tensor qt = host_tensor(q, {1, 1, 1, 1}, DType::f32);
  const Tensor kt = host_tensor(k, {1, 1, 2, 1}, DType::f32);
  const Tensor vt = host_tensor(v, {1, 1, 2, 1}, DType::f32);
  FiaOptions opt;
  opt.query_rope = host_tensor(qr, {1, 1, 1, 1}, DType::f32);
  opt.key_rope = host_tensor(kr, {1, 1, 2, 1}, DType::f32);
  opt.input_layout = "BNSD";
  opt.softmax_lse_flag = true;
  auto r = ng::ops::fused_infer_attention_score(qt, kt, vt, opt);
  ng::current_stream().synchronize();
  EXPECT_NEAR(read_back(r.attention_out)[0], 4.0, 1e-6);  // (1 + 3 * 5) / 4
  EXPECT_NEAR(read_back(r.softmax_lse)[0], std::log(4.0), 1e-6);
  RefArgs ref{.layout = "BNSD", .Sq = 1, .Skv = 2, .Dr = 1};
  const RefResult rr = fia_reference(ref, {q, k, v, qr, kr});
  EXPECT_NEAR(rr.out[0], 4.0, 1e-7);  // log 3 rounded to float32
  // pse_shift: the same weights, added after scaling (scale 7 multiplies q.k = 0 only).
  std::vector<double> pv{0, l3};
  FiaOptions p2;
  p2.pse_shift = host_tensor(pv, {1, 1, 1, 2}, DType::f32);
  p2.scale = 7;
  p2.input_layout = "BNSD";
  p2.softmax_lse_flag = true;
  r = ng::ops::fused_infer_attention_score(qt, kt, vt, p2);
  ng::current_stream().synchronize();
  EXPECT_NEAR(read_back(r.attention_out)[0], 4.0, 1e-6);
  RefArgs ref2{.layout = "BNSD", .Sq = 1, .Skv = 2, .scale = 7, .pse_shift = {pv, {1, 1, 1, 2}}};
  EXPECT_NEAR(fia_reference(ref2, {q, k, v, {}, {}}).out[0], 4.0, 1e-7);
}

// Value D differs from query D: attention_out follows value.
TEST(FiaHandFeatures, ValueDimDiffers) {
  std::vector<double> q{0, 0}, k{1, 1, 1, 1}, v{1, 2, 3, 3, 4, 5};  // Dk 2, Dv 3
  FiaOptions opt{.input_layout = "BSH", .softmax_lse_flag = true};
  RefArgs ref{.layout = "BSH", .Sq = 1, .Skv = 2, .Dk = 2, .Dv = 3};
  expect_hand(run(q, {1, 1, 2}, k, {1, 2, 2}, v, {1, 2, 3}, opt, ref), {2, 3, 4}, {2});
}

}  // namespace
}  // namespace fia_test
