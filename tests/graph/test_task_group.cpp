// Task groups (docs/semantics.md §4) and stream-ordered task update (§5), errors included.
#include <gtest/gtest.h>

#include "npugraph/npugraph.hpp"
#include "support/bitwise.hpp"
#include "support/host_tensors.hpp"
#include "support/throws.hpp"

using namespace npugraph;
using ngtest::throws;

namespace {

// A graph: fill(z, -1); group { y = x * alpha; z = y + x } ; so z = (alpha + 1) * x.
class GroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      CaptureScope c(graph);
      capture_stream = current_stream();
      fill_(z, -1.0);
      task_group_begin(capture_stream);
      ops::scale_out(x, 2.0, y);
      ops::add_out(y, x, z);
      handle = task_group_end(capture_stream);
    }
    expect_replay(3.0f);
  }

  void issue_group(double alpha) {
    ops::scale_out(x, alpha, y);
    ops::add_out(y, x, z);
  }

  // Replays on the replay stream and checks z = factor * x; both streams must be usable.
  void expect_replay(float factor) {
    update.synchronize();
    graph.replay(replay);
    replay.synchronize();
    for (int i = 0; i < 4; ++i) ASSERT_EQ(z.data_ptr<float>()[i], factor * (i + 1)) << "factor " << factor;
    Tensor probe = ngtest::f32_tensor({1});
    fill_(update, probe, 5.0);
    update.synchronize();
    ASSERT_EQ(probe.data_ptr<float>()[0], 5.0f);
  }

  Tensor x = ngtest::f32_tensor({1, 2, 3, 4});
  Tensor y = empty({4}, f32);
  Tensor z = empty({4}, f32);
  Graph graph;
  Stream capture_stream = Stream::default_stream();
  Stream update = Stream::create();
  Stream replay = Stream::create();
  TaskGroupHandle handle;
};

}  // namespace

TEST_F(GroupTest, UpdateThenReplayUsesTheNewParameters) {
  EXPECT_EQ(handle.num_tasks(), 2u);
  EXPECT_TRUE(handle.valid());
  for (double alpha : {3.0, 7.0, 0.5}) {
    StreamGuard on(update);
    task_update_begin(update, handle);
    EXPECT_TRUE(update.is_updating());
    issue_group(alpha);
    task_update_end(update);
    expect_replay(static_cast<float>(alpha + 1));
  }
}

TEST_F(GroupTest, UpdateScopeEndsTheUpdate) {
  {
    StreamGuard on(update);
    UpdateScope u(update, handle);
    issue_group(9.0);
  }
  expect_replay(10.0f);
}

TEST_F(GroupTest, UpdatedReplayIsBitwiseEqualToEager) {
  Tensor eager_y = empty({4}, f32), eager_z = empty({4}, f32);
  {
    StreamGuard on(update);
    ops::scale_out(x, 0.3, eager_y);
    ops::add_out(eager_y, x, eager_z);
    task_update_begin(update, handle);
    issue_group(0.3);
    task_update_end(update);
  }
  update.synchronize();
  graph.replay(replay);
  replay.synchronize();
  EXPECT_TRUE(ngtest::bitwise_equal(z, eager_z));
}

// ---- group errors -------------------------------------------------------------------------------

TEST(TaskGroupErrors, BeginOutsideCapture) {
  Stream s = Stream::create();
  EXPECT_TRUE(throws<StateError>([&] { task_group_begin(s); }, {"task_group_begin", "not capturing"}));
  EXPECT_TRUE(throws<StateError>([&] { task_group_end(s); }, {"task_group_end", "not capturing"}));
}

TEST(TaskGroupErrors, NestedBeginEndOnAnotherStreamAndNonKernelTask) {
  Tensor x = ngtest::f32_tensor({1, 2}), y = empty({2}, f32);
  Graph g;
  TaskGroupHandle h;
  {
    CaptureScope c(g);
    Stream s = current_stream();
    task_group_begin(s);
    EXPECT_TRUE(throws<StateError>([&] { task_group_begin(s); }, {"already open", "do not nest"}));
    ops::scale_out(x, 2.0, y);
    EXPECT_TRUE(throws<StateError>([&] { fill_(y, 0.0); }, {"only kernel launches", "'fill'", "not recorded"}));
    EXPECT_TRUE(throws<StateError>([&] { launch_host_func(s, [] {}); }, {"'host_func'"}));
    EXPECT_TRUE(throws<StateError>([&] { ExternalEvent().record(s); }, {"'external_event_record'"}));
    h = task_group_end(s);
  }
  // The rejected tasks were not recorded; the capture stayed valid.
  EXPECT_EQ(g.state(), Graph::State::ready);
  EXPECT_EQ(g.num_tasks(), 1u);
}

