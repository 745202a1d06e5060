// Launch-ordered task update (docs/semantics.md §7): host-immediate, seen by every replay launched after it and
// by no replay launched before it — with replays still queued or running, no event, no synchronize.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <mutex>
#include <vector>

#include "npugraph/npugraph.hpp"
#include "support/bitwise.hpp"
#include "support/diagnostics.hpp"
#include "support/host_tensors.hpp"
#include "support/throws.hpp"

using namespace npugraph;

namespace {

// fill z; group { y = x * alpha; z = y + x }; then a host function logs z[0] (x[0] = 1: alpha + 1).
struct LoggedGraph {
  LoggedGraph() {
    CaptureScope c(graph);
    Stream s = current_stream();
    task_group_begin(s);
    ops::scale_out(x, 0.0, y);
    ops::add_out(y, x, z);
    handle = task_group_end(s);
    launch_host_func(s, [this] {
      std::lock_guard lock(mu);
      log.push_back(z.data_ptr<float>()[0]);
    });
  }
  void update(Stream& u, double alpha, UpdateOrder order) {
    StreamGuard on(u);
    task_update_begin(u, handle, order);
    ops::scale_out(x, alpha, y);
    ops::add_out(y, x, z);
    task_update_end(u);
  }

  Tensor x = ngtest::f32_tensor({1, 2});
  Tensor y = empty({2}, f32), z = empty({2}, f32);
  Graph graph;
  TaskGroupHandle handle;
  std::mutex mu;
  std::vector<float> log;
};

}  // namespace

TEST(LaunchOrderUpdate, TakesEffectAtTheNextLaunchWithoutEventsOrSync) {
  LoggedGraph g;
  Stream u = Stream::create(), r = Stream::create();
  g.update(u, 4.0, UpdateOrder::launch);  // no synchronize of u, no event
  g.graph.replay(r);
  r.synchronize();
  ASSERT_EQ(g.log, std::vector<float>({5.0f}));
}

// Replays wait behind a gate on their stream while updates go on: each must run with the parameters
// current when it was launched.
TEST(LaunchOrderUpdate, QueuedReplaysKeepTheParametersTheyWereLaunchedWith) {
  LoggedGraph g;
  Stream u = Stream::create(), r = Stream::create();
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  launch_host_func(r, [open] { open.wait(); });
  std::vector<float> want;
  for (int k = 0; k < 40; ++k) {
    g.update(u, k, UpdateOrder::launch);
    g.graph.replay(r);
    want.push_back(static_cast<float>(k + 1));
  }
  gate.set_value();
  r.synchronize();
  EXPECT_EQ(g.log, want);
}

// Replays run while updates race with them (no gate): still each replay's own parameters. Both tasks
// of the group change at every update (y = x * a, z = y * b with b = 100 + a), and each replay logs
// y and z, so a replay running the first task of one version and the second of another is seen.
TEST(LaunchOrderUpdate, RunningReplaysAreNeverTorn) {
  Tensor x = ngtest::f32_tensor({1, 2}), y = empty({2}, f32), z = empty({2}, f32);
  std::mutex mu;
  std::vector<std::pair<float, float>> log;
  Graph graph;
  TaskGroupHandle handle;
  {
    CaptureScope c(graph);
    Stream s = current_stream();
    task_group_begin(s);
    ops::scale_out(x, 0.0, y);
    ops::scale_out(y, 100.0, z);
    handle = task_group_end(s);
    launch_host_func(s, [&] {
      std::lock_guard lock(mu);
      log.emplace_back(y.data_ptr<float>()[0], z.data_ptr<float>()[0]);
    });
  }
  Stream u = Stream::create(), r1 = Stream::create();
  std::vector<std::pair<float, float>> want;
  for (int k = 0; k < 300; ++k) {
    const double a = k % 17 + 1, b = 100 + a;
    {
      StreamGuard on(u);
      UpdateScope update(u, handle, UpdateOrder::launch);
      ops::scale_out(x, a, y);
      ops::scale_out(y, b, z);
    }
    graph.replay(r1);
    want.emplace_back(static_cast<float>(a), static_cast<float>(a * b));
  }
  r1.synchronize();
  ASSERT_EQ(log.size(), want.size());
  for (std::size_t i = 0; i < log.size(); ++i) {
    EXPECT_EQ(log[i].second, log[i].first * (100 + log[i].first)) << "replay " << i << " ran a torn set";
    EXPECT_EQ(log[i], want[i]) << "replay " << i;
  }
}

