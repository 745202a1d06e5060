// A decode-like graph of two attention layers and collectives, the attention tasks in task groups
// updated every step (new KV lengths) and the collectives captured once: over 100 steps, every
// replay equals the same calls made eagerly, bitwise (docs/dist.md; vLLM's captured TP all-reduce).
//
//   group 1: FIA(q, k1, v1) -> out1    all_reduce(out1 -> red)    group 2: FIA(red, k2, v2) -> out2
//   all_gather(out2 -> gathered)
#include "dist/dist_fixture.hpp"

namespace dist_test {
namespace {

using ng::ops::FiaOptions;

struct Layer {
  Tensor k, v, ws, out, lse;
};

FiaOptions options_at(int step, int layer) {
  FiaOptions o{.num_heads = 4, .scale = 0.25, .input_layout = "BNSD", .num_key_value_heads = 2};
  // Growing decode lengths, different per batch row and layer (1..64).
  o.actual_seq_lengths_kv = {(step + 3 * layer) % 64 + 1, (step * 7 + layer) % 64 + 1};
  return o;
}

Layer make_layer(const Tensor& q, int rank, int layer) {
  std::vector<double> x;
  Layer l;
  l.k = ngtest::random_tensor(x, {2, 2, 64, 16}, DType::f16, 100 + 10 * rank + layer);
  l.v = ngtest::random_tensor(x, {2, 2, 64, 16}, DType::f16, 200 + 10 * rank + layer);
  const FiaOptions o = options_at(0, layer);
  const ng::ops::FiaPlan plan = ng::ops::fia_plan(q, l.k, l.v, o);
  l.ws = ng::ops::fia_max_workspace(q, l.k, l.v, o);
  l.out = ng::empty(plan.out_shape(), plan.out_dtype());
  l.lse = ng::empty({1}, DType::f32);
  return l;
}

void attention(const Tensor& q, Layer& l, const FiaOptions& o) {
  ng::ops::fused_infer_attention_score_out(q, l.k, l.v, o, l.ws, l.out, l.lse);
}

TEST(DistFia, UpdatedAttentionGroupsAndCapturedCollectivesEqualEagerFor100Steps) {
  const int r = world().rank(), n = world().size();
  std::vector<double> x;
  const Tensor q = ngtest::random_tensor(x, {2, 4, 1, 16}, DType::f16, 7 + r);  // differs per rank
  Layer l1 = make_layer(q, r, 1);
  const Tensor red = ngtest::filled_tensor(q.shape(), DType::f16, 0);
  Layer l2 = make_layer(red, r, 2);
  const Tensor gathered = ngtest::filled_tensor({2 * n, 4, 1, 16}, DType::f16, 0);
  ng::Graph g;
  ng::TaskGroupHandle h1, h2;
  {
    ng::CaptureScope capture(g);
    const ng::Stream s = ng::current_stream();
    ng::task_group_begin(s);
    attention(q, l1, options_at(0, 1));
    h1 = ng::task_group_end(s);
    dist::all_reduce_out(world(), l1.out, red);
    ng::task_group_begin(s);
    attention(red, l2, options_at(0, 2));
    h2 = ng::task_group_end(s);
    dist::all_gather_out(world(), l2.out, gathered);
  }
  const ng::Stream u = ng::Stream::create();
  for (int step = 1; step <= 100; ++step) {
    SCOPED_TRACE(ng::detail::cat("step ", step));
    const FiaOptions o1 = options_at(step, 1), o2 = options_at(step, 2);
    {
      ng::StreamGuard on(u);
      ng::task_update_begin(u, h1);
      attention(q, l1, o1);
      ng::task_update_end(u);
      ng::task_update_begin(u, h2);
      attention(red, l2, o2);
      ng::task_update_end(u);
    }
    u.synchronize();
    g.replay();
    ng::device_synchronize();
    // The same calls, eagerly (allocating forms, their own outputs).
    Tensor e1 = ng::ops::fused_infer_attention_score(q, l1.k, l1.v, o1).attention_out;
    dist::all_reduce(world(), e1);
    Tensor e2 = ng::ops::fused_infer_attention_score(e1, l2.k, l2.v, o2).attention_out;
    Tensor eg = dist::all_gather(world(), e2);
    ng::device_synchronize();
    ASSERT_TRUE(ngtest::bitwise_equal(red, e1));
    ASSERT_TRUE(ngtest::bitwise_equal(l2.out, e2));
    ASSERT_TRUE(ngtest::bitwise_equal(gathered, eg));
  }
}

}  // namespace
}  // namespace dist_test