TEST(TaskGroupErrors, EventRecordInsideAGroupIsRejected) {
  Graph g;
  CaptureScope c(g);
  task_group_begin(current_stream());
  Event e;
  EXPECT_TRUE(throws<StateError>([&] { e.record(current_stream()); }, {"only kernel launches", "'event_record'"}));
  Tensor x = ngtest::f32_tensor({1}), y = empty({1}, f32);
  ops::scale_out(x, 2.0, y);
  task_group_end(current_stream());
}

TEST(TaskGroupErrors, EndOnAnotherStreamNamesTheStreamThatBegan) {
  Tensor x = ngtest::f32_tensor({1, 2}), y = empty({2}, f32), w = empty({2}, f32);
  Stream side = Stream::create();
  Graph g;
  {
    CaptureScope c(g);
    Stream s = current_stream();
    Event fork;
    fork.record(s);
    side.wait(fork);
    task_group_begin(s);
    ops::scale_out(x, 2.0, y);
    EXPECT_TRUE(throws<StateError>([&] { task_group_end(side); },
                                        {"no task group is open on " + side.str(), "begun on " + s.str()}));
    task_group_end(s);
    {
      StreamGuard on(side);
      ops::scale_out(x, 3.0, w);
    }
    Event join;
    join.record(side);
    s.wait(join);
  }
  EXPECT_EQ(g.num_tasks(), 2u);
}

TEST(TaskGroupErrors, CaptureEndWithAGroupOpen) {
  Tensor x = ngtest::f32_tensor({1}), y = empty({1}, f32);
  Graph g;
  Stream s = Stream::create();
  g.capture_begin(s);
  task_group_begin(s);
  {
    StreamGuard on(s);
    ops::scale_out(x, 2.0, y);
  }
  EXPECT_TRUE(throws<StateError>([&] { g.capture_end(s); }, {"task group is still open", s.str(), "task_group_end"}));
  EXPECT_EQ(g.state(), Graph::State::empty);
  EXPECT_FALSE(s.is_capturing());
}

TEST(TaskGroupErrors, AHandleUsedAfterItsGraphWasResetOrDestroyed) {
  Tensor x = ngtest::f32_tensor({1}), y = empty({1}, f32);
  Stream u = Stream::create();
  TaskGroupHandle h;
  auto g = std::make_unique<Graph>();
  auto capture = [&](Graph& graph) {
    CaptureScope c(graph);
    task_group_begin(current_stream());
    ops::scale_out(x, 2.0, y);
    return task_group_end(current_stream());
  };
  h = capture(*g);
  g->reset();
  EXPECT_FALSE(h.valid());
  EXPECT_TRUE(throws<StateError>([&] { task_update_begin(u, h); }, {"stale", "reset or destroyed"}));
  h = capture(*g);  // captured again: the new handle works, the old one stays stale
  EXPECT_TRUE(h.valid());
  g.reset();
  EXPECT_FALSE(h.valid());
  EXPECT_TRUE(throws<StateError>([&] { task_update_begin(u, h); }, {"stale"}));
  EXPECT_FALSE(u.is_updating());
  EXPECT_TRUE(throws<ArgumentError>([&] { task_update_begin(u, TaskGroupHandle()); }, {"undefined"}));
}

// ---- update errors: after each, the graph replays its previous parameters ---------------------

TEST_F(GroupTest, UpdateBeginOnACapturingStream) {
  Graph other;
  Stream s = Stream::create();
  other.capture_begin(s);
  EXPECT_TRUE(throws<StateError>([&] { task_update_begin(s, handle); }, {"task_update_begin", "is capturing"}));
  other.capture_end(s);
  expect_replay(3.0f);
}