// With both orders on one group, the update the host ended last wins.
TEST(LaunchOrderUpdate, MixedWithStreamOrderTheLaterUpdateWins) {
  LoggedGraph g;
  Stream u = Stream::create(), r = Stream::create();
  g.update(u, 1.0, UpdateOrder::launch);
  g.update(u, 5.0, UpdateOrder::stream);
  u.synchronize();
  g.graph.replay(r);
  r.synchronize();
  g.update(u, 7.0, UpdateOrder::launch);
  g.graph.replay(r);
  r.synchronize();
  g.update(u, 2.0, UpdateOrder::stream);
  u.synchronize();
  g.graph.replay(r);
  r.synchronize();
  EXPECT_EQ(g.log, std::vector<float>({6.0f, 8.0f, 3.0f}));
}

// The seed's FIA: replays queued behind a gate, each launched after a launch-ordered update of the
// actual length; every replay's output is bitwise the eager output for the length it was launched with.
TEST(LaunchOrderUpdate, FiaReplaysMatchEagerForTheLengthTheyWereLaunchedWith) {
  using ngtest::random_tensor;
  std::vector<double> qv, kv, vv;
  const Tensor q = random_tensor(qv, {1, 4, 1, 16}, f16, 1), k = random_tensor(kv, {1, 4, 8, 16}, f16, 2),
               v = random_tensor(vv, {1, 4, 8, 16}, f16, 3);
  ops::FiaOptions opt{.actual_seq_lengths_kv = {8}, .num_heads = 4, .scale = 0.25, .input_layout = "BNSD"};
  std::vector<std::vector<std::byte>> eager(9);
  for (std::int64_t len = 1; len <= 8; ++len) {
    ops::FiaOptions o = opt;
    o.actual_seq_lengths_kv = {len};
    Tensor out = ops::fused_infer_attention_score(q, k, v, o).attention_out;
    current_stream().synchronize();
    eager[len].resize(out.nbytes());
    std::memcpy(eager[len].data(), out.data(), out.nbytes());
  }
  Graph graph;
  Tensor ws, out = empty({1, 4, 1, 16}, f16), lse = empty({1}, f32);
  TaskGroupHandle handle;
  std::mutex mu;
  std::vector<std::vector<std::byte>> log;
  {
    CaptureScope c(graph);
    Stream s = current_stream();
    ws = ops::fia_max_workspace(q, k, v, opt);
    task_group_begin(s);
    ops::fused_infer_attention_score_out(q, k, v, opt, ws, out, lse);
    handle = task_group_end(s);
    launch_host_func(s, [&] {
      std::lock_guard lock(mu);
      log.emplace_back(out.nbytes());
      std::memcpy(log.back().data(), out.data(), out.nbytes());
    });
  }
  Stream u = Stream::create(), r = Stream::create();
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  launch_host_func(r, [open] { open.wait(); });
  std::vector<std::int64_t> launched;
  for (int i = 0; i < 24; ++i) {
    const std::int64_t len = (i * 5) % 8 + 1;
    ops::FiaOptions o = opt;
    o.actual_seq_lengths_kv = {len};
    {
      StreamGuard on(u);
      UpdateScope scope(u, handle, UpdateOrder::launch);
      ops::fused_infer_attention_score_out(q, k, v, o, ws, out, lse);
    }
    graph.replay(r);
    launched.push_back(len);
  }
  gate.set_value();
  r.synchronize();
  ASSERT_EQ(log.size(), launched.size());
  for (std::size_t i = 0; i < launched.size(); ++i)
    EXPECT_EQ(log[i], eager[static_cast<std::size_t>(launched[i])]) << "replay " << i << ", length " << launched[i];
}

// The contrast: a stream-ordered update installs when its stream reaches it — not before, even for
// replays launched after the call — and at once when nothing is queued ahead of it.
TEST(StreamOrderUpdate, InstallsWhenTheUpdateStreamReachesIt) {
  LoggedGraph g;
  Stream u = Stream::create(), r = Stream::create();
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  launch_host_func(u, [open] { open.wait(); });
  g.update(u, 4.0, UpdateOrder::stream);  // queued behind the gate
  g.graph.replay(r);
  r.synchronize();
  gate.set_value();
  u.synchronize();
  g.graph.replay(r);
  r.synchronize();
  g.update(u, 6.0, UpdateOrder::stream);  // u is idle: installed before task_update_end returns
  g.graph.replay(r);
  r.synchronize();
  EXPECT_EQ(g.log, std::vector<float>({1.0f, 5.0f, 7.0f}));
}
