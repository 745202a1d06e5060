// Capture and replay (docs/semantics.md §3): recording, fork/join, modes, pools, DOT.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "npugraph/npugraph.hpp"
#include "support/host_tensors.hpp"
#include "support/throws.hpp"
#include "support/wait.hpp"

using namespace npugraph;
using namespace std::chrono_literals;
using ngtest::throws;

TEST(Capture, WorkIsRecordedNotRunAndReplaysEveryTime) {
  Tensor x = ngtest::f32_tensor({1, 2, 3});
  Tensor y = empty({3}, f32);
  int host_calls = 0;
  Graph g;
  {
    CaptureScope c(g);
    EXPECT_TRUE(current_stream().is_capturing());
    ops::scale_out(x, 10.0, y);
    launch_host_func(current_stream(), [&] { ++host_calls; });
  }
  device_synchronize();
  EXPECT_EQ(host_calls, 0);  // nothing ran during capture
  EXPECT_EQ(g.state(), Graph::State::ready);
  EXPECT_EQ(g.num_tasks(), 2u);
  for (int i = 1; i <= 3; ++i) {
    x.data_ptr<float>()[0] = static_cast<float>(i);
    g.replay();
    device_synchronize();
    EXPECT_EQ(y.data_ptr<float>()[0], 10.0f * i);
    EXPECT_EQ(host_calls, i);
  }
}

TEST(Capture, ForkJoinAcrossTwoStreamsReplaysBothBranches) {
  Tensor a = ngtest::f32_tensor({1, 1, 1, 1}), b = ngtest::f32_tensor({2, 2, 2, 2});
  Tensor a2 = empty({4}, f32), b2 = empty({4}, f32), out = empty({4}, f32);
  Stream side = Stream::create();
  Graph g;
  // A rendezvous: each branch arrives, then stays until the other has arrived too. Concurrent
  // branches meet at once; serialised ones cannot, the first one alone gives up at the deadline.
  // (With one core the runtime may run branches one after another: then nobody waits.)
  const bool concurrent = std::thread::hardware_concurrency() > 1;
  std::atomic<int> arrived{0}, met{0};
  auto probe = [&] {
    ++arrived;
    if (concurrent && ngtest::eventually([&] { return arrived.load() == 2; })) ++met;
  };
  {
    CaptureScope c(g);
    Stream main = current_stream();
    Event fork;
    fork.record(main);
    side.wait(fork);                       // side joins the capture
    EXPECT_TRUE(side.is_capturing());
    {
      StreamGuard on(side);
      ops::scale_out(b, 3.0, b2);
      launch_host_func(side, probe);
    }
    ops::scale_out(a, 5.0, a2);
    launch_host_func(main, probe);
    Event join;
    join.record(side);
    main.wait(join);
    ops::add_out(a2, b2, out);
  }
  EXPECT_FALSE(side.is_capturing());  // left the capture with it
  g.replay();
  device_synchronize();
  EXPECT_EQ(ngtest::values_of(out), std::vector<float>(4, 11.0f));
  EXPECT_EQ(arrived.load(), 2);
  if (concurrent) {
    EXPECT_EQ(met.load(), 2);  // branches ran concurrently
  }
  const std::string dot = g.dot();
  EXPECT_NE(dot.find("scale"), std::string::npos);
  EXPECT_NE(dot.find("stream " + std::to_string(side.id())), std::string::npos);
}

