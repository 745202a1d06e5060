// Note [Keep-alive]: queued, captured and updated work keeps alive the tensors it reads and writes,
// so a caller dropping its handles (a Python object collected, an interpreter exiting) never leaves a
// launch reading freed memory.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include "npugraph/npugraph.hpp"
#include "support/blocked.hpp"
#include "support/wait.hpp"

namespace {

namespace ng = npugraph;
using namespace std::chrono_literals;

// Host memory whose owner records when it is freed, and what the buffer held then.
struct Tracked {
  Tracked(std::vector<float> values, std::atomic<bool>& f, std::vector<float>& l)
      : data(std::move(values)), freed(&f), last(&l) {}
  Tracked(const Tracked&) = delete;
  std::vector<float> data;
  std::atomic<bool>* freed;
  std::vector<float>* last;
  ~Tracked() {
    *last = data;
    freed->store(true);
  }
};

ng::Tensor tracked(std::vector<float> values, std::atomic<bool>& freed, std::vector<float>& last) {
  auto owner = std::make_shared<Tracked>(std::move(values), freed, last);
  return ng::Tensor::from_blob(owner->data.data(), {static_cast<std::int64_t>(owner->data.size())},
                               ng::f32, owner);
}

TEST(KeepAlive, AQueuedLaunchKeepsItsTensorsAliveUntilItRan) {
  std::atomic<bool> a_freed{false}, out_freed{false};
  std::vector<float> a_last, out_last;
  const ng::Stream s = ng::Stream::create();
  ng::ExternalEvent gate("gate");
  gate.wait(s);
  {
    ng::StreamGuard on(s);
    const ng::Tensor a = tracked({1, 2, 3, 4}, a_freed, a_last);
    const ng::Tensor out = tracked({0, 0, 0, 0}, out_freed, out_last);
    ng::ops::add_out(a, a, out);  // queued behind the gate; the handles go away now
  }
  // The worker is held in the gate's wait, the launch behind it (Note [Tests without time]).
  ASSERT_TRUE(ngtest::eventually([&] { return ngtest::blocked_waits(gate) == 1; }));
  EXPECT_FALSE(a_freed.load());
  EXPECT_FALSE(out_freed.load());
  gate.record(ng::Stream::create());
  s.synchronize();
  EXPECT_TRUE(a_freed.load());
  EXPECT_TRUE(out_freed.load());
  EXPECT_EQ(out_last, (std::vector<float>{2, 4, 6, 8}));  // the add ran on live memory
}

TEST(KeepAlive, CopyAndFillKeepTheirTensorsAlive) {
  std::atomic<bool> src_freed{false}, dst_freed{false};
  std::vector<float> src_last, dst_last;
  const ng::Stream s = ng::Stream::create();
  ng::ExternalEvent gate("gate");
  gate.wait(s);
  {
    const ng::Tensor src = tracked({5, 6}, src_freed, src_last);
    const ng::Tensor dst = tracked({0, 0}, dst_freed, dst_last);
    ng::copy_(s, dst, src);
    ng::fill_(s, src, 1.0);
  }
  ASSERT_TRUE(ngtest::eventually([&] { return ngtest::blocked_waits(gate) == 1; }));
  EXPECT_FALSE(src_freed.load());
  EXPECT_FALSE(dst_freed.load());
  gate.record(ng::Stream::create());
  s.synchronize();
  EXPECT_EQ(dst_last, (std::vector<float>{5, 6}));
  EXPECT_EQ(src_last, (std::vector<float>{1, 1}));
}

TEST(KeepAlive, ACapturedGraphKeepsItsTensorsAliveUntilReset) {
  std::atomic<bool> a_freed{false}, out_freed{false};
  std::vector<float> a_last, out_last;
  ng::Graph g;
  {
    const ng::Tensor a = tracked({1, 2}, a_freed, a_last);
    const ng::Tensor out = tracked({0, 0}, out_freed, out_last);
    ng::CaptureScope capture(g);
    ng::ops::add_out(a, a, out);
  }
  for (int i = 0; i < 3; ++i) g.replay();
  ng::device_synchronize();
  EXPECT_FALSE(a_freed.load());
  EXPECT_FALSE(out_freed.load());
  g.reset();
  EXPECT_TRUE(a_freed.load());
  EXPECT_TRUE(out_freed.load());
  EXPECT_EQ(out_last, (std::vector<float>{2, 4}));
}

// An update binding other tensors keeps them alive while they are the group's parameters, and lets
// them go once a later update replaces them; the captured ones go with the graph.
TEST(KeepAlive, AnUpdatedTaskKeepsItsNewTensorsAliveUntilReplaced) {
  std::atomic<bool> a_freed{false}, b_freed{false}, c_freed{false};
  std::vector<float> a_last, b_last, c_last;
  ng::Graph g;
  ng::TaskGroupHandle handle;
  {
    const ng::Tensor a = tracked({1, 2}, a_freed, a_last);
    ng::CaptureScope capture(g);
    ng::TaskGroupScope group(ng::current_stream());
    ng::ops::add_out(a, a, a);  // in place: a doubles at every replay
    handle = group.end();
  }
  const ng::Stream u = ng::Stream::create();
  auto update_to = [&](const ng::Tensor& t) {
    ng::StreamGuard on(u);
    ng::UpdateScope update(u, handle, ng::UpdateOrder::launch);
    ng::ops::add_out(t, t, t);
  };
  update_to(tracked({10, 20}, b_freed, b_last));
  EXPECT_FALSE(b_freed.load());  // held by the group's parameters
  g.replay();
  ng::device_synchronize();
  EXPECT_FALSE(b_freed.load());
  update_to(tracked({100, 200}, c_freed, c_last));
  EXPECT_TRUE(b_freed.load());  // replaced: nothing can run with it any more
  EXPECT_EQ(b_last, (std::vector<float>{20, 40}));
  EXPECT_FALSE(c_freed.load());
  g.replay();
  ng::device_synchronize();
  EXPECT_FALSE(a_freed.load());  // the captured parameters stay with the graph
  g.reset();
  EXPECT_TRUE(a_freed.load());
  EXPECT_TRUE(c_freed.load());
  EXPECT_EQ(c_last, (std::vector<float>{200, 400}));
  EXPECT_EQ(a_last, (std::vector<float>{1, 2}));  // never replayed with a
}

}  // namespace