TEST_F(GroupTest, UpdateBeginTwice) {
  task_update_begin(update, handle);
  EXPECT_TRUE(throws<StateError>([&] { task_update_begin(update, handle); },
                                      {"already updating", "abandoned", "nothing was installed"}));
  EXPECT_FALSE(update.is_updating());
  expect_replay(3.0f);
}

TEST_F(GroupTest, UpdateOfAHandleBusyOnAnotherStream) {
  Stream other = Stream::create();
  task_update_begin(update, handle);
  EXPECT_TRUE(throws<StateError>([&] { task_update_begin(other, handle); },
                                      {"already being updated on " + update.str()}));
  EXPECT_FALSE(other.is_updating());
  task_update_abort(update);  // the handle is free again
  task_update_begin(other, handle);
  task_update_abort(other);
  expect_replay(3.0f);
}

TEST_F(GroupTest, UpdateWithTooManyLaunches) {
  StreamGuard on(update);
  task_update_begin(update, handle);
  issue_group(5.0);
  EXPECT_TRUE(throws<StateError>([&] { ops::scale_out(x, 5.0, y); },
                                      {"launch 3 ('scale')", "one more than the 2 task(s)", "nothing was installed"}));
  EXPECT_FALSE(update.is_updating());
  EXPECT_TRUE(throws<StateError>([&] { task_update_end(update); }, {"not updating"}));
  expect_replay(3.0f);
}

TEST_F(GroupTest, UpdateWithTooFewLaunches) {
  StreamGuard on(update);
  task_update_begin(update, handle);
  ops::scale_out(x, 5.0, y);
  EXPECT_TRUE(throws<StateError>([&] { task_update_end(update); },
                                      {"1 of 2 tasks updated", update.str(), "nothing was installed"}));
  EXPECT_FALSE(update.is_updating());
  expect_replay(3.0f);
}

TEST_F(GroupTest, UpdateWithADifferentKernel) {
  StreamGuard on(update);
  task_update_begin(update, handle);
  EXPECT_TRUE(throws<StateError>([&] { ops::add_out(x, x, y); },
                                      {"launch 1 is kernel 'add'", "task 1", "is kernel 'scale'"}));
  EXPECT_FALSE(update.is_updating());
  expect_replay(3.0f);
}

TEST_F(GroupTest, UpdateWithANonKernelTask) {
  StreamGuard on(update);
  task_update_begin(update, handle);
  ops::scale_out(x, 5.0, y);
  EXPECT_TRUE(throws<StateError>([&] { fill_(z, 0.0); }, {"only kernel launches", "'fill'"}));
  EXPECT_FALSE(update.is_updating());
  ExternalEvent ev;
  task_update_begin(update, handle);
  EXPECT_TRUE(throws<StateError>([&] { ev.record(update); }, {"'external_event_record'"}));
  expect_replay(3.0f);
}

TEST_F(GroupTest, UpdateThatChangesTheShapeIsRefusedByTheKernel) {
  Tensor big = empty({8}, f32), big_out = empty({8}, f32);
  StreamGuard on(update);
  task_update_begin(update, handle);
  EXPECT_TRUE(throws<StateError>([&] { ops::scale_out(big, 2.0, big_out); },
                                      {"cannot replace task 1", "element count changed from 4 to 8"}));
  expect_replay(3.0f);
}

TEST_F(GroupTest, UpdateScopeLeftByAnExceptionAbortsTheUpdate) {
  try {
    StreamGuard on(update);
    UpdateScope u(update, handle);
    ops::scale_out(x, 5.0, y);
    throw std::runtime_error("user error mid-update");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(update.is_updating());
  expect_replay(3.0f);
  task_update_begin(update, handle);  // the handle is free
  task_update_abort(update);
}

TEST_F(GroupTest, UpdateBeforeCaptureEndIsRefused) {
  Graph g2;
  Tensor out = empty({4}, f32);
  Stream s = Stream::create();
  g2.capture_begin(s);
  TaskGroupHandle h2;
  {
    StreamGuard on(s);
    task_group_begin(s);
    ops::scale_out(x, 2.0, out);
    h2 = task_group_end(s);
  }
  EXPECT_TRUE(throws<StateError>([&] { task_update_begin(update, h2); }, {"still capturing", "after capture_end"}));
  g2.capture_end(s);
  task_update_begin(update, h2);
  task_update_abort(update);
}
