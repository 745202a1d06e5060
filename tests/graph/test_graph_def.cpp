// Graphs built explicitly (GraphDef -> GraphExec) and the executor's ordering guarantees.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "npugraph/npugraph.hpp"
#include "support/host_tensors.hpp"
#include "support/throws.hpp"

using namespace npugraph;
using ngtest::throws;

TEST(GraphDef, ChainRunsInOrderOnEveryLaunch) {
  GraphDef def;
  std::vector<int> order;
  GraphDef::NodeId prev = 0;
  for (int i = 0; i < 1000; ++i) {
    const GraphDef::NodeId deps[] = {prev};
    prev = def.add_host([&order, i] { order.push_back(i); }, i ? std::span(deps) : std::span<const GraphDef::NodeId>());
  }
  GraphExec exec = def.instantiate();
  EXPECT_EQ(exec.size(), 1000u);
  Stream s = Stream::create();
  for (int launch = 0; launch < 3; ++launch) {
    order.clear();
    exec.launch(s);
    s.synchronize();
    ASSERT_EQ(order.size(), 1000u);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(order[static_cast<std::size_t>(i)], i);
  }
}

TEST(GraphDef, IndependentTasksAllRunOnce) {
  GraphDef def;
  std::vector<std::atomic<int>> hits(1000);
  for (auto& h : hits) def.add_host([&h] { ++h; });
  GraphExec exec = def.instantiate();
  Stream s = Stream::create();
  exec.launch(s);
  exec.launch(s);
  s.synchronize();
  for (auto& h : hits) ASSERT_EQ(h.load(), 2);
}

TEST(GraphDef, EveryNodeRunsAfterAllItsPredecessors) {
  // A layered random DAG: each node records the order it ran in; each edge must be respected.
  GraphDef def;
  const int layers = 20, width = 30;
  std::mutex mu;
  std::vector<int> ran_at(layers * width, -1);
  int clock = 0;
  std::vector<std::vector<GraphDef::NodeId>> deps_of(layers * width);
  std::uint32_t seed = 1;
  auto rnd = [&] { seed = seed * 1664525u + 1013904223u; return seed >> 8; };
  for (int l = 0; l < layers; ++l)
    for (int w = 0; w < width; ++w) {
      const int id = l * width + w;
      if (l > 0)
        for (int k = 0; k < 3; ++k) {
          const auto d = static_cast<GraphDef::NodeId>((l - 1) * width + static_cast<int>(rnd() % width));
          if (std::find(deps_of[id].begin(), deps_of[id].end(), d) == deps_of[id].end()) deps_of[id].push_back(d);
        }
      def.add_host([&, id] { std::lock_guard lock(mu); ran_at[static_cast<std::size_t>(id)] = clock++; }, deps_of[id]);
    }
  GraphExec exec = def.instantiate();
  Stream s = Stream::create();
  for (int rep = 0; rep < 5; ++rep) {
    clock = 0;
    exec.launch(s);
    s.synchronize();
    for (int id = 0; id < layers * width; ++id)
      for (auto d : deps_of[id]) ASSERT_LT(ran_at[d], ran_at[static_cast<std::size_t>(id)]);
  }
  const std::string dot = def.dot();
  EXPECT_NE(dot.find("n0 -> n"), std::string::npos);
}

TEST(GraphDef, KernelNodesAndErrorsInsideAReplay) {
  Tensor x = ngtest::f32_tensor({1, 2, 3}), y = empty({3}, f32);
  struct P { const void* x; void* out; std::int64_t n; float alpha; DType dtype; };
  GraphDef def;
  const auto a = def.add_kernel(ops::scale_kernel(), P{x.data(), y.data(), 3, 4.0f, f32});
  const GraphDef::NodeId deps[] = {a};
  def.add_host([] { throw std::runtime_error("host node failed"); }, deps);
  GraphExec exec = def.instantiate();
  Stream s = Stream::create();
  exec.launch(s);
  EXPECT_TRUE(throws<TaskError>([&] { s.synchronize(); }, {"task #1 'host_func'", "host node failed"}));
  EXPECT_EQ(ngtest::values_of(y), (std::vector<float>{4, 8, 12}));
  EXPECT_TRUE(throws<ArgumentError>([&] { const GraphDef::NodeId bad[] = {7}; def.add_host([] {}, bad); },
                                         {"dependency = 7"}));
}