// Stream::capture_mark(): unchanged exactly while nothing is recorded on the stream (what lets the
// torch-op recorder extend its last host task), 0 outside a capture, never reused by a new capture.
TEST(Capture, CaptureMarkChangesWithEverythingRecordedOnTheStream) {
  Tensor x = ngtest::f32_tensor({1, 2}), y = empty({2}, f32);
  Stream side = Stream::create();
  EXPECT_EQ(side.capture_mark(), 0u);
  std::uint64_t first_capture_last = 0;
  for (int round = 0; round < 2; ++round) {
    Graph g;
    CaptureScope c(g);
    Stream main = current_stream();
    std::uint64_t m = main.capture_mark();
    EXPECT_NE(m, 0u);
    EXPECT_NE(m, first_capture_last);  // a new capture never starts at an old capture's mark
    EXPECT_EQ(main.capture_mark(), m);  // reading it changes nothing
    ops::scale_out(x, 2.0, y);
    EXPECT_NE(main.capture_mark(), m);
    m = main.capture_mark();
    Event e;
    e.record(main);
    EXPECT_NE(main.capture_mark(), m);
    m = main.capture_mark();
    side.wait(e);  // side joins: its mark is set, main's unchanged
    EXPECT_NE(side.capture_mark(), 0u);
    EXPECT_EQ(main.capture_mark(), m);
    {
      StreamGuard on(side);
      ops::scale_out(x, 3.0, y);
    }
    EXPECT_EQ(main.capture_mark(), m);  // work on another stream leaves main's mark
    Event join;
    join.record(side);
    main.wait(join);
    EXPECT_NE(main.capture_mark(), m);
    first_capture_last = main.capture_mark();
  }
  EXPECT_EQ(side.capture_mark(), 0u);
}

TEST(Capture, UnjoinedWorkFailsWithAClearMessage) {
  Stream side = Stream::create();
  Tensor t = empty({4}, f32);
  Stream cap = Stream::create();
  Graph g2;
  {
    StreamGuard on(cap);
    g2.capture_begin();
    Event fork;
    fork.record(cap);
    side.wait(fork);
    fill_(side, t, 1.0);  // recorded on side, never joined back
    EXPECT_TRUE(throws<StateError>([&] { g2.capture_end(); },
                                        {"unjoined work", "'fill'", side.str(), cap.str()}));
  }
  EXPECT_EQ(g2.state(), Graph::State::empty);
  EXPECT_FALSE(side.is_capturing());
  EXPECT_FALSE(cap.is_capturing());
  // Both streams are usable again.
  fill_(side, t, 2.0);
  side.synchronize();
  EXPECT_EQ(t.data_ptr<float>()[0], 2.0f);
}

TEST(Capture, RulesOnStreamsAreEnforced) {
  Graph g;
  EXPECT_TRUE(throws<StateError>([&] { g.capture_begin(Stream::default_stream()); },
                                      {"cannot capture", "default stream", "side stream"}));
  Stream s = Stream::create(), other = Stream::create();
  g.capture_begin(s);
  EXPECT_TRUE(throws<StateError>([&] { g.capture_begin(other); }, {"already capturing"}));
  EXPECT_TRUE(throws<StateError>([&] { g.capture_end(other); }, {"began on " + s.str(), "not on " + other.str()}));
  EXPECT_TRUE(throws<StateError>([&] { g.replay(); }, {"has not been captured"}));
  g.capture_end(s);
  EXPECT_EQ(g.state(), Graph::State::ready);
  EXPECT_EQ(g.num_tasks(), 0u);
  g.replay();  // an empty graph replays as a no-op
  device_synchronize();
  EXPECT_TRUE(throws<StateError>([&] { g.capture_begin(s); }, {"already captured", "reset()"}));
}

TEST(Capture, GlobalModeRejectsASynchronizeFromAnotherThreadAndInvalidatesTheCapture) {
  Graph g;
  Stream s = Stream::create();
  g.capture_begin(s, {.mode = CaptureMode::global});
  std::string message;
  std::thread([&] {
    try {
      Stream::default_stream().synchronize();
    } catch (const StateError& e) {
      message = e.what();
    }
  }).join();
  EXPECT_NE(message.find("Stream::synchronize"), std::string::npos) << message;
  EXPECT_NE(message.find("global mode"), std::string::npos) << message;
  // Recording after invalidation fails; ending discards the capture with the reason.
  Tensor t = empty({2}, f32);
  EXPECT_TRUE(throws<StateError>([&] { fill_(s, t, 1.0); }, {"invalidated"}));
  EXPECT_TRUE(throws<StateError>([&] { g.capture_end(s); }, {"invalidated", "Stream::synchronize"}));
  EXPECT_EQ(g.state(), Graph::State::empty);
  EXPECT_NO_THROW(device_synchronize());
}

