// Lifetimes, shutdown and error paths found in review: none may crash, hang or leave state behind.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <memory>
#include <thread>

#include "npugraph/npugraph.hpp"
#include "support/blocked.hpp"
#include "support/diagnostics.hpp"
#include "support/host_tensors.hpp"
#include "support/throws.hpp"
#include "support/wait.hpp"

using namespace npugraph;
using namespace std::chrono_literals;
using ngtest::throws;

TEST(Lifetimes, AStreamWhoseLastReferenceDiesOnItsOwnWorker) {
  std::atomic<int> ran{0};
  {
    Stream s = Stream::create();
    launch_host_func(s, [s, &ran] { ++ran; });  // the task holds a reference; the handle goes away
  }
  EXPECT_TRUE(ngtest::eventually([&] { return ran.load() != 0; }));
  EXPECT_EQ(ran.load(), 1);
}

TEST(Lifetimes, DroppingAStreamRunsItsQueuedWork) {
  std::atomic<int> ran{0};
  std::atomic<bool> held_past_the_drop{false};
  {
    Stream s = Stream::create();
    // The first task holds the queue until the last handle is gone (the weak reference expires as
    // the destructor begins): both tasks are provably still queued when the stream is dropped.
    const std::weak_ptr<detail::StreamState> state = s.impl();
    launch_host_func(s, [&, state] {
      held_past_the_drop = ngtest::eventually([&] { return state.expired(); });
      ++ran;
    });
    launch_host_func(s, [&] { ++ran; });
  }
  EXPECT_TRUE(held_past_the_drop.load());
  EXPECT_EQ(ran.load(), 2);  // the destructor drained the queue
}

TEST(Lifetimes, DestroyingAStreamBlockedInAWaitGivesUpInsteadOfHanging) {
  ngtest::DiagnosticLog log;
  ExternalEvent ev("abandoned");
  // A destructor that waited for the record instead of giving up would hang here (ctest's TIMEOUT
  // fails it); the report says the wait was abandoned, not that it passed its deadline.
  {
    Stream s = Stream::create();
    ev.wait(s);
  }
  ASSERT_FALSE(log.lines().empty());
  EXPECT_NE(log.lines().back().find("'abandoned'"), std::string::npos);
  EXPECT_NE(log.lines().back().find("destroyed while blocked"), std::string::npos);
}

TEST(Lifetimes, CaptureEndDropsTheLastReferenceToABlockedForkStream) {
  ngtest::DiagnosticLog log;
  ExternalEvent ev;
  Tensor t = empty({4}, f32);
  Graph g;
  {
    CaptureScope c(g);
    Stream side = Stream::create();
    ev.wait(side);  // eager work issued before the fork, blocked for good
    // (issued before the stream joins the capture: it is queued, not recorded)
    Event fork;
    fork.record(current_stream());
    side.wait(fork);
    fill_(side, t, 1.0);
    Event join;
    join.record(side);
    current_stream().wait(join);
  }  // the capture held the side stream's last reference
  EXPECT_EQ(g.state(), Graph::State::ready);
  g.replay();
  device_synchronize();
  EXPECT_EQ(t.data_ptr<float>()[0], 1.0f);
}

TEST(Lifetimes, AStreamDestroyedMidUpdateFreesTheHandle) {
  Tensor x = ngtest::f32_tensor({1}), y = empty({1}, f32);
  Graph g;
  TaskGroupHandle h;
  {
    CaptureScope c(g);
    task_group_begin(current_stream());
    ops::scale_out(x, 2.0, y);
    h = task_group_end(current_stream());
  }
  {
    Stream doomed = Stream::create();
    task_update_begin(doomed, h);
  }
  Stream other = Stream::create();
  EXPECT_NO_THROW(task_update_begin(other, h));
  task_update_abort(other);
}

TEST(Lifetimes, EmptyCacheWaitsForQueuedWorkBeforeFreeing) {
  Stream s = Stream::create();
  StreamGuard on(s);
  Tensor y = empty({1 << 16}, f32);
  ngtest::Gate gate;
  {
    Tensor x = empty({1 << 16}, f32);
    fill_(x, 3.0);
    launch_host_func(s, [gate] { gate.wait(); });
    copy_(y, x);  // queued behind the gate; x's block goes to the cache below
  }
  // The queued copy is let go only once empty_cache provably waits for s (Note [Tests without time]).
  bool waited = false;
  std::thread opener([&waited, s, gate] {
    waited = ngtest::eventually([&] { return ngtest::synchronizing(s); });
    gate.open();
  });
  empty_cache();  // must not free x's block under the queued copy (ASan would see it)
  opener.join();
  EXPECT_TRUE(waited) << "empty_cache did not wait for the queued copy";
  s.synchronize();
  EXPECT_EQ(y.data_ptr<float>()[12345], 3.0f);
}

