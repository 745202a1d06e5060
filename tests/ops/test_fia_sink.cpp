// learnable_sink (Note [FIA learnable sink] in ops/attention/fia_launch.hpp; docs/fia.md, "Learnable
// sink"): one unscaled, unmasked logit per query head in every valid row's softmax and lse.
//   - parity with the float64 reference (fia_reference.cpp) over decode and prefill, GQA, paged KV,
//     masks and sparse modes, TND/NTD, padding, pse, prefix, rope, int8 KV and int8 output, on the
//     simple kernel and on the fast ones, asserting the path each launch ran;
//   - longer shapes for each fast path (decode direct, decode tiles, decode with several KV splits,
//     whose merge must count the sink once, prefill), against a float64 reference written here;
//   - a valid row with nothing visible gives out = 0 and lse = sink; rows past the actual query
//     length stay out = 0, lse = +inf; a -inf sink is no sink;
//   - eager == replay == updated replay, bitwise (a new sink tensor, new lengths, host-value update);
//     the sink's presence, shape or dtype is not updatable.
// The argument checks are in test_fia_errors_features.cpp, the CUDA refusal in
// test_fia_cuda_emulation.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "ops/attention/fia_kernel_mode.hpp"
#include "ops/fia_case.hpp"
#include "support/captured_fia.hpp"

