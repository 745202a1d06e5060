// Batched task update (docs/semantics.md §7): many groups in one update, all installed or none.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "npugraph/npugraph.hpp"
#include "support/host_tensors.hpp"
#include "support/throws.hpp"

using namespace npugraph;
using ngtest::throws;

namespace {

// One graph, three groups: g0 { y0 = x * a0 }, g1 { y1 = x * a1; z1 = y1 + x }, g2 { y2 = x * a2 }.
class BatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CaptureScope c(graph);
    Stream s = current_stream();
    task_group_begin(s);
    ops::scale_out(x, 2.0, y0);
    h.push_back(task_group_end(s));
    task_group_begin(s);
    ops::scale_out(x, 3.0, y1);
    ops::add_out(y1, x, z1);
    h.push_back(task_group_end(s));
    task_group_begin(s);
    ops::scale_out(x, 4.0, y2);
    h.push_back(task_group_end(s));
  }

  // Issues the graph's four launches (all three groups) with new factors.
  void issue_all(double a0, double a1, double a2) {
    ops::scale_out(x, a0, y0);
    ops::scale_out(x, a1, y1);
    ops::add_out(y1, x, z1);
    ops::scale_out(x, a2, y2);
  }

  // Replays and checks y0 = a0 * x, z1 = (a1 + 1) * x, y2 = a2 * x (x = 1, 2).
  void expect_replay(float a0, float a1, float a2) {
    update.synchronize();
    graph.replay(replay);
    replay.synchronize();
    for (int i = 0; i < 2; ++i) {
      const float xi = static_cast<float>(i + 1);
      ASSERT_EQ(y0.data_ptr<float>()[i], a0 * xi);
      ASSERT_EQ(z1.data_ptr<float>()[i], (a1 + 1) * xi);
      ASSERT_EQ(y2.data_ptr<float>()[i], a2 * xi);
    }
  }

  Tensor x = ngtest::f32_tensor({1, 2});
  Tensor y0 = empty({2}, f32), y1 = empty({2}, f32), z1 = empty({2}, f32), y2 = empty({2}, f32);
  Graph graph;
  std::vector<TaskGroupHandle> h;
  Stream update = Stream::create();
  Stream replay = Stream::create();
};

}  // namespace

TEST_F(BatchTest, OneUpdateInstallsEveryGroup) {
  expect_replay(2, 3, 4);
  for (UpdateOrder order : {UpdateOrder::stream, UpdateOrder::launch}) {
    const double base = order == UpdateOrder::stream ? 10 : 20;
    StreamGuard on(update);
    task_update_begin(update, h, order);
    issue_all(base + 1, base + 2, base + 3);
    task_update_end(update);
    expect_replay(static_cast<float>(base + 1), static_cast<float>(base + 2), static_cast<float>(base + 3));
  }
}

TEST_F(BatchTest, HandlesBindInTheOrderGivenAndOthersKeepTheirParameters) {
  {
    StreamGuard on(update);
    const TaskGroupHandle some[] = {h[2], h[0]};
    UpdateScope u(update, some);
    ops::scale_out(x, 7.0, y2);
    ops::scale_out(x, 5.0, y0);
  }
  expect_replay(5, 3, 7);
}

TEST_F(BatchTest, ABadLaunchInOneGroupInstallsNone) {
  StreamGuard on(update);
  task_update_begin(update, h);
  ops::scale_out(x, 11.0, y0);  // group 0: fine
  ops::scale_out(x, 12.0, y1);
  EXPECT_TRUE(throws<StateError>([&] { ops::scale_out(x, 1.0, z1); },
                                      {"launch 3 is kernel 'scale'", "task 2 of group 1", "is kernel 'add'",
                                       "nothing was installed"}));
  EXPECT_FALSE(update.is_updating());
  expect_replay(2, 3, 4);  // group 0 too kept its parameters
  task_update_begin(update, h);  // every group is free again
  task_update_abort(update);
}

TEST_F(BatchTest, TooFewLaunchesNameTheFirstIncompleteGroup) {
  StreamGuard on(update);
  task_update_begin(update, h);
  ops::scale_out(x, 11.0, y0);
  ops::scale_out(x, 12.0, y1);
  EXPECT_TRUE(throws<StateError>([&] { task_update_end(update); },
                                      {"1 of 2 tasks updated", "group 1 of graph", "nothing was installed"}));
  EXPECT_FALSE(update.is_updating());
  expect_replay(2, 3, 4);
}

