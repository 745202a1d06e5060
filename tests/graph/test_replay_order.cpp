// Launches of one executable graph run one after another in launch order, whatever streams they are
// launched on (Note [Replay order]): concurrent replays never share the graph's workspace.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "npugraph/npugraph.hpp"
#include "support/bitwise.hpp"
#include "support/blocked.hpp"
#include "support/captured_fia.hpp"
#include "support/diagnostics.hpp"
#include "support/host_tensors.hpp"
#include "support/throws.hpp"
#include "support/wait.hpp"

namespace {

namespace ng = npugraph;
using namespace std::chrono_literals;
using ngtest::bitwise_equal;
using ngtest::random_tensor;
using ngtest::throws;

// Two threads each replay one FIA graph on their own stream, 500 times, with the same parameters.
// A host function captured after the FIA task checks each replay's output inside that replay: with
// replays sharing the graph's workspace at once, most outputs were wrong (values up to 27,455 and
// inf); launches serialised in launch order leave none wrong.
TEST(ReplayOrder, TwoThreadsReplayingOneGraphOnTheirOwnStreamsSeeNoWrongOutput) {
  std::vector<double> x;
  const ng::Tensor q = random_tensor(x, {1, 8, 1, 64}, ng::f16, 11);
  const ng::Tensor k = random_tensor(x, {1, 8, 2048, 64}, ng::f16, 12);
  const ng::Tensor v = random_tensor(x, {1, 8, 2048, 64}, ng::f16, 13);
  const ng::ops::FiaOptions opt{.actual_seq_lengths_kv = {2000}, .num_heads = 8, .scale = 0.125,
                                .input_layout = "BNSD"};
  const ng::Tensor expected = ng::ops::fused_infer_attention_score(q, k, v, opt).attention_out;
  ng::device_synchronize();

  std::atomic<int> checked{0}, wrong{0};
  // After the FIA call, a host function checks each replay's output inside that replay.
  auto check_in_replay = [&](const ng::Stream& s, const ngtest::CapturedFia& f) {
    ng::launch_host_func(s, [&, out = f.out] {
      if (!bitwise_equal(out, expected)) ++wrong;
      ++checked;
    });
  };
  ngtest::CapturedFia c(q, k, v, opt, {.group = false, .after = check_in_replay});
  ng::Graph& g = c.graph;
  constexpr int kReplays = 500;
  auto replayer = [&] {
    const ng::Stream s = ng::Stream::create();
    for (int i = 0; i < kReplays; ++i) {
      g.replay(s);
      if (i % 50 == 49) s.synchronize();
    }
    s.synchronize();
  };
  std::thread a(replayer), b(replayer);
  a.join();
  b.join();
  EXPECT_EQ(checked.load(), 2 * kReplays);
  EXPECT_EQ(wrong.load(), 0);
}

// The second stream's replay is launched after the first's but its stream is free first: it still
// runs second. Each replay logs the thread running it (its stream's worker).
TEST(ReplayOrder, ReplaysRunInLaunchOrderAcrossStreams) {
  std::mutex mu;
  std::vector<std::thread::id> order;
  ng::Graph g;
  {
    ng::CaptureScope capture(g);
    ng::launch_host_func(ng::current_stream(), [&] {
      std::lock_guard lock(mu);
      order.push_back(std::this_thread::get_id());
    });
  }
  const ng::Stream s1 = ng::Stream::create(), s2 = ng::Stream::create();
  std::thread::id w1, w2;
  ng::launch_host_func(s1, [&] { w1 = std::this_thread::get_id(); });
  ng::launch_host_func(s2, [&] { w2 = std::this_thread::get_id(); });
  s1.synchronize();
  s2.synchronize();
  ng::ExternalEvent gate("gate");
  gate.wait(s1);  // s1 is held back; its replays are launched first anyway
  for (int i = 0; i < 3; ++i) {
    g.replay(s1);
    g.replay(s2);
  }
  // Once s1 is held in the gate's wait and s2 is blocked waiting for s1's turn, s2's replay cannot
  // have run; one that does not wait for its turn runs instead (Note [Tests without time]).
  const auto ran_any = [&] {
    std::lock_guard lock(mu);
    return !order.empty();
  };
  ASSERT_TRUE(ngtest::eventually([&] {
    return (ngtest::blocked_waits(gate) == 1 && ngtest::blocked_on(s2, s1)) || ran_any();
  }));
  EXPECT_FALSE(ran_any()) << "s2's replay ran before s1's, which was launched earlier";
  gate.record(ng::Stream::create());
  s1.synchronize();
  s2.synchronize();
  const std::vector<std::thread::id> expected{w1, w2, w1, w2, w1, w2};
  EXPECT_EQ(order, expected);
}

// A replay waiting for its turn behind a replay whose stream is stalled: the waiting stream's
// synchronize raises, naming the ExternalEvent and the stalled stream, instead of blocking forever.
TEST(ReplayOrder, AReplayWaitingBehindAStalledStreamReportsTheStall) {
  ngtest::DiagnosticLog log;
  std::atomic<int> runs{0};
  ng::Graph g;
  {
    ng::CaptureScope capture(g);
    ng::launch_host_func(ng::current_stream(), [&] { ++runs; });
  }
  const ng::Stream s1 = ng::Stream::create(), s2 = ng::Stream::create();
  ng::ExternalEvent never("never_recorded_for_s1");
  never.set_wait_deadline(50ms);
  never.wait(s1);
  g.replay(s1);  // turn 0, behind the wait
  g.replay(s2);  // turn 1, waits for turn 0
  EXPECT_TRUE(throws<ng::TimeoutError>([&] { s2.synchronize(5000ms); },
                                            {"'never_recorded_for_s1'", s1.str(), "50 ms deadline",
                                             "cancelled"}));
  // The stall is cancelled: both replays run, and s1 learns what happened at its own synchronize.
  EXPECT_TRUE(throws<ng::TimeoutError>([&] { s1.synchronize(5000ms); }, {"'never_recorded_for_s1'"}));
  s2.synchronize();
  EXPECT_EQ(runs.load(), 2);
  g.replay(s2);
  g.replay(s1);
  s1.synchronize();
  s2.synchronize();
  EXPECT_EQ(runs.load(), 4);
}

// A replay captured into another graph runs when the outer graph's node runs, alone with the inner
// graph's other replays. (A turn taken only when the node ran sat behind a host replay of the inner
// graph queued after the outer one on the same stream: a deadlock the fuzzer found.)
TEST(ReplayOrder, AReplayCapturedIntoAGraphNeitherDeadlocksNorOverlapsTheGraphsOtherReplays) {
  std::atomic<int> runs{0}, inside{0}, overlapped{0};
  const ng::Stream s = ng::Stream::create();
  ng::Graph inner, outer;
  inner.capture_begin(s);
  ng::launch_host_func(s, [&] {
    if (inside.fetch_add(1) != 0) ++overlapped;
    // Stays inside a little, so that an overlapping replay would find this one there: a window that
    // makes a broken runtime fail more often, never one a correct run could fail by (no overlap can
    // happen however long it is). Not a yield loop: under load each yield gives a whole time slice away.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    ++runs;
    inside.fetch_sub(1);
  });
  inner.capture_end(s);
  outer.capture_begin(s);
  inner.replay(s);
  outer.capture_end(s);
  outer.replay(s);
  inner.replay(s);
  EXPECT_NO_THROW(s.synchronize(ngtest::kDeadline));
  EXPECT_EQ(runs.load(), 2);
  // The inner graph replayed directly on other streams while the outer one launches it.
  const ng::Stream s2 = ng::Stream::create(), s3 = ng::Stream::create();
  for (int i = 0; i < 20; ++i) {
    outer.replay(s);
    inner.replay(s2);
    inner.replay(s3);
  }
  EXPECT_NO_THROW(s.synchronize(ngtest::kDeadline));
  EXPECT_NO_THROW(s2.synchronize(ngtest::kDeadline));
  EXPECT_NO_THROW(s3.synchronize(ngtest::kDeadline));
  EXPECT_EQ(runs.load(), 62);
  EXPECT_EQ(overlapped.load(), 0);
}

}  // namespace
