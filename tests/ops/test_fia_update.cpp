// FIA under task update: what fia_check_update accepts and refuses, and the seed scenario
// (capture with one set of lengths, update to another, replay == eager, bitwise).
#include <string>
#include <vector>

#include "ops/attention/fia_params.hpp"
#include "ops/test_fia_util.hpp"

namespace fia_test {
namespace {

namespace ng = npugraph;
namespace att = ng::ops::attention;
using ng::ops::FiaOptions;

struct Args {
  Tensor q, k, v, out, lse, ws;
  FiaOptions opt;
};

// BNSD float16, B = 2, N = 4, KV_N = 2, Skv = 64, D = 16; Sq as given.
Args make_args(std::int64_t q_seq, std::uint32_t seed = 1) {
  Args a;
  std::vector<double> x;
  a.q = random_tensor(x, {2, 4, q_seq, 16}, DType::f16, seed);
  a.k = random_tensor(x, {2, 2, 64, 16}, DType::f16, seed + 1);
  a.v = random_tensor(x, {2, 2, 64, 16}, DType::f16, seed + 2);
  a.opt = {.num_heads = 4, .scale = 0.25, .input_layout = "BNSD", .num_key_value_heads = 2,
           .softmax_lse_flag = true};
  a.out = filled_tensor(a.q.shape(), DType::f16, 0);
  a.lse = filled_tensor({2, 4, q_seq, 1}, DType::f32, 0);
  a.ws = filled_tensor({ng::ops::fia_workspace_bytes(a.q, a.k, a.v, a.opt)}, DType::u8, 0);
  return a;
}

std::string check(const Args& captured, const Args& updated) {
  att::FiaParamBuffer a, b;
  att::build_fia_params(captured.q, captured.k, captured.v, captured.opt, captured.ws,
                        captured.out, captured.lse, nullptr, a);
  att::build_fia_params(updated.q, updated.k, updated.v, updated.opt, updated.ws, updated.out,
                        updated.lse, nullptr, b);
  return ng::ops::fia_kernel().check_update(a.bytes(), b.bytes());
}

TEST(FiaCheckUpdate, AcceptsLengthsScaleBandAndNewBuffers) {
  const Args a = make_args(8);
  Args b = a;
  b.opt.actual_seq_lengths = {3, 8};
  b.opt.actual_seq_lengths_kv = {0, 61};
  b.opt.scale = 3.0;
  b.opt.pre_tokens = 4;
  b.opt.next_tokens = 0;
  EXPECT_EQ(check(a, b), "");
  const Args c = make_args(8, 100);  // other tensors, same shapes
  EXPECT_EQ(check(a, c), "");
}

TEST(FiaCheckUpdate, RefusesShapeDtypeLayoutHeadsAndFlagChanges) {
  const Args a = make_args(1);
  EXPECT_EQ(check(a, make_args(2)), "query shape changed from [2, 4, 1, 16] to [2, 4, 2, 16]");

  Args kv = make_args(1);
  std::vector<double> x;
  kv.k = random_tensor(x, {2, 2, 32, 16}, DType::f16, 9);
  kv.v = random_tensor(x, {2, 2, 32, 16}, DType::f16, 10);
  EXPECT_EQ(check(a, kv), "key/value shape changed from [2, 2, 64, 16] to [2, 2, 32, 16]");

  Args dt = make_args(1);
  dt.q = random_tensor(x, dt.q.shape(), DType::bf16, 11);
  dt.k = random_tensor(x, dt.k.shape(), DType::bf16, 12);
  dt.v = random_tensor(x, dt.v.shape(), DType::bf16, 13);
  dt.out = filled_tensor(dt.q.shape(), DType::bf16, 0);
  EXPECT_EQ(check(a, dt), "dtype changed from float16 to bfloat16");

  // The same memory seen as BSND [2, 1, 4, 16]: a layout change.
  Args lay = make_args(1);
  lay.opt.input_layout = "BSND";
  lay.q = lay.q.view({2, 1, 4, 16});
  lay.out = lay.out.view({2, 1, 4, 16});
  lay.k = random_tensor(x, {2, 64, 2, 16}, DType::f16, 14);
  lay.v = random_tensor(x, {2, 64, 2, 16}, DType::f16, 15);
  EXPECT_EQ(check(a, lay), "input_layout changed from BNSD to BSND");

  Args heads = make_args(1);
  heads.opt.num_key_value_heads = 0;
  heads.k = random_tensor(x, {2, 4, 64, 16}, DType::f16, 16);
  heads.v = random_tensor(x, {2, 4, 64, 16}, DType::f16, 17);
  EXPECT_EQ(check(a, heads), "num_key_value_heads changed from 2 to 4");

  Args flag = make_args(1);
  flag.opt.softmax_lse_flag = false;
  EXPECT_EQ(check(a, flag), "softmax_lse_flag changed from true to false");
}

TEST(FiaCheckUpdate, BshNumHeadsChangeIsNamed) {
  std::vector<double> x;
  Args a;
  a.q = random_tensor(x, {1, 1, 64}, DType::f32, 1);
  a.k = random_tensor(x, {1, 8, 64}, DType::f32, 2);
  a.v = random_tensor(x, {1, 8, 64}, DType::f32, 3);
  a.out = filled_tensor(a.q.shape(), DType::f32, 0);
  a.lse = filled_tensor({1}, DType::f32, 0);
  a.opt = {.num_heads = 4};
  a.ws = filled_tensor({ng::ops::fia_workspace_bytes(a.q, a.k, a.v, a.opt)}, DType::u8, 0);
  Args b = a;
  b.opt.num_heads = 8;
  b.ws = filled_tensor({ng::ops::fia_workspace_bytes(b.q, b.k, b.v, b.opt)}, DType::u8, 0);
  EXPECT_EQ(check(a, b), "num_heads changed from 4 to 8");
}

// The seed example with a KV length update: capture with 29 visible keys, update to 61 and a new
// scale, replay; the result equals the eager result of the new arguments bitwise.
TEST(FiaTaskUpdate, CaptureUpdateReplayEqualsEager) {
  const Args a = make_args(1);
  FiaOptions captured = a.opt;
  captured.actual_seq_lengths = {29};  // decode: ignored, as in the seed
  captured.actual_seq_lengths_kv = {29};
  FiaOptions updated = a.opt;
  updated.actual_seq_lengths = {100};
  updated.actual_seq_lengths_kv = {61, 7};
  updated.scale = 0.5;

  ng::Graph graph;
  ng::TaskGroupHandle handle;
  Tensor ws, out, lse;
  {
    ng::CaptureScope capture(graph);
    const ng::Stream s = ng::current_stream();
    ws = ng::ops::fia_max_workspace(a.q, a.k, a.v, captured);
    out = ng::empty(a.q.shape(), DType::f16);
    lse = ng::empty({2, 4, 1, 1}, DType::f32);
    ng::task_group_begin(s);
    ng::ops::fused_infer_attention_score_out(a.q, a.k, a.v, captured, ws, out, lse);
    handle = ng::task_group_end(s);
  }
  graph.replay();
  ng::device_synchronize();
  const auto eager_captured = ng::ops::fused_infer_attention_score(a.q, a.k, a.v, captured);
  ng::device_synchronize();
  EXPECT_TRUE(bitwise_equal(out, eager_captured.attention_out));
  EXPECT_TRUE(bitwise_equal(lse, eager_captured.softmax_lse));

  const ng::Stream update_stream = ng::Stream::create();
  {
    ng::StreamGuard on(update_stream);
    ng::task_update_begin(update_stream, handle);
    ng::ops::fused_infer_attention_score_out(a.q, a.k, a.v, updated, ws, out, lse);
    ng::task_update_end(update_stream);
  }
  update_stream.synchronize();
  graph.replay();
  ng::device_synchronize();
  const auto eager_updated = ng::ops::fused_infer_attention_score(a.q, a.k, a.v, updated);
  ng::device_synchronize();
  EXPECT_FALSE(bitwise_equal(eager_updated.attention_out, eager_captured.attention_out));
  EXPECT_TRUE(bitwise_equal(out, eager_updated.attention_out));
  EXPECT_TRUE(bitwise_equal(lse, eager_updated.softmax_lse));

  // An update changing the query's shape is refused with the reason; nothing is installed.
  const Args other = make_args(2);
  const Tensor out2 = ng::empty(other.q.shape(), DType::f16);
  const Tensor lse2 = ng::empty({2, 4, 2, 1}, DType::f32);
  const Tensor ws2 = ng::ops::fia_max_workspace(other.q, other.k, other.v, other.opt);
  {
    ng::StreamGuard on(update_stream);
    ng::task_update_begin(update_stream, handle);
    try {
      ng::ops::fused_infer_attention_score_out(other.q, other.k, other.v, other.opt, ws2, out2, lse2);
      ng::task_update_end(update_stream);
      ADD_FAILURE() << "the update was accepted";
    } catch (const ng::Error& e) {
      EXPECT_NE(std::string(e.what()).find("query shape changed from [2, 4, 1, 16] to [2, 4, 2, 16]"),
                std::string::npos)
          << e.what();
    }
    if (update_stream.is_updating()) ng::task_update_abort(update_stream);
  }
  graph.replay();
  ng::device_synchronize();
  EXPECT_TRUE(bitwise_equal(out, eager_updated.attention_out));
}

}  // namespace
}  // namespace fia_test