TEST(Capture, RelaxedModeAllowsSynchronizeFromAnotherThread) {
  Graph g;
  Stream s = Stream::create();
  Tensor x = ngtest::f32_tensor({1, 2}), y = empty({2}, f32);
  g.capture_begin(s, {.mode = CaptureMode::relaxed});
  {
    StreamGuard on(s);
    ops::scale_out(x, 2.0, y);
  }
  std::thread([] { Stream::default_stream().synchronize(); device_synchronize(); }).join();
  g.capture_end(s);
  g.replay();
  device_synchronize();
  EXPECT_EQ(ngtest::values_of(y), (std::vector<float>{2, 4}));
}

TEST(Capture, ThreadLocalModeRejectsOnlyTheCapturingThread) {
  Graph g;
  Stream s = Stream::create();
  g.capture_begin(s, {.mode = CaptureMode::thread_local_});
  bool other_ok = false;
  std::thread([&] { Stream::default_stream().synchronize(); other_ok = true; }).join();
  EXPECT_TRUE(other_ok);
  EXPECT_TRUE(throws<StateError>([] { device_synchronize(); }, {"device_synchronize", "thread_local"}));
  EXPECT_TRUE(throws<StateError>([&] { g.capture_end(s); }, {"invalidated"}));
}

TEST(Capture, SynchronizingTheCapturingStreamIsAlwaysAnError) {
  Graph g;
  Stream s = Stream::create();
  g.capture_begin(s, {.mode = CaptureMode::relaxed});
  EXPECT_TRUE(throws<StateError>([&] { s.synchronize(); }, {"Stream::synchronize on " + s.str(), "capturing"}));
  EXPECT_TRUE(throws<StateError>([&] { g.capture_end(s); }, {"invalidated"}));
}

TEST(Capture, WaitingOnAnEventRecordedOutsideTheCaptureIsAnError) {
  Stream other = Stream::create();
  Event e;
  e.record(other);
  Graph g;
  Stream s = Stream::create();
  g.capture_begin(s);
  EXPECT_TRUE(throws<StateError>([&] { s.wait(e); }, {"recorded outside the capture", "ExternalEvent"}));
  g.capture_end(s);
}

TEST(Capture, ScopeLeftByAnExceptionAbandonsTheCapture) {
  Graph g;
  try {
    CaptureScope c(g);
    throw std::runtime_error("user error");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(g.state(), Graph::State::empty);
  EXPECT_FALSE(current_stream().is_capturing());
  { CaptureScope c(g); }  // and the graph can be captured again
  EXPECT_EQ(g.state(), Graph::State::ready);
}

TEST(Capture, ModeNamesParse) {
  EXPECT_EQ(parse_capture_mode("thread_local"), CaptureMode::thread_local_);
  EXPECT_TRUE(throws<ArgumentError>([] { parse_capture_mode("strict"); }, {"'strict'", "relaxed"}));
}

TEST(Capture, DebugDumpWritesDotWithGroupsOutlined) {
  Graph g;
  Tensor x = ngtest::f32_tensor({1}), y = empty({1}, f32);
  {
    CaptureScope c(g);
    fill_(y, 0.0);
    task_group_begin(current_stream());
    ops::scale_out(x, 2.0, y);
    task_group_end(current_stream());
  }
  const std::string path = ::testing::TempDir() + "/npugraph_dump.dot";
  g.debug_dump(path);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("digraph"), std::string::npos);
  EXPECT_NE(text.str().find("cluster_group_0"), std::string::npos);
  EXPECT_NE(text.str().find("n0 -> n1"), std::string::npos);
  EXPECT_TRUE(throws<ArgumentError>([&] { g.debug_dump("/nonexistent/dir/x.dot"); }, {"/nonexistent/dir/x.dot"}));
}
