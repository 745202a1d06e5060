// The kernel fusion mechanism (Note [Kernel fusion] in npugraph/kernel.hpp) with the test's own
// kernels: which neighbours pair, that a pair runs once per replay, how its failure is named, the
// instantiation's log line, and replays of a fused graph from several threads (the TSan build runs
// this file). The ops' own rules: tests/ops/llm/test_kernel_fusion.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "npugraph/npugraph.hpp"
#include "support/diagnostics.hpp"
#include "support/throws.hpp"

using namespace npugraph;
using ngtest::throws;

namespace {

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// out = in * 2, then out = out + 1, per element; fused: out = in * 2 + 1, counting its runs, and
// throwing when the first block's `fail` is set.
struct Step {
  const float* in;
  float* out;
  std::int64_t n;
  bool fail;
};
Step step_of(const void* p) {
  Step s;
  std::memcpy(&s, p, sizeof s);
  return s;
}
void doubled(const void* p, std::size_t, const ExecContext&) {
  const Step s = step_of(p);
  for (std::int64_t i = 0; i < s.n; ++i) s.out[i] = s.in[i] * 2;
}
void plus_one(const void* p, std::size_t, const ExecContext&) {
  const Step s = step_of(p);
  for (std::int64_t i = 0; i < s.n; ++i) s.out[i] += 1;
}
const KernelDef kDoubled{.name = "doubled", .cpu = &doubled};
const KernelDef kPlusOne{.name = "plus_one", .cpu = &plus_one};
std::atomic<int> g_fused_runs{0};
bool same_out(std::span<const std::byte> a, std::span<const std::byte> b) {
  return step_of(a.data()).out == step_of(b.data()).out && step_of(a.data()).n == step_of(b.data()).n;
}
void doubled_plus_one(const void* a, std::size_t, const void*, std::size_t, const ExecContext&) {
  const Step s = step_of(a);
  if (s.fail) throw std::runtime_error("the fused kernel refuses");
  ++g_fused_runs;
  for (std::int64_t i = 0; i < s.n; ++i) s.out[i] = s.in[i] * 2 + 1;
}
const KernelFusion kDoubledPlusOne{.name = "doubled+plus_one", .first = &kDoubled, .second = &kPlusOne,
                                   .match = &same_out, .cpu = &doubled_plus_one};

void register_once() {
  if (!find_kernel_fusion(kDoubled, kPlusOne)) register_kernel_fusion(kDoubledPlusOne);
}

class FusionOn {
 public:
  FusionOn() : was_(kernel_fusion()) { set_kernel_fusion(true); }
  ~FusionOn() { set_kernel_fusion(was_); }

