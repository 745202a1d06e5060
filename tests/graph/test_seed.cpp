// The seed scenario and its long-running variants (issue: runtime core).
#include <gtest/gtest.h>

#include <random>

#include "npugraph/npugraph.hpp"
#include "support/bitwise.hpp"
#include "support/captured_fia.hpp"

using namespace npugraph;

namespace {

Tensor random_f16(Shape shape, std::uint32_t seed) {
  Tensor t = empty(shape, f16);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data_ptr<half>()[i] = half(dist(rng));
  return t;
}

}  // namespace

// The seed example, line by line: eager [100]; capture [29] in a group behind an ExternalEvent;
// update to [100] on a second stream; record; replay; bitwise equal.
TEST(Seed, ReplayAfterUpdateEqualsEagerBitwise) {
  Tensor q = random_f16({1, 32, 1, 128}, 1), k = random_f16({1, 32, 1, 128}, 2),
         v = random_f16({1, 32, 1, 128}, 3);
  Stream update_stream = Stream::create();
  ExternalEvent event;
  ops::FiaOptions opt{.actual_seq_lengths = {100}, .num_heads = 32, .scale = 1 / 0.0078125,
                      .pre_tokens = 65535, .next_tokens = 65535, .input_layout = "BNSD"};
  auto eager = ops::fused_infer_attention_score(q, k, v, opt);
  Graph g;
  TaskGroupHandle handle;
  Tensor ws, out, lse;
  {
    CaptureScope capture(g);
    Stream s = current_stream();
    auto captured = opt;
    captured.actual_seq_lengths = {29};
    ws = ops::fia_max_workspace(q, k, v, captured);
    out = empty({1, 32, 1, 128}, f16);
    lse = empty({1}, f16);
    event.wait(s);
    event.reset(s);
    task_group_begin(s);
    ops::fused_infer_attention_score_out(q, k, v, captured, ws, out, lse);
    handle = task_group_end(s);
  }
  {
    StreamGuard on(update_stream);
    task_update_begin(update_stream, handle);
    ops::fused_infer_attention_score_out(q, k, v, opt, ws, out, lse);
    task_update_end(update_stream);
    event.record(update_stream);
  }
  g.replay();
  device_synchronize();
  EXPECT_TRUE(ngtest::bitwise_equal(out, eager.attention_out));
  EXPECT_EQ(event.collapsed_records(), 0u);
}

// Decode against a 4096-token KV cache whose actual_seq_lengths_kv changes every cycle.
TEST(Seed, DecodeWithChangingKvLengthsOver50Cycles) {
  const std::int64_t B = 2, N = 8, KVN = 2, S = 4096, D = 64;
  Tensor q = random_f16({B, N, 1, D}, 11), k = random_f16({B, KVN, S, D}, 12),
         v = random_f16({B, KVN, S, D}, 13);
  ops::FiaOptions opt{.actual_seq_lengths_kv = {S, S}, .num_heads = N, .scale = 0.125,
                      .input_layout = "BNSD", .num_key_value_heads = KVN, .softmax_lse_flag = true};
  Stream update_stream = Stream::create(), replay_stream = Stream::create();
  ExternalEvent updated("kv_lengths_updated");
  ngtest::CapturedFia c(q, k, v, opt, {.gate = &updated});
  std::mt19937 rng(5);
  std::uniform_int_distribution<std::int64_t> len(0, S);
  for (int cycle = 0; cycle < 50; ++cycle) {
    ops::FiaOptions now = opt;
    now.actual_seq_lengths_kv = {len(rng), cycle % 7 == 0 ? S : len(rng)};
    ops::FiaResult eager;
    {
      StreamGuard on(update_stream);
      eager = ops::fused_infer_attention_score(q, k, v, now);
    }
    c.update(now, update_stream);
    c.graph.replay(replay_stream);
    replay_stream.synchronize();
    update_stream.synchronize();
    ASSERT_TRUE(ngtest::bitwise_equal(c.out, eager.attention_out)) << "cycle " << cycle;
    ASSERT_TRUE(ngtest::bitwise_equal(c.lse, eager.softmax_lse)) << "cycle " << cycle;
  }
}

// 10,000 update -> replay cycles between two streams paired by an ExternalEvent; every output checked
// against an eager result for the same lengths. Odd cycles launch the replay before the update, so
// the replay really blocks on the event while the other stream updates.
TEST(Seed, StressTenThousandUpdateReplayCycles) {
  const std::int64_t B = 1, N = 2, S = 48, D = 16;
  Tensor q = random_f16({B, N, 1, D}, 21), k = random_f16({B, N, S, D}, 22), v = random_f16({B, N, S, D}, 23);
  ops::FiaOptions opt{.actual_seq_lengths_kv = {S}, .num_heads = N, .scale = 0.25, .input_layout = "BNSD"};
  std::vector<Tensor> expected;
  for (std::int64_t l = 0; l <= S; ++l) {
    auto o = opt;
    o.actual_seq_lengths_kv = {l};
    expected.push_back(ops::fused_infer_attention_score(q, k, v, o).attention_out);
  }
  device_synchronize();
  Stream update_stream = Stream::create(), replay_stream = Stream::create();
  ExternalEvent event("stress");
  ngtest::CapturedFia c(q, k, v, opt, {.gate = &event});
  auto update = [&](std::int64_t l) {
    auto o = opt;
    o.actual_seq_lengths_kv = {l};
    c.update(o, update_stream);
  };
  int mismatches = 0;
  for (int cycle = 0; cycle < 10000; ++cycle) {
    const std::int64_t l = (cycle * 7919) % (S + 1);
    if (cycle % 2) {
      c.graph.replay(replay_stream);
      update(l);
    } else {
      update(l);
      c.graph.replay(replay_stream);
    }
    replay_stream.synchronize();
    if (!ngtest::bitwise_equal(c.out, expected[static_cast<std::size_t>(l)])) ++mismatches;
  }
  update_stream.synchronize();
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(event.collapsed_records(), 0u);
}