namespace fia_test {
namespace {

namespace ng = npugraph;
namespace att = ng::ops::attention;
using att::FiaKernelMode;
using att::FiaPath;
using ng::ops::FiaOptions;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Sets the kernel mode for a scope (the default, fast, afterwards).
class ModeScope {
 public:
  explicit ModeScope(FiaKernelMode m) { att::set_fia_kernel_mode(m); }
  ~ModeScope() { att::set_fia_kernel_mode(FiaKernelMode::fast); }
  ModeScope(const ModeScope&) = delete;
  ModeScope& operator=(const ModeScope&) = delete;
};

// One launch since `before`, on `path`; FiaPath::count: on any fast path (not simple, not fallback).
::testing::AssertionResult ran_on(const att::FiaPathCounts& before, FiaPath path) {
  const att::FiaPathCounts d = att::fia_path_counts().since(before);
  const bool ok = d.total() == 1 && (path == FiaPath::count
                                         ? d[FiaPath::simple] == 0 && d[FiaPath::fallback] == 0
                                         : d[path] == 1);
  if (ok) return ::testing::AssertionSuccess();
  ::testing::AssertionResult r = ::testing::AssertionFailure();
  r << "expected one launch on " << (path == FiaPath::count ? "a fast path" : att::fia_path_name(path))
    << ", ran:";
  for (int i = 0; i < static_cast<int>(FiaPath::count); ++i)
    if (d.n[i]) r << " " << att::fia_path_name(static_cast<FiaPath>(i)) << " x" << d.n[i];
  return r;
}

// The parity spread: every sink dtype (seed 1: float16, 2: bfloat16, 3: float32), rows with nothing
// visible (the ragged lengths give a batch KV length 0; bands and masks hide columns).
std::vector<FiaCase> sink_cases() {
  return {
      {.layout = "BNSD", .decode = true, .sink = true},
      {.layout = "BNSD", .dtype = DType::bf16, .gqa = 2, .decode = true, .kv = Kv::paged_bnsd,
       .sink = true, .seed = 2},
      {.layout = "BSH", .dtype = DType::f32, .gqa = 2, .mode = 0, .decode = true, .sink = true,
       .seed = 3},
      {.layout = "BSND", .gqa = 2, .mode = 3, .sink = true},
      {.layout = "BNSD", .dtype = DType::bf16, .mode = 4, .pse = true, .sink = true, .seed = 2},
      {.layout = "BSH", .gqa = 2, .mode = 0, .sink = true, .seed = 3},
      {.layout = "BNSD", .mode = 1, .lengths = Lengths::full, .sink = true, .seed = 4},
      {.layout = "TND", .gqa = 2, .mode = 2, .sink = true, .seed = 5},
      {.layout = "NTD_TND", .mode = 3, .kv = Kv::paged_bsh, .sink = true, .seed = 6},
      {.layout = "BSH", .mode = 3, .padding = true, .sink = true},
      {.layout = "BNSD", .gqa = 2, .decode = true, .prefix = true, .sink = true, .seed = 3},
      {.layout = "BSH_BNSD", .mode = -1, .rope = true, .sink = true, .seed = 2},
      {.layout = "BNSD", .decode = true, .antiquant = Antiquant::sep_channel, .sink = true},
      {.layout = "BNSD", .gqa = 2, .mode = 2, .antiquant = Antiquant::sep_token, .sink = true,
       .seed = 3},
      {.layout = "BNSD", .mode = 3, .quant = OutQuant::channel, .sink = true, .seed = 2},
  };
}

TEST(FiaSink, ParityWithTheReferenceOnEveryKernel) {
  for (const FiaCase& c : sink_cases()) {
    SCOPED_TRACE(c.name());
    const FiaBuilt b = build_case(c);
    ASSERT_TRUE(b.opt.learnable_sink.defined());
    for (FiaKernelMode mode : {FiaKernelMode::simple, FiaKernelMode::fast}) {
      ModeScope m(mode);
      const att::FiaPathCounts before = att::fia_path_counts();
      expect_parity(b);
      EXPECT_TRUE(ran_on(before, mode == FiaKernelMode::simple ? FiaPath::simple : FiaPath::count))
          << (mode == FiaKernelMode::simple ? "simple" : "fast");
    }
  }
}

// The sink changes the result: the same case without it differs (a kernel ignoring the sink would
// fail the parity above; this guards the reference and the harness).
TEST(FiaSink, TheSinkChangesTheResult) {
  FiaBuilt b = build_case({.layout = "BNSD", .gqa = 2, .decode = true, .sink = true});
  const auto with = ng::ops::fused_infer_attention_score(b.q, b.k, b.v, b.opt);
  b.opt.learnable_sink = {};
  const auto without = ng::ops::fused_infer_attention_score(b.q, b.k, b.v, b.opt);
  ng::device_synchronize();
  EXPECT_FALSE(bitwise_equal(with.attention_out, without.attention_out));
  EXPECT_FALSE(bitwise_equal(with.softmax_lse, without.softmax_lse));
}

// ---- Longer shapes, one per fast path, against a float64 reference for BNSD written here.

struct Long {
  Tensor q, k, v;  // BNSD, contiguous (the reference reads these values)
  std::vector<double> qv, kv, vv, sink;
  FiaOptions opt;
  std::int64_t B, N, KVN, Sq, Skv, D;
};

Long make_long(DType dt, std::int64_t B, std::int64_t N, std::int64_t KVN, std::int64_t Sq,
               std::int64_t Skv, std::int64_t D, std::uint32_t seed) {
  Long l{.B = B, .N = N, .KVN = KVN, .Sq = Sq, .Skv = Skv, .D = D};
  l.q = random_tensor(l.qv, {B, N, Sq, D}, dt, seed);
  l.k = random_tensor(l.kv, {B, KVN, Skv, D}, dt, seed + 1);
  l.v = random_tensor(l.vv, {B, KVN, Skv, D}, dt, seed + 2);
  l.opt = {.num_heads = N, .scale = 0.125, .input_layout = "BNSD", .num_key_value_heads = KVN,
           .softmax_lse_flag = true};
  // Some heads' sinks above every score (|scale q.k| <= 8 at D 64), some near them, one far below.
  (void)random_tensor(l.sink, {N}, DType::f32, seed + 3, -3, 3);
  l.sink[0] = 9.5;
  l.sink[static_cast<std::size_t>(N - 1)] = -40;
  l.opt.learnable_sink = host_tensor(l.sink, {N}, DType::f32);
  return l;
}

// out (B, N, Sq, D) and lse (B, N, Sq) in float64: sparse_mode 0 without a mask (every column), 3
// (bottom-right causal) or 4 (band pre/next anchored bottom right); decode ignores the mode.
void long_reference(const Long& l, std::vector<double>& out, std::vector<double>& lse) {
  const FiaOptions& o = l.opt;
  const std::int64_t B = l.B, N = l.N, Sq = l.Sq, Skv = l.Skv, D = l.D, group = N / l.KVN;
  out.assign(static_cast<std::size_t>(B * N * Sq * D), 0.0);
  lse.assign(static_cast<std::size_t>(B * N * Sq), kInf);
  auto at = [](std::int64_t i0, std::int64_t n1, std::int64_t i1, std::int64_t n2, std::int64_t i2,
               std::int64_t n3, std::int64_t i3) { return static_cast<std::size_t>(((i0 * n1 + i1) * n2 + i2) * n3 + i3); };
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t lq = Sq == 1 || o.actual_seq_lengths.empty() ? Sq : o.actual_seq_lengths[b];
    const std::int64_t lkv = o.actual_seq_lengths_kv.empty() ? Skv : o.actual_seq_lengths_kv[b];
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < lq; ++i) {
        const double sink = l.sink[static_cast<std::size_t>(n)];
        std::vector<double> s(static_cast<std::size_t>(lkv), -kInf);
        double mx = sink;
        for (std::int64_t j = 0; j < lkv; ++j) {
          const std::int64_t shift = lkv - lq;
          bool vis = true;
          if (Sq > 1 && o.sparse_mode == 3) vis = j <= i + shift;
          if (Sq > 1 && o.sparse_mode == 4)
            vis = j - i <= o.next_tokens + shift && i - j <= o.pre_tokens - shift;
          if (!vis) continue;
          double dot = 0;
          for (std::int64_t d = 0; d < D; ++d)
            dot += l.qv[at(b, N, n, Sq, i, D, d)] * l.kv[at(b, l.KVN, n / group, Skv, j, D, d)];
          s[static_cast<std::size_t>(j)] = o.scale * dot;
          mx = std::max(mx, s[static_cast<std::size_t>(j)]);
        }
        double sum = std::exp(sink - mx);
        for (double x : s) sum += std::exp(x - mx);
        for (std::int64_t j = 0; j < lkv; ++j) {
          const double p = std::exp(s[static_cast<std::size_t>(j)] - mx) / sum;
          for (std::int64_t d = 0; d < D; ++d)
            out[at(b, N, n, Sq, i, D, d)] += p * l.vv[at(b, l.KVN, n / group, Skv, j, D, d)];
        }
        lse[static_cast<std::size_t>((b * N + n) * Sq + i)] = mx + std::log(sum);
      }
  }
}