namespace {
struct UpdateFixture {
  Tensor x = ngtest::f32_tensor({1, 2}), y = empty({2}, f32);
  Graph g;
  TaskGroupHandle h;
  Stream u = Stream::create();
  UpdateFixture() {
    CaptureScope c(g);
    task_group_begin(current_stream());
    ops::scale_out(x, 2.0, y);
    h = task_group_end(current_stream());
  }
};
}  // namespace

TEST(UpdateErrors, AnOpArgumentErrorAbandonsTheUpdate) {
  UpdateFixture f;
  StreamGuard on(f.u);
  task_update_begin(f.u, f.h);
  Tensor wrong = empty({3}, f32);
  EXPECT_TRUE(throws<ArgumentError>([&] { ops::scale_out(f.x, 2.0, wrong); }, {"out", "shape"}));
  EXPECT_FALSE(f.u.is_updating());
  EXPECT_NO_THROW(task_update_begin(f.u, f.h));  // the handle is free again
  task_update_abort(f.u);
}

TEST(UpdateErrors, EventsOnAnUpdatingStreamAbandonTheUpdate) {
  UpdateFixture f;
  Event e;
  task_update_begin(f.u, f.h);
  EXPECT_TRUE(throws<StateError>([&] { e.record(f.u); }, {"'event_record'", "nothing was installed"}));
  EXPECT_FALSE(f.u.is_updating());
  EXPECT_TRUE(e.query());  // the rejected record is not waited for
  e.synchronize();
  task_update_begin(f.u, f.h);
  EXPECT_TRUE(throws<StateError>([&] { f.u.wait(e); }, {"'event_wait'"}));  // never recorded, still an error
  EXPECT_FALSE(f.u.is_updating());
}

TEST(UpdateErrors, UpdateEndAfterTheGraphWasResetInstallsNothing) {
  UpdateFixture f;
  StreamGuard on(f.u);
  task_update_begin(f.u, f.h);
  ops::scale_out(f.x, 3.0, f.y);
  f.g.reset();
  EXPECT_TRUE(throws<StateError>([&] { task_update_end(f.u); }, {"stale"}));
  EXPECT_FALSE(f.u.is_updating());
}

TEST(CaptureErrors, TheDefaultStreamCannotJoinACapture) {
  Graph g;
  Stream s = Stream::create();
  g.capture_begin(s);
  Event fork;
  fork.record(s);
  EXPECT_TRUE(throws<StateError>([&] { Stream::default_stream().wait(fork); },
                                      {"default stream", "cannot join a capture"}));
  g.capture_end(s);
}

TEST(EventErrors, SynchronizeOnAnEventBehindAStalledWaitThrows) {
  ngtest::DiagnosticLog log;
  Stream s = Stream::create();
  ExternalEvent ev("stuck");
  ev.set_wait_deadline(20ms);
  ev.wait(s);
  Event e;
  e.record(s);
  EXPECT_TRUE(throws<TimeoutError>([&] { e.synchronize(); }, {"'stuck'", s.str()}));
  ev.record(Stream::create());
  e.synchronize();
}

TEST(ArgumentErrors, OverflowRangeAndNames) {
  EXPECT_TRUE(throws<ArgumentError>([] { empty({1 << 30, 1 << 30, 1 << 30}, f32); }, {"2^48 bytes"}));
  Tensor i = empty({2}, i8);
  EXPECT_TRUE(throws<ArgumentError>([&] { fill_(i, 300.0); }, {"value = 300", "int8"}));
  EXPECT_TRUE(throws<ArgumentError>([&] { fill_(i, std::nan("")); }, {"value = nan"}));
  static const KernelDef nameless{.name = nullptr, .cpu = [](const void*, std::size_t, const ExecContext&) {}};
  const int p = 0;
  EXPECT_TRUE(throws<ArgumentError>([&] { launch(Stream::create(), nameless, p); }, {"kernel.name = null"}));
}
