// The fast FIA kernels beyond the parity suite's small shapes (Note [FIA fast kernels]): decode
// with several KV splits and prefill with several column chunks and row blocks, checked against
// the simple kernel (FiaKernelMode::simple) and the reference; splits under eager, graph replay
// and replay after an update stay bitwise equal.
#include <cmath>
#include <vector>

#include "ops/attention/fia_fast_launch.hpp"
#include "ops/attention/fia_kernel_mode.hpp"
#include "ops/attention/fia_params.hpp"
#include "ops/test_fia_case.hpp"

namespace fia_test {
namespace {

namespace ng = npugraph;
namespace att = ng::ops::attention;
using ng::ops::FiaOptions;

// Sets the kernel mode for a scope (the default, fast, afterwards).
class ModeScope {
 public:
  explicit ModeScope(att::FiaKernelMode m) { att::set_fia_kernel_mode(m); }
  ~ModeScope() { att::set_fia_kernel_mode(att::FiaKernelMode::fast); }
  ModeScope(const ModeScope&) = delete;
  ModeScope& operator=(const ModeScope&) = delete;
};

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

// Fast and simple kernels agree within the output dtype's rounding (both accumulate in float32
// in different orders; the outputs are rounded once each).
void expect_fast_matches_simple(const Big& b) {
  ng::ops::FiaResult fast, simple;
  {
    ModeScope m(att::FiaKernelMode::fast);
    fast = ng::ops::fused_infer_attention_score(b.q, b.k, b.v, b.opt);
    ng::device_synchronize();
  }
  {
    ModeScope m(att::FiaKernelMode::simple);
    simple = ng::ops::fused_infer_attention_score(b.q, b.k, b.v, b.opt);
    ng::device_synchronize();
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

TEST(FiaFast, DecodeWithSplitsMatchesSimple) {
  Big b = make_big(DType::f16, 3, 8, 2, 1, 3000, 11);
  b.opt.actual_seq_lengths_kv = {3000, 0, 777};  // ragged, one empty batch
  expect_fast_matches_simple(b);
  const auto plan = att::plan_outputs(b.q, b.k, b.v, b.opt).plan;
  EXPECT_GT(plan.fast_splits, 8);
}

// The direct decode path (units of 1-4 rows) at D = 128 and 80 (full register blocks of 8 or 4
// vectors, and the single-vector remainder), ragged lengths that end mid-block.
TEST(FiaFast, DecodeDirectWideHeadsMatchSimple) {
  for (std::int64_t D : {128, 80})
    for (std::int64_t kvn : {4, 2, 1}) {
      Big b = make_big(DType::bf16, 2, 4, kvn, 1, 1000, 71, D);
      b.opt.actual_seq_lengths_kv = {1000, 333};
      expect_fast_matches_simple(b);
    }
}

TEST(FiaFast, DecodeGqaSeveralRowsAndPagedMatchSimple) {
  Big b = make_big(DType::bf16, 2, 16, 2, 3, 1024, 21);  // 8 heads x 3 rows per KV head
  b.opt.actual_seq_lengths_kv = {1000, 513};
  b.opt.sparse_mode = 3;
  b.opt.atten_mask = compressed_mask();
  expect_fast_matches_simple(b);
}

TEST(FiaFast, PrefillCausalAndBandMatchSimple) {
  Big b = make_big(DType::bf16, 2, 4, 2, 150, 300, 31);
  b.opt.actual_seq_lengths = {150, 97};
  b.opt.actual_seq_lengths_kv = {300, 200};
  b.opt.sparse_mode = 3;
  b.opt.atten_mask = compressed_mask();
  expect_fast_matches_simple(b);
  b.opt.sparse_mode = 4;
  b.opt.pre_tokens = 70;
  b.opt.next_tokens = 5;
  expect_fast_matches_simple(b);
  b.opt.sparse_mode = 0;
  b.opt.atten_mask = {};
  b.opt.pre_tokens = 2147483647;
  b.opt.next_tokens = 2147483647;
  expect_fast_matches_simple(b);
}

// Captures b's call in a group, replays it, updates its KV lengths and replays again: each replay is
// bitwise the eager call with the same arguments (b: B 2, N 8, 2048 KV tokens, Sq 1).
void expect_eager_replay_update_bitwise(Big& b) {
  b.opt.actual_seq_lengths_kv = {2048, 900};
  FiaOptions after = b.opt;
  after.actual_seq_lengths_kv = {1300, 2048};
  ng::Graph graph;
  ng::TaskGroupHandle handle;
  Tensor ws, out, lse;
  {
    ng::CaptureScope capture(graph);
    const ng::Stream s = ng::current_stream();
    ws = ng::ops::fia_max_workspace(b.q, b.k, b.v, b.opt);
    out = ng::empty(b.q.shape(), b.q.dtype());
    lse = ng::empty({2, 8, 1, 1}, DType::f32);
    ng::task_group_begin(s);
    ng::ops::fused_infer_attention_score_out(b.q, b.k, b.v, b.opt, ws, out, lse);
    handle = ng::task_group_end(s);
  }
  graph.replay();
  ng::device_synchronize();
  const auto eager_old = ng::ops::fused_infer_attention_score(b.q, b.k, b.v, b.opt);
  ng::device_synchronize();
  EXPECT_TRUE(bitwise_equal(out, eager_old.attention_out));
  EXPECT_TRUE(bitwise_equal(lse, eager_old.softmax_lse));

  const ng::Stream update_stream = ng::Stream::create();
  {
    ng::StreamGuard on(update_stream);
    ng::task_update_begin(update_stream, handle);
    ng::ops::fused_infer_attention_score_out(b.q, b.k, b.v, after, ws, out, lse);
    ng::task_update_end(update_stream);
  }
  update_stream.synchronize();
  graph.replay();
  ng::device_synchronize();
  const auto eager_new = ng::ops::fused_infer_attention_score(b.q, b.k, b.v, after);
  ng::device_synchronize();
  EXPECT_FALSE(bitwise_equal(eager_new.attention_out, eager_old.attention_out));
  EXPECT_TRUE(bitwise_equal(out, eager_new.attention_out));
  EXPECT_TRUE(bitwise_equal(lse, eager_new.softmax_lse));
}

// A decode launch with several splits: eager, replay, and replay after an update of the KV
// lengths are bitwise equal to eager with the same arguments.
TEST(FiaFast, DecodeSplitsEagerReplayUpdateBitwise) {
  Big b = make_big(DType::f16, 2, 8, 2, 1, 2048, 41);
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

// True when the fast kernels take this call (Note [FIA fast kernels]).
bool fast_covers(const Big& b) {
  FiaOptions o = b.opt;
  o.softmax_lse_flag = false;
  const Tensor ws = ng::ops::fia_max_workspace(b.q, b.k, b.v, o);
  const Tensor out = ng::empty(ng::ops::fia_output_shape(b.q, b.k, b.v, o), b.q.dtype());
  att::FiaParamBuffer buf;
  att::build_fia_params(b.q, b.k, b.v, o, ws, out, ng::empty({1}, DType::f32), nullptr, buf);
  return att::fast::fia_fast_covers(buf.header());
}

// int8 KV runs on the fast kernels, dequantised in registers: decode with one row per KV head
// (direct path), a GQA group (direct, 4 rows), 3 query rows x 8 heads (tiles), and prefill.
TEST(FiaFast, Int8AntiquantMatchesSimple) {
  for (Int8Kind kind : {Int8Kind::channel, Int8Kind::token, Int8Kind::key_channel_value_token}) {
    SCOPED_TRACE(static_cast<int>(kind));
    struct Shape5 { std::int64_t N, KVN, Sq, Skv; };
    for (const Shape5 s : {Shape5{4, 4, 1, 1500}, Shape5{8, 2, 1, 1500}, Shape5{16, 2, 3, 700},
                           Shape5{4, 2, 130, 300}}) {
      Big b = make_int8(kind, 2, s.N, s.KVN, s.Sq, s.Skv, 51);
      b.opt.actual_seq_lengths_kv = {s.Skv, s.Skv / 3};
      if (s.Sq > 1) {
        b.opt.sparse_mode = 3;
        b.opt.atten_mask = compressed_mask();
      }
      ASSERT_TRUE(fast_covers(b));
      expect_fast_matches_simple(b);
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
                           FiaCase{.layout = "BNSD", .decode = true, .antiquant = Antiquant::sep_token}})
    expect_parity(build_case(c));
}

}  // namespace
}  // namespace fia_test
