// The fast FIA kernels beyond the parity suite's small shapes (Note [FIA fast kernels]): decode
// with several KV splits and prefill with several column chunks and row blocks, checked against
// the simple kernel (FiaKernelMode::simple); splits under eager, graph replay and replay after an
// update stay bitwise equal; a decode row has its lone bits in any batch. Every comparison asserts
// which kernel ran each launch (the path counters of fia_kernel_mode.hpp), so a fast-kernel test
// cannot silently compare the simple kernel with itself.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "ops/attention/fia_kernel_mode.hpp"
#include "ops/attention/fia_plan.hpp"
#include "ops/fia_case.hpp"
#include "support/captured_fia.hpp"

namespace fia_test {
namespace {

namespace ng = npugraph;
namespace att = ng::ops::attention;
using att::FiaPath;
using ng::ops::FiaOptions;

// Sets the kernel mode for a scope (the default, fast, afterwards).
class ModeScope {
 public:
  explicit ModeScope(att::FiaKernelMode m) { att::set_fia_kernel_mode(m); }
  ~ModeScope() { att::set_fia_kernel_mode(att::FiaKernelMode::fast); }
  ModeScope(const ModeScope&) = delete;
  ModeScope& operator=(const ModeScope&) = delete;
};

// The launches since `before` all ran on `path`, and there were `launches` of them.
::testing::AssertionResult ran_on(const att::FiaPathCounts& before, FiaPath path,
                                  std::uint64_t launches = 1) {
  const att::FiaPathCounts d = att::fia_path_counts().since(before);
  if (d[path] == launches && d.total() == launches) return ::testing::AssertionSuccess();
  ::testing::AssertionResult r = ::testing::AssertionFailure();
  r << "expected " << launches << " launch(es) on " << att::fia_path_name(path) << ", ran:";
  for (int i = 0; i < static_cast<int>(FiaPath::count); ++i)
    if (d.n[i]) r << " " << att::fia_path_name(static_cast<FiaPath>(i)) << " x" << d.n[i];
  return r;
}

// The launches since `before` all ran on a fast decode path (tiles or direct, as the target's
// vector length decides), and there were `launches` of them.
::testing::AssertionResult ran_fast_decode(const att::FiaPathCounts& before, std::uint64_t launches) {
  const att::FiaPathCounts d = att::fia_path_counts().since(before);
  if (d[FiaPath::decode_tiles] + d[FiaPath::decode_direct] == launches && d.total() == launches)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << d.total() << " launch(es), " << d[FiaPath::decode_tiles]
                                       << " decode_tiles, " << d[FiaPath::decode_direct]
                                       << " decode_direct; expected " << launches << " fast decode";
}

struct Big {
  Tensor q, k, v;
  FiaOptions opt;
};

// BNSD, D = 64 unless given: decode (Sq = 1) or prefill.
Big make_big(DType dt, std::int64_t B, std::int64_t N, std::int64_t KVN, std::int64_t Sq,
             std::int64_t Skv, std::uint32_t seed, std::int64_t D = 64) {
  Big b;
  std::vector<double> x;
  b.q = random_tensor(x, {B, N, Sq, D}, dt, seed);
  b.k = random_tensor(x, {B, KVN, Skv, D}, dt, seed + 1);
  b.v = random_tensor(x, {B, KVN, Skv, D}, dt, seed + 2);
  b.opt = {.num_heads = N, .scale = 0.125, .input_layout = "BNSD", .num_key_value_heads = KVN,
           .softmax_lse_flag = true};
  return b;
}

// b's key and value moved into paged caches [blocks, KV_N, block_size, D] whose blocks are handed
// out in a shuffled order (so a kernel that ignored the table would read other tokens), with the
// block table that finds them.
void make_paged(Big& b, std::int64_t block_size, std::uint32_t seed) {
  const Shape ks = b.k.shape();
  const std::int64_t B = ks[0], KVN = ks[1], S = ks[2], D = ks[3];
  const std::int64_t per = (S + block_size - 1) / block_size, blocks = B * per;
  std::vector<std::int64_t> ids(static_cast<std::size_t>(blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  const std::size_t es = b.k.element_size(), row = static_cast<std::size_t>(D) * es;
  auto page = [&](const Tensor& t) {
    Tensor cache = filled_tensor({blocks, KVN, block_size, D}, t.dtype(), 0);
    for (std::int64_t bb = 0; bb < B; ++bb)
      for (std::int64_t i = 0; i < per; ++i) {
        const std::int64_t id = ids[static_cast<std::size_t>(bb * per + i)];
        for (std::int64_t h = 0; h < KVN; ++h)
          for (std::int64_t r = 0; r < block_size && i * block_size + r < S; ++r)
            std::memcpy(static_cast<std::byte*>(cache.data()) + (((id * KVN + h) * block_size + r) * D) * es,
                        static_cast<const std::byte*>(t.data()) + (((bb * KVN + h) * S + i * block_size + r) * D) * es,
                        row);
      }
    return cache;
  };
  b.k = page(b.k);
  b.v = page(b.v);
  b.opt.block_table = int_tensor(ids, {B, per}, DType::i32);
  b.opt.block_size = block_size;
}

// Fast and simple kernels agree within the output dtype's rounding (both accumulate in float32
// in different orders; the outputs are rounded once each). `fast_path`: the path the fast run
// must take (FiaPath::count: any fast decode path).
void expect_fast_matches_simple(const Big& b, FiaPath fast_path) {
  ng::ops::FiaResult fast, simple;
  {
    ModeScope m(att::FiaKernelMode::fast);
    const att::FiaPathCounts before = att::fia_path_counts();
    fast = ng::ops::fused_infer_attention_score(b.q, b.k, b.v, b.opt);
    ng::device_synchronize();
    if (fast_path == FiaPath::count) ASSERT_TRUE(ran_fast_decode(before, 1));
    else ASSERT_TRUE(ran_on(before, fast_path));
  }
  {
    ModeScope m(att::FiaKernelMode::simple);
    const att::FiaPathCounts before = att::fia_path_counts();
    simple = ng::ops::fused_infer_attention_score(b.q, b.k, b.v, b.opt);
    ng::device_synchronize();
    ASSERT_TRUE(ran_on(before, FiaPath::simple));
  }
  const std::vector<double> a = read_back(fast.attention_out), s = read_back(simple.attention_out);
  const double eps = 2 * out_bound(b.q.dtype());
  ASSERT_EQ(a.size(), s.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], s[i], eps * std::max(1.0, std::abs(s[i]))) << "element " << i;
  const std::vector<double> la = read_back(fast.softmax_lse), ls = read_back(simple.softmax_lse);
  for (std::size_t i = 0; i < la.size(); ++i) {
    if (std::isinf(ls[i])) ASSERT_EQ(la[i], ls[i]) << i;
    else ASSERT_NEAR(la[i], ls[i], 1e-5 * (1 + std::abs(ls[i]))) << "lse " << i;
  }
}

att::FiaWorkspacePlan workspace_plan(const Big& b) {
  att::FiaParams header;
  att::FiaPlan plan(b.q, b.k, b.v, b.opt, header);
  att::plan_fia(plan);
  return plan.workspace();
}

TEST(FiaFast, DecodeWithSplitsMatchesSimple) {
  Big b = make_big(DType::f16, 3, 8, 2, 1, 3000, 11);
  b.opt.actual_seq_lengths_kv = {3000, 0, 777};  // ragged, one empty batch
  expect_fast_matches_simple(b, FiaPath::count);
  EXPECT_GT(workspace_plan(b).fast_splits, 8);
}

// The direct decode path (units of 1, 2, 3 and 4 rows: the 4-row blocks, spare rows dropped) at
// D = 128 and 80 (full register blocks, and the single-vector remainder), ragged lengths that end
// mid-block (odd: a column block past the run's end).
TEST(FiaFast, DecodeDirectWideHeadsMatchSimple) {
  struct Heads { std::int64_t n, kvn; };
  for (std::int64_t D : {128, 80})
    for (const Heads h : {Heads{4, 4}, Heads{4, 2}, Heads{6, 2}, Heads{4, 1}}) {
      SCOPED_TRACE(testing::Message() << "D " << D << ", N " << h.n << ", KV_N " << h.kvn);
      Big b = make_big(DType::bf16, 2, h.n, h.kvn, 1, 1000, 71, D);
      b.opt.actual_seq_lengths_kv = {1000, 333};
      expect_fast_matches_simple(b, FiaPath::decode_direct);
    }
}

// 8 heads x 3 query rows per KV head: the tile path, contiguous and from a paged cache with a
// shuffled block table (block_size 128: query S > 1), which must give the contiguous result.
TEST(FiaFast, DecodeGqaSeveralRowsAndPagedMatchSimple) {
  Big b = make_big(DType::bf16, 2, 16, 2, 3, 1024, 21);
  b.opt.actual_seq_lengths_kv = {1000, 513};
  b.opt.sparse_mode = 3;
  b.opt.atten_mask = compressed_mask();
  expect_fast_matches_simple(b, FiaPath::decode_tiles);
  const auto contiguous = ng::ops::fused_infer_attention_score(b.q, b.k, b.v, b.opt);
  ng::device_synchronize();
  Big paged = b;
  make_paged(paged, 128, 22);
  expect_fast_matches_simple(paged, FiaPath::decode_tiles);
  const auto r = ng::ops::fused_infer_attention_score(paged.q, paged.k, paged.v, paged.opt);
  ng::device_synchronize();
  const std::vector<double> x = read_back(r.attention_out), y = read_back(contiguous.attention_out);
  ASSERT_EQ(x.size(), y.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    ASSERT_NEAR(x[i], y[i], 2 * out_bound(DType::bf16) * std::max(1.0, std::abs(y[i]))) << i;
}

// Decode (one row per KV head: the direct path) from a paged cache with a shuffled table and
// block_size 16 (runs cut at every block), against the simple kernel and the contiguous result.
TEST(FiaFast, DecodeDirectPagedShuffledTableMatchesSimple) {
  Big b = make_big(DType::f16, 3, 4, 4, 1, 700, 81);
  b.opt.actual_seq_lengths_kv = {700, 17, 450};
  const auto contiguous = ng::ops::fused_infer_attention_score(b.q, b.k, b.v, b.opt);
  ng::device_synchronize();
  make_paged(b, 16, 82);
  expect_fast_matches_simple(b, FiaPath::decode_direct);
  const auto r = ng::ops::fused_infer_attention_score(b.q, b.k, b.v, b.opt);
  ng::device_synchronize();
  const std::vector<double> x = read_back(r.attention_out), y = read_back(contiguous.attention_out);
  for (std::size_t i = 0; i < x.size(); ++i)
    ASSERT_NEAR(x[i], y[i], 2 * out_bound(DType::f16) * std::max(1.0, std::abs(y[i]))) << i;
}

TEST(FiaFast, PrefillCausalAndBandMatchSimple) {
  Big b = make_big(DType::bf16, 2, 4, 2, 150, 300, 31);
  b.opt.actual_seq_lengths = {150, 97};
  b.opt.actual_seq_lengths_kv = {300, 200};
  b.opt.sparse_mode = 3;
  b.opt.atten_mask = compressed_mask();
  expect_fast_matches_simple(b, FiaPath::prefill);
  b.opt.sparse_mode = 4;
  b.opt.pre_tokens = 70;
  b.opt.next_tokens = 5;
  expect_fast_matches_simple(b, FiaPath::prefill);
  b.opt.sparse_mode = 0;
  b.opt.atten_mask = {};
  b.opt.pre_tokens = 2147483647;
  b.opt.next_tokens = 2147483647;
  expect_fast_matches_simple(b, FiaPath::prefill);
}

// A key whose D stride is not 1 (a hand-made view) is not covered by the fast kernels: the launch
// falls back to the simple kernel, with the result of the contiguous key.
TEST(FiaFast, StridedHeadDimFallsBackToSimple) {
  Big b = make_big(DType::f32, 1, 2, 2, 1, 40, 91, 16);
  std::vector<double> x;
  const Tensor wide = random_tensor(x, {1, 2, 40, 32}, DType::f32, 92);
  const Tensor k = Tensor::from_blob(wide.data(), {1, 2, 40, 16}, {2560, 1280, 32, 2}, DType::f32,
                                     wide.storage());
  std::vector<double> kd(1 * 2 * 40 * 16);
  for (std::size_t i = 0; i < kd.size(); ++i) kd[i] = x[2 * i];
  const Tensor k_dense = host_tensor(kd, {1, 2, 40, 16}, DType::f32);
  att::FiaPathCounts before = att::fia_path_counts();
  const auto strided = ng::ops::fused_infer_attention_score(b.q, k, b.v, b.opt);
  ng::device_synchronize();
  EXPECT_TRUE(ran_on(before, FiaPath::fallback));
  before = att::fia_path_counts();
  const auto dense = ng::ops::fused_infer_attention_score(b.q, k_dense, b.v, b.opt);
  ng::device_synchronize();
  EXPECT_TRUE(ran_fast_decode(before, 1));
  const std::vector<double> s = read_back(strided.attention_out), d = read_back(dense.attention_out);
  for (std::size_t i = 0; i < s.size(); ++i) ASSERT_NEAR(s[i], d[i], 1e-5) << i;
}

// Batch invariance (Note [FIA decode splits]): each row of a decode launch has the bits of a launch
// of that row alone, whatever the other rows' lengths (SmolLM2's heads: 9 on 3, D 64; short rows,
// rows past kMinSplit, the longest), on 1, 2 and 7 threads: the splits may depend on the thread
// count and the row's own length, never on the batch. (The kernel once split every row by the
// launch's total length: a long row had three splits alone and one beside 15 others.)
TEST(FiaFast, DecodeRowsHaveTheirLoneBitsInAnyBatch) {
  const std::vector<std::int64_t> lengths{2048, 1, 300, 257, 256, 700, 1500, 999,
                                          64,   1024, 513, 2000, 129, 1800, 400, 1100};
  const auto B = static_cast<std::int64_t>(lengths.size());
  Big b = make_big(DType::f16, B, 9, 3, 1, 2048, 51);
  b.opt.actual_seq_lengths_kv = lengths;
  for (int threads : {1, 2, 7}) {
    SCOPED_TRACE(testing::Message() << threads << " threads");
    const ng::Stream stream = ng::Stream::create(ng::Device::cpu(), {.num_threads = threads});
    const ng::StreamGuard on(stream);
    const att::FiaPathCounts before = att::fia_path_counts();
    const auto all = ng::ops::fused_infer_attention_score(b.q, b.k, b.v, b.opt);
    for (std::int64_t i = 0; i < B; ++i) {
      FiaOptions o = b.opt;
      o.actual_seq_lengths_kv = {lengths[static_cast<std::size_t>(i)]};
      const auto alone = ng::ops::fused_infer_attention_score(b.q.narrow(0, i, 1), b.k.narrow(0, i, 1),
                                                              b.v.narrow(0, i, 1), o);
      stream.synchronize();
      EXPECT_TRUE(bitwise_equal(all.attention_out.narrow(0, i, 1), alone.attention_out)) << "row " << i;
      EXPECT_TRUE(bitwise_equal(all.softmax_lse.narrow(0, i, 1), alone.softmax_lse)) << "row " << i;
    }
    EXPECT_TRUE(ran_fast_decode(before, static_cast<std::uint64_t>(B + 1)));
  }
}

// Dimension 1's index i of a contiguous tensor of 4 dimensions (a BNSD head), as a contiguous copy.
Tensor head_of(const Tensor& t, std::int64_t i) {
  const Shape s = t.shape();
  Tensor out = ng::empty({s[0], 1, s[2], s[3]}, t.dtype());
  const std::size_t inner = static_cast<std::size_t>(s[2] * s[3]) * t.element_size();
  for (std::int64_t b = 0; b < s[0]; ++b)
    std::memcpy(static_cast<std::byte*>(out.data()) + static_cast<std::size_t>(b) * inner,
                static_cast<const std::byte*>(t.data()) + static_cast<std::size_t>(b * s[1] + i) * inner, inner);
  return out;
}

// The direct path's row blocks (3 rows for GQA 3: SmolLM2's 9 heads on 3; 1 row for a lone head)
// give a row the same bits: each query head of a GQA-3 launch equals that head alone with its KV
// head (one row per unit), at D 64 (whole register blocks) and 80 (the single-vector remainder),
// lengths within one split (ending mid-block) and past kMinSplit. On 2 threads both launches split
// a row every kMinSplit columns (Note [FIA decode splits]: 600 x 3 KV heads / 8 < 256), so the
// splits, which depend on KV_N, are the same.
TEST(FiaFast, DecodeDirectRowBlocksDoNotChangeARowsBits) {
  const ng::Stream stream = ng::Stream::create(ng::Device::cpu(), {.num_threads = 2});
  const ng::StreamGuard on(stream);
  for (std::int64_t D : {64, 80}) {
    SCOPED_TRACE(testing::Message() << "D " << D);
    const std::int64_t N = 9, KVN = 3;
    Big b = make_big(DType::f16, 2, N, KVN, 1, 600, 91, D);
    b.opt.actual_seq_lengths_kv = {203, 600};
    const att::FiaPathCounts before = att::fia_path_counts();
    const auto all = ng::ops::fused_infer_attention_score(b.q, b.k, b.v, b.opt);
    stream.synchronize();
    ASSERT_TRUE(ran_on(before, FiaPath::decode_direct));
    for (std::int64_t n = 0; n < N; ++n) {
      const std::int64_t h = n / (N / KVN);
      FiaOptions o = b.opt;
      o.num_heads = 1;
      o.num_key_value_heads = 1;
      const auto alone = ng::ops::fused_infer_attention_score(head_of(b.q, n), head_of(b.k, h), head_of(b.v, h), o);
      stream.synchronize();
      EXPECT_TRUE(bitwise_equal(head_of(all.attention_out, n), alone.attention_out)) << "head " << n;
      EXPECT_TRUE(bitwise_equal(head_of(all.softmax_lse, n), alone.softmax_lse)) << "head " << n;
    }
  }
}

// Captures b's call in a group, replays it, updates its KV lengths and replays again: each replay is
// bitwise the eager call with the same arguments (b: B 2, N 8, 2048 KV tokens, Sq 1), and every
// launch (the captured one, its replays, the updated replays, the eager ones) ran the fast decode.
void expect_eager_replay_update_bitwise(Big& b) {
  b.opt.actual_seq_lengths_kv = {2048, 900};
  FiaOptions after = b.opt;
  after.actual_seq_lengths_kv = {1300, 2048};
  ngtest::CapturedFia c(b.q, b.k, b.v, b.opt);
  const att::FiaPathCounts before = att::fia_path_counts();
  ng::ops::FiaResult eager_old, eager_new;
  EXPECT_TRUE(c.replay_equals_eager(b.opt, &eager_old));
  c.update(after);
  EXPECT_TRUE(c.replay_equals_eager(after, &eager_new));
  EXPECT_FALSE(bitwise_equal(eager_new.attention_out, eager_old.attention_out));
  EXPECT_TRUE(ran_fast_decode(before, 4));  // 2 replays, 2 eager calls
}

// A decode launch with several splits: eager, replay, and replay after an update of the KV
// lengths are bitwise equal to eager with the same arguments.
TEST(FiaFast, DecodeSplitsEagerReplayUpdateBitwise) {
  Big b = make_big(DType::f16, 2, 8, 2, 1, 2048, 41);
  expect_eager_replay_update_bitwise(b);
}

// A float32 query over a float16 / bfloat16 cache (the decode engine's kv_dtype): the same bits as
// the float32 cache holding the same (widened) values, on the fast kernels' decode paths (direct,
// tiles, with splits, paged) and prefill, and on the simple kernel; eager == replay == updated.
TEST(FiaFast, Float32QueryOverAHalfCacheIsTheWidenedCache) {
  const auto widen = [](const Tensor& t) {
    std::vector<double> x = read_back(t);
    return host_tensor(x, t.shape(), DType::f32);
  };
  struct Shape5 { std::int64_t B, N, KVN, Sq, Skv; };
  for (DType dt : {DType::f16, DType::bf16})
    for (const Shape5 s : {Shape5{3, 4, 4, 1, 700}, Shape5{2, 9, 3, 1, 170}, Shape5{2, 16, 2, 3, 1024},
                           Shape5{2, 8, 2, 1, 3000}, Shape5{2, 4, 2, 150, 300}}) {
      SCOPED_TRACE(testing::Message() << ng::dtype_name(dt) << " B " << s.B << " N " << s.N << " KV_N "
                                      << s.KVN << " Sq " << s.Sq << " Skv " << s.Skv);
      Big b = make_big(dt, s.B, s.N, s.KVN, s.Sq, s.Skv, 91);
      b.q = widen(b.q);
      b.opt.actual_seq_lengths_kv = {s.Skv};  // ragged: the other batches two thirds as long, plus one
      for (std::int64_t i = 1; i < s.B; ++i) b.opt.actual_seq_lengths_kv.push_back(s.Skv * 2 / 3 + i);
      if (s.Sq > 1) {
        b.opt.sparse_mode = 3;
        b.opt.atten_mask = compressed_mask();
      }
      for (bool paged : {false, true}) {
        Big mixed = b;
        if (paged) make_paged(mixed, 128, 92);
        Big wide = mixed;
        wide.k = widen(mixed.k);
        wide.v = widen(mixed.v);
        for (att::FiaKernelMode mode : {att::FiaKernelMode::fast, att::FiaKernelMode::simple}) {
          ModeScope m(mode);
          const auto a = ng::ops::fused_infer_attention_score(mixed.q, mixed.k, mixed.v, mixed.opt);
          const auto w = ng::ops::fused_infer_attention_score(wide.q, wide.k, wide.v, wide.opt);
          ng::device_synchronize();
          EXPECT_EQ(a.attention_out.dtype(), DType::f32);
          EXPECT_TRUE(bitwise_equal(a.attention_out, w.attention_out)) << "paged " << paged << " mode " << static_cast<int>(mode);
          EXPECT_TRUE(bitwise_equal(a.softmax_lse, w.softmax_lse)) << "paged " << paged;
        }
        if (s.Sq == 1) expect_fast_matches_simple(mixed, FiaPath::count);
      }
    }
  Big b = make_big(DType::f16, 2, 8, 2, 1, 2048, 93);
  b.q = widen(b.q);
  expect_eager_replay_update_bitwise(b);
}

// int8 K/V (D = 64) with separate antiquant parameters: per-channel (mode 0, [KV_N, 1, D] in the
// query's dtype, with offsets) or per-token (mode 1, [B, S] float32).
enum class Int8Kind { channel, token, key_channel_value_token };

Big make_int8(Int8Kind kind, std::int64_t B, std::int64_t N, std::int64_t KVN, std::int64_t Sq,
              std::int64_t Skv, std::uint32_t seed) {
  Big b = make_big(DType::f16, B, N, KVN, Sq, Skv, seed);
  std::vector<double> x;
  b.k = random_tensor(x, {B, KVN, Skv, 64}, DType::i8, seed + 3, -128, 127);
  b.v = random_tensor(x, {B, KVN, Skv, 64}, DType::i8, seed + 4, -128, 127);
  auto channel = [&](std::uint32_t s, double lo, double hi) {
    return random_tensor(x, {KVN, 1, 64}, DType::f16, s, lo, hi);
  };
  auto token = [&](std::uint32_t s, double lo, double hi) {
    return random_tensor(x, {B, Skv}, DType::f32, s, lo, hi);
  };
  const bool kc = kind != Int8Kind::token, vc = kind == Int8Kind::channel;
  b.opt.key_antiquant_scale = kc ? channel(seed + 5, 0.001, 0.01) : token(seed + 5, 0.001, 0.01);
  b.opt.key_antiquant_offset = kc ? channel(seed + 6, -3, 3) : token(seed + 6, -3, 3);
  b.opt.value_antiquant_scale = vc ? channel(seed + 7, 0.001, 0.01) : token(seed + 7, 0.001, 0.01);
  b.opt.value_antiquant_offset = vc ? channel(seed + 8, -3, 3) : token(seed + 8, -3, 3);
  b.opt.key_antiquant_mode = kc ? 0 : 1;
  b.opt.value_antiquant_mode = vc ? 0 : 1;
  return b;
}

// int8 KV runs on the fast kernels, dequantised in registers: decode with one row per KV head
// (direct path), a GQA group (direct, 4 rows), 3 query rows x 8 heads (tiles), and prefill.
TEST(FiaFast, Int8AntiquantMatchesSimple) {
  for (Int8Kind kind : {Int8Kind::channel, Int8Kind::token, Int8Kind::key_channel_value_token}) {
    SCOPED_TRACE(static_cast<int>(kind));
    struct Shape5 { std::int64_t N, KVN, Sq, Skv; FiaPath path; };
    for (const Shape5 s : {Shape5{4, 4, 1, 1500, FiaPath::decode_direct},
                           Shape5{8, 2, 1, 1500, FiaPath::decode_direct},
                           Shape5{16, 2, 3, 700, FiaPath::decode_tiles},
                           Shape5{4, 2, 130, 300, FiaPath::prefill}}) {
      Big b = make_int8(kind, 2, s.N, s.KVN, s.Sq, s.Skv, 51);
      b.opt.actual_seq_lengths_kv = {s.Skv, s.Skv / 3};
      if (s.Sq > 1) {
        b.opt.sparse_mode = 3;
        b.opt.atten_mask = compressed_mask();
      }
      expect_fast_matches_simple(b, s.path);
    }
  }
}

// An int8 decode with several splits: eager, replay and replay after an update bitwise equal.
TEST(FiaFast, Int8DecodeEagerReplayUpdateBitwise) {
  for (Int8Kind kind : {Int8Kind::channel, Int8Kind::token}) {
    Big b = make_int8(kind, 2, 8, 8, 1, 2048, 61);
    expect_eager_replay_update_bitwise(b);
  }
}

// The simple kernel (kept as FiaKernelMode::simple) still passes parity on its own.
TEST(FiaFast, SimpleModeParity) {
  ModeScope m(att::FiaKernelMode::simple);
  for (const FiaCase& c : {FiaCase{.layout = "BSH", .mode = 3},
                           FiaCase{.layout = "TND", .gqa = 2, .mode = 2},
                           FiaCase{.layout = "BNSD", .decode = true, .kv = Kv::paged_bnsd, .pse = true},
                           FiaCase{.layout = "BNSD", .decode = true, .antiquant = Antiquant::sep_token}}) {
    const att::FiaPathCounts before = att::fia_path_counts();
    expect_parity(build_case(c));
    EXPECT_TRUE(ran_on(before, FiaPath::simple)) << c.name();
  }
}

}  // namespace
}  // namespace fia_test