 private:
  bool was_;
};

// Pairs in a chain: v[k + 1] = v[k] * 2 + 1 for k < pairs, each as doubled then plus_one.
void issue_pairs(std::vector<std::vector<float>>& v, bool fail) {
  const Stream s = current_stream();
  for (std::size_t k = 0; k + 1 < v.size(); ++k) {
    const Step st{v[k].data(), v[k + 1].data(), static_cast<std::int64_t>(v[k].size()), fail};
    launch(s, kDoubled, st);
    launch(s, kPlusOne, st);
  }
}

TEST(KernelFusionPlan, EachPairRunsOnceAReplayAndAFailureNamesBothTasks) {
  const FusionOn on;
  register_once();
  EXPECT_EQ(find_kernel_fusion(kDoubled, kPlusOne), &kDoubledPlusOne);
  EXPECT_EQ(find_kernel_fusion(kPlusOne, kDoubled), nullptr);
  std::vector<std::vector<float>> v(4, std::vector<float>(3, 0.0f));
  v[0] = {1, 2, 3};
  Graph g;
  {
    const ngtest::DiagnosticLog log;
    set_log_level(LogLevel::info);
    {
      CaptureScope c(g);
      issue_pairs(v, false);  // three pairs: d p d p d p
    }
    set_log_level(LogLevel::off);
    std::string all;
    for (const std::string& line : log.lines()) all += line + "\n";
    EXPECT_TRUE(contains(all, "6 task(s), 0 task group(s), instantiated, 3 pair(s) of kernels fused")) << all;
  }
  g_fused_runs = 0;
  g.replay();
  device_synchronize();
  EXPECT_EQ(g_fused_runs.load(), 3);
  EXPECT_EQ(v[3], (std::vector<float>{15, 23, 31}));  // ((x * 2 + 1) * 2 + 1) * 2 + 1

  std::vector<std::vector<float>> w(2, std::vector<float>(3, 0.0f));
  Graph bad;
  {
    CaptureScope c(bad);
    issue_pairs(w, true);
  }
  bad.replay();
  EXPECT_TRUE(throws<TaskError>([] { device_synchronize(); },
                                {"task #0 'doubled'", "fused as 'doubled+plus_one'", "task #1 'plus_one'",
                                 "the fused kernel refuses"}));
  v[3].assign(3, 0.0f);
  g.replay();  // the runtime goes on
  device_synchronize();
  EXPECT_EQ(g_fused_runs.load(), 6);
  EXPECT_EQ(v[3], (std::vector<float>{15, 23, 31}));
}

// Only neighbours pair: not across another task between them, not the other way round, not into a
// task group.
TEST(KernelFusionPlan, OnlyNeighboursPair) {
  const FusionOn on;
  register_once();
  std::vector<float> a = {1, 2}, b(2), c(2);
  const Step ab{a.data(), b.data(), 2, false}, bc{b.data(), c.data(), 2, false};
  Graph g;
  {
    CaptureScope cap(g);
    const Stream s = current_stream();
    launch(s, kDoubled, ab);
    launch(s, kPlusOne, ab);  // pairs with the doubled before it
    launch(s, kDoubled, bc);
    fill_(s, Tensor::from_blob(c.data(), {2}, DType::f32), 7.0);  // between: no pair
    launch(s, kPlusOne, bc);
    launch(s, kDoubled, bc);
    task_group_begin(s);
    launch(s, kPlusOne, bc);  // in a group: no pair
    (void)task_group_end(s);
  }
  g_fused_runs = 0;
  g.replay();
  device_synchronize();
  EXPECT_EQ(g_fused_runs.load(), 1);
  EXPECT_EQ(b, (std::vector<float>{3, 5}));
  EXPECT_EQ(c, (std::vector<float>{7, 11}));  // (3, 5) * 2 + 1
}

// Threads replaying fused graphs at once (each its own graph and stream, and all one graph): the
// runs are counted exactly and every result is right.
TEST(KernelFusionPlan, ThreadsReplayFusedGraphsAtOnce) {
  const FusionOn on;
  register_once();
  constexpr int kThreads = 4, kReplays = 50;
  std::vector<std::vector<std::vector<float>>> data(kThreads + 1,
                                                    std::vector<std::vector<float>>(3, std::vector<float>(64)));
  std::vector<Graph> graphs(kThreads + 1);
  for (int t = 0; t <= kThreads; ++t) {
    for (int i = 0; i < 64; ++i) data[t][0][i] = static_cast<float>(t * 100 + i);
    CaptureScope c(graphs[t]);
    issue_pairs(data[t], false);
  }
  g_fused_runs = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const Stream s = Stream::create();
      for (int r = 0; r < kReplays; ++r) {
        graphs[t].replay(s);
        graphs[kThreads].replay(s);  // the shared graph: its replays run one at a time
      }
      s.synchronize();
    });
  for (auto& th : threads) th.join();
  device_synchronize();
  EXPECT_EQ(g_fused_runs.load(), 2 * 2 * kThreads * kReplays);
  for (int t = 0; t <= kThreads; ++t)
    for (int i = 0; i < 64; ++i) ASSERT_EQ(data[t][2][i], (data[t][0][i] * 2 + 1) * 2 + 1) << t << " " << i;
}

}  // namespace