// l's key and value moved into paged caches [blocks, KV_N, block_size, D] handed out in a shuffled
// order, with the block table that finds them (the reference keeps reading the contiguous values).
void make_paged(Long& l, std::int64_t block_size, std::uint32_t seed) {
  const std::int64_t per = (l.Skv + block_size - 1) / block_size, blocks = l.B * per;
  std::vector<std::int64_t> ids(static_cast<std::size_t>(blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  const std::size_t es = l.k.element_size(), row = static_cast<std::size_t>(l.D) * es;
  auto page = [&](const Tensor& t) {
    Tensor cache = filled_tensor({blocks, l.KVN, block_size, l.D}, t.dtype(), 0);
    for (std::int64_t b = 0; b < l.B; ++b)
      for (std::int64_t i = 0; i < per; ++i)
        for (std::int64_t h = 0; h < l.KVN; ++h)
          for (std::int64_t r = 0; r < block_size && i * block_size + r < l.Skv; ++r) {
            const std::int64_t id = ids[static_cast<std::size_t>(b * per + i)];
            std::memcpy(static_cast<std::byte*>(cache.data()) + (((id * l.KVN + h) * block_size + r) * l.D) * es,
                        static_cast<const std::byte*>(t.data()) + (((b * l.KVN + h) * l.Skv + i * block_size + r) * l.D) * es,
                        row);
          }
    return cache;
  };
  l.k = page(l.k);
  l.v = page(l.v);
  l.opt.block_table = int_tensor(ids, {l.B, per}, DType::i32);
  l.opt.block_size = block_size;
}

// Runs l on the simple kernel and on the fast one (which must take `fast_path`; FiaPath::count: any
// fast decode path) and compares both with the reference.
void expect_long_parity(const Long& l, FiaPath fast_path) {
  std::vector<double> ref_out, ref_lse;
  long_reference(l, ref_out, ref_lse);
  for (FiaKernelMode mode : {FiaKernelMode::simple, FiaKernelMode::fast}) {
    SCOPED_TRACE(mode == FiaKernelMode::simple ? "simple" : "fast");
    ModeScope m(mode);
    const att::FiaPathCounts before = att::fia_path_counts();
    const auto r = ng::ops::fused_infer_attention_score(l.q, l.k, l.v, l.opt);
    ng::device_synchronize();
    if (mode == FiaKernelMode::simple) {
      EXPECT_TRUE(ran_on(before, FiaPath::simple));
    } else if (fast_path == FiaPath::count) {
      const att::FiaPathCounts d = att::fia_path_counts().since(before);
      EXPECT_EQ(d.total(), 1u);
      EXPECT_EQ(d[FiaPath::decode_tiles] + d[FiaPath::decode_direct], 1u);
    } else {
      EXPECT_TRUE(ran_on(before, fast_path));
    }
    const std::vector<double> out = read_back(r.attention_out), lse = read_back(r.softmax_lse);
    ASSERT_EQ(out.size(), ref_out.size());
    const double eps = out_bound(l.q.dtype());
    for (std::size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], ref_out[i], eps * std::max(1.0, std::abs(ref_out[i]))) << "out " << i;
    for (std::size_t i = 0; i < lse.size(); ++i) {
      if (std::isinf(ref_lse[i])) ASSERT_EQ(lse[i], ref_lse[i]) << "lse " << i;
      else ASSERT_NEAR(lse[i], ref_lse[i], 2e-5 * (1 + std::abs(ref_lse[i]))) << "lse " << i;
    }
  }
}

// Decode with several KV splits per batch (3000 columns: at least two splits whatever the thread
// count), a batch with no KV (its rows: out 0, lse = sink) and a ragged one: the split merge counts
// the sink once.
TEST(FiaSink, DecodeWithSplitsMatchesTheReference) {
  Long l = make_long(DType::f16, 3, 8, 2, 1, 3000, 64, 11);
  l.opt.actual_seq_lengths_kv = {3000, 0, 777};
  expect_long_parity(l, FiaPath::count);
}

// The direct decode path (one row per KV head, D 128), contiguous and paged.
TEST(FiaSink, DecodeDirectMatchesTheReference) {
  Long l = make_long(DType::bf16, 2, 4, 4, 1, 1000, 128, 21);
  l.opt.actual_seq_lengths_kv = {1000, 333};
  expect_long_parity(l, FiaPath::decode_direct);
  make_paged(l, 16, 22);
  expect_long_parity(l, FiaPath::decode_direct);
}

// The tile decode path (16 heads x 3 query rows over 2 KV heads, causal), contiguous and paged.
TEST(FiaSink, DecodeTilesMatchesTheReference) {
  Long l = make_long(DType::bf16, 2, 16, 2, 3, 1024, 64, 31);
  l.opt.actual_seq_lengths_kv = {1000, 513};
  l.opt.sparse_mode = 3;
  l.opt.atten_mask = compressed_mask();
  expect_long_parity(l, FiaPath::decode_tiles);
  make_paged(l, 128, 32);
  expect_long_parity(l, FiaPath::decode_tiles);
}

// Prefill: causal, a band with empty rows at the end of each batch, no mask.
TEST(FiaSink, PrefillMatchesTheReference) {
  Long l = make_long(DType::bf16, 2, 4, 2, 150, 300, 64, 41);
  l.opt.actual_seq_lengths = {150, 97};
  l.opt.actual_seq_lengths_kv = {300, 200};
  l.opt.sparse_mode = 3;
  l.opt.atten_mask = compressed_mask();
  expect_long_parity(l, FiaPath::prefill);
  l.opt.sparse_mode = 4;
  // Columns [i + shift - pre, i + shift + next] = [i + 160, i + 170] in batch 0 (shift 150):
  // empty for rows 140..149; [i + 113, i + 123] in batch 1: empty for rows 87..96.
  l.opt.pre_tokens = -10;
  l.opt.next_tokens = 20;
  expect_long_parity(l, FiaPath::prefill);
  l.opt.sparse_mode = 0;
  l.opt.atten_mask = {};
  l.opt.pre_tokens = 2147483647;
  l.opt.next_tokens = 2147483647;
  expect_long_parity(l, FiaPath::prefill);
}

// ---- Rows with nothing visible, rows past the length, a -inf sink.

// A valid row with nothing visible (a full mask hiding every column of batch 0; batch 1 with KV
// length 0) gives out = 0 and lse = sink exactly, on both kernels; rows past the actual query length
// stay out = 0 and lse = +inf; a sink of -inf everywhere is bitwise no sink.
TEST(FiaSink, EmptyRowsGiveZeroAndTheSink) {
  for (FiaKernelMode mode : {FiaKernelMode::simple, FiaKernelMode::fast}) {
    SCOPED_TRACE(mode == FiaKernelMode::simple ? "simple" : "fast");
    ModeScope m(mode);
    for (std::int64_t Sq : {1, 6}) {
      SCOPED_TRACE(Sq);
      std::vector<double> x, sink = {0.5, -1.25, 2.0, 7.0};
      const Tensor q = random_tensor(x, {2, 4, Sq, 16}, DType::f16, 51);
      const Tensor k = random_tensor(x, {2, 2, 10, 16}, DType::f16, 52);
      const Tensor v = random_tensor(x, {2, 2, 10, 16}, DType::f16, 53);
      std::vector<double> mv(static_cast<std::size_t>(2 * Sq * 10), 0.0);
      std::fill(mv.begin(), mv.begin() + Sq * 10, 1.0);  // batch 0: every column masked
      FiaOptions o{.num_heads = 4, .input_layout = "BNSD", .num_key_value_heads = 2,
                   .sparse_mode = 1, .softmax_lse_flag = true};
      o.atten_mask = Sq == 1 ? host_tensor(mv, {2, 10}, DType::boolean)
                             : host_tensor(mv, {2, Sq, 10}, DType::boolean);
      o.actual_seq_lengths = {Sq, Sq > 1 ? Sq - 2 : 0};  // decode ignores them
      o.actual_seq_lengths_kv = {10, 0};
      o.learnable_sink = host_tensor(sink, {4}, DType::bf16);
      const auto r = ng::ops::fused_infer_attention_score(q, k, v, o);
      ng::device_synchronize();
      const std::vector<double> out = read_back(r.attention_out), lse = read_back(r.softmax_lse);
      for (double y : out) ASSERT_EQ(y, 0.0);
      for (std::int64_t b = 0; b < 2; ++b)
        for (std::int64_t n = 0; n < 4; ++n)
          for (std::int64_t s = 0; s < Sq; ++s) {
            const bool valid = Sq == 1 || s < o.actual_seq_lengths[static_cast<std::size_t>(b)];
            EXPECT_EQ(lse[static_cast<std::size_t>((b * 4 + n) * Sq + s)],
                      valid ? sink[static_cast<std::size_t>(n)] : kInf)
                << b << " " << n << " " << s;
          }
      // -inf: no sink.
      std::vector<double> none(4, -kInf);
      FiaOptions minus = o, without = o;
      minus.learnable_sink = host_tensor(none, {4}, DType::f32);
      without.learnable_sink = {};
      without.atten_mask = minus.atten_mask = {};
      without.sparse_mode = minus.sparse_mode = 0;
      without.actual_seq_lengths_kv = minus.actual_seq_lengths_kv = {10, 7};
      const auto a = ng::ops::fused_infer_attention_score(q, k, v, minus);
      const auto c = ng::ops::fused_infer_attention_score(q, k, v, without);
      ng::device_synchronize();
      EXPECT_TRUE(bitwise_equal(a.attention_out, c.attention_out));
      EXPECT_TRUE(bitwise_equal(a.softmax_lse, c.softmax_lse));
    }
  }
}

// ---- Capture and update.

// Eager == replay == replay after an update that points learnable_sink at other values and changes
// the lengths, bitwise, on both kernels (decode with splits, and prefill); then a host-value update.
TEST(FiaSink, EagerReplayUpdateBitwise) {
  for (FiaKernelMode mode : {FiaKernelMode::simple, FiaKernelMode::fast}) {
    SCOPED_TRACE(mode == FiaKernelMode::simple ? "simple" : "fast");
    ModeScope m(mode);
    for (std::int64_t Sq : {1, 40}) {
      SCOPED_TRACE(Sq);
      Long l = make_long(DType::f16, 2, 8, 2, Sq, 2048, 64, 61);
      l.opt.actual_seq_lengths = {Sq, Sq / 2};
      l.opt.actual_seq_lengths_kv = {2048, 900};
      if (Sq > 1) {
        l.opt.sparse_mode = 3;
        l.opt.atten_mask = compressed_mask();
      }
      ngtest::CapturedFia c(l.q, l.k, l.v, l.opt);
      ng::ops::FiaResult eager_old, eager_new;
      EXPECT_TRUE(c.replay_equals_eager(l.opt, &eager_old));
      FiaOptions after = l.opt;
      after.actual_seq_lengths_kv = {1300, 2048};
      std::vector<double> other;
      after.learnable_sink = random_tensor(other, {8}, DType::f32, 62, 0, 4);
      c.update(after);
      EXPECT_TRUE(c.replay_equals_eager(after, &eager_new));
      EXPECT_FALSE(bitwise_equal(eager_new.attention_out, eager_old.attention_out));
      // Only the sink's values change: the replay follows them.
      FiaOptions sink_only = l.opt;
      sink_only.learnable_sink = after.learnable_sink;
      c.update(sink_only);
      EXPECT_TRUE(c.replay_equals_eager(sink_only));
      // A host-value update keeps the captured sink.
      c.update(l.opt);
      FiaOptions host = l.opt;
      host.actual_seq_lengths_kv = {700, 1500};
      host.scale = 0.25;
      ng::task_update_begin(c.updates, c.handle);
      ng::ops::fused_infer_attention_score_update(c.updates, ng::ops::FiaHostValues::of(host));
      ng::task_update_end(c.updates);
      c.updates.synchronize();
      EXPECT_TRUE(c.replay_equals_eager(host));
    }
  }
}

// The sink's presence, shape and dtype are not updatable; nothing is installed.
TEST(FiaSink, PresenceShapeAndDtypeAreNotUpdatable) {
  const FiaBuilt b = build_case({.layout = "BNSD", .gqa = 2, .decode = true, .sink = true, .seed = 3});
  ngtest::CapturedFia c(b.q, b.k, b.v, b.opt);
  FiaOptions none = b.opt;
  none.learnable_sink = {};
  EXPECT_TRUE(c.refuses_update(
      [&] { ng::ops::fused_infer_attention_score_out(c.q, c.k, c.v, none, c.ws, c.out, c.lse); },
      {"learnable_sink is not updatable (captured with float32[4], updated with undefined)"}));
  FiaOptions half = b.opt;
  std::vector<double> x;
  half.learnable_sink = random_tensor(x, {4}, DType::f16, 71);
  EXPECT_TRUE(c.refuses_update(
      [&] { ng::ops::fused_infer_attention_score_out(c.q, c.k, c.v, half, c.ws, c.out, c.lse); },
      {"learnable_sink is not updatable (captured with float32[4], updated with float16[4])"}));
  EXPECT_TRUE(c.replay_equals_eager(b.opt));  // nothing was installed
  // Captured without a sink: adding one is refused the same way.
  FiaOptions plain = b.opt;
  plain.learnable_sink = {};
  ngtest::CapturedFia d(b.q, b.k, b.v, plain);
  EXPECT_TRUE(d.refuses_update(
      [&] { ng::ops::fused_infer_attention_score_out(d.q, d.k, d.v, b.opt, d.ws, d.out, d.lse); },
      {"learnable_sink is not updatable (captured with undefined, updated with float32[4])"}));
}

}  // namespace
}  // namespace fia_test