TEST_F(BatchTest, TooManyLaunchesCountAllGroups) {
  StreamGuard on(update);
  task_update_begin(update, h);
  issue_all(1.0, 1.0, 1.0);
  EXPECT_TRUE(throws<StateError>([&] { ops::scale_out(x, 1.0, y2); },
                                      {"launch 5 ('scale')", "one more than the 4 task(s) of the 3 groups",
                                       "nothing was installed"}));
  expect_replay(2, 3, 4);
}

TEST_F(BatchTest, BadHandleListsAreArgumentErrors) {
  const std::vector<TaskGroupHandle> none;
  EXPECT_TRUE(throws<ArgumentError>([&] { task_update_begin(update, none); }, {"handles is empty"}));
  const TaskGroupHandle with_undefined[] = {h[0], TaskGroupHandle()};
  EXPECT_TRUE(throws<ArgumentError>([&] { task_update_begin(update, with_undefined); },
                                         {"handles[1] is undefined"}));
  const TaskGroupHandle twice[] = {h[0], h[1], h[0]};
  EXPECT_TRUE(throws<ArgumentError>([&] { task_update_begin(update, twice); },
                                         {"handles[2] names group 0 of graph", "as handles[0] does"}));
  EXPECT_FALSE(update.is_updating());
  task_update_begin(update, h);  // nothing was left marked busy
  task_update_abort(update);
  EXPECT_TRUE(throws<ArgumentError>(
      [&] { task_update_begin(update, h[0], static_cast<UpdateOrder>(7)); },
      {"order = 7", "UpdateOrder::stream or UpdateOrder::launch"}));
}

TEST_F(BatchTest, AGroupBusyElsewhereFailsTheBatchAndFreesTheOthers) {
  Stream other = Stream::create();
  task_update_begin(other, h[1]);
  EXPECT_TRUE(throws<StateError>([&] { task_update_begin(update, h); },
                                      {"group 1 of graph", "already being updated on " + other.str()}));
  EXPECT_FALSE(update.is_updating());
  task_update_abort(other);
  task_update_begin(update, h);
  task_update_abort(update);
}

TEST_F(BatchTest, ABatchMaySpanGraphs) {
  Graph second;
  Tensor w = empty({2}, f32);
  TaskGroupHandle hw;
  {
    CaptureScope c(second);
    Stream s = current_stream();
    task_group_begin(s);
    ops::scale_out(x, 1.0, w);
    hw = task_group_end(s);
  }
  for (UpdateOrder order : {UpdateOrder::stream, UpdateOrder::launch}) {
    const double a = order == UpdateOrder::stream ? 6.0 : 8.0;
    StreamGuard on(update);
    const TaskGroupHandle both[] = {h[0], hw};
    task_update_begin(update, both, order);
    ops::scale_out(x, a, y0);
    ops::scale_out(x, a + 1, w);
    task_update_end(update);
    update.synchronize();
    second.replay(replay);
    expect_replay(static_cast<float>(a), 3, 4);
    EXPECT_EQ(w.data_ptr<float>()[1], 2 * (a + 1));
  }
}

TEST_F(BatchTest, AResetGraphFailsTheWholeBatchAtEnd) {
  StreamGuard on(update);
  task_update_begin(update, h);
  issue_all(1.0, 1.0, 1.0);
  graph.reset();
  EXPECT_TRUE(throws<StateError>([&] { task_update_end(update); }, {"stale", "nothing was installed"}));
  EXPECT_FALSE(update.is_updating());
}

// Note [Update binding]: an update is bound, ended and aborted by the thread that began it; other
// threads are refused without disturbing it.
TEST_F(BatchTest, OtherThreadsCannotTouchAnOpenUpdate) {
  StreamGuard on(update);
  task_update_begin(update, h[0]);
  std::thread other([&] {
    StreamGuard there(update);
    EXPECT_TRUE(throws<StateError>([&] { ops::scale_out(x, 9.0, y0); },
                                        {"is being updated by another thread", "the thread that began it"}));
    EXPECT_TRUE(throws<StateError>([&] { task_update_end(update); }, {"task_update_end", "another thread"}));
    EXPECT_TRUE(throws<StateError>([&] { task_update_abort(update); }, {"another thread"}));
    EXPECT_TRUE(throws<StateError>([&] { task_update_begin(update, h[1]); }, {"another thread"}));
  });
  other.join();
  EXPECT_TRUE(update.is_updating());
  ops::scale_out(x, 6.0, y0);
  task_update_end(update);
  expect_replay(6, 3, 4);
}
