// ExternalEvent (docs/semantics.md §2): binary signal, consuming wait, collapsed records, stall diagnostics.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "npugraph/npugraph.hpp"
#include "support/blocked.hpp"
#include "support/diagnostics.hpp"
#include "support/throws.hpp"
#include "support/wait.hpp"

using namespace npugraph;
using namespace std::chrono_literals;
using ngtest::throws;

TEST(ExternalEvent, WaitBlocksUntilRecord) {
  Stream waiter = Stream::create(), recorder = Stream::create();
  ExternalEvent ev("ready");
  std::atomic<bool> ran{false};
  ev.wait(waiter);
  launch_host_func(waiter, [&] { ran = true; });
  // Once the worker is blocked in the wait, the host function behind it cannot have run; a wait
  // that does not block lets it run instead (Note [Tests without time]).
  ASSERT_TRUE(ngtest::eventually([&] { return ngtest::blocked_waits(ev) == 1 || ran.load(); }));
  EXPECT_FALSE(ran.load());
  EXPECT_EQ(ngtest::blocked_waits(ev), 1);
  ev.record(recorder);
  waiter.synchronize();
  EXPECT_TRUE(ran.load());
  EXPECT_FALSE(ev.is_set());  // the wait consumed it
}

TEST(ExternalEvent, AWaitConsumesTheSignal) {
  Stream s = Stream::create(), other = Stream::create();
  ExternalEvent ev;
  ev.record(s);
  s.synchronize();
  EXPECT_TRUE(ev.is_set());
  ev.wait(s);
  s.synchronize();
  EXPECT_FALSE(ev.is_set());
  // A second wait needs a second record.
  std::atomic<bool> ran{false};
  ev.wait(s);
  launch_host_func(s, [&] { ran = true; });
  ASSERT_TRUE(ngtest::eventually([&] { return ngtest::blocked_waits(ev) == 1 || ran.load(); }));
  EXPECT_FALSE(ran.load());
  EXPECT_EQ(ngtest::blocked_waits(ev), 1);
  ev.record(other);
  s.synchronize();
  EXPECT_TRUE(ran.load());
}

TEST(ExternalEvent, ResetClearsTheSignal) {
  Stream s = Stream::create();
  ExternalEvent ev;
  ev.record(s);
  ev.reset(s);
  s.synchronize();
  EXPECT_FALSE(ev.is_set());
}

TEST(ExternalEvent, ACollapsedRecordIsCountedAndReported) {
  ngtest::DiagnosticLog log;
  Stream s = Stream::create();
  ExternalEvent ev("kv_ready");
  ev.record(s);
  ev.record(s);  // the second record finds the signal set: one signal for two records
  s.synchronize();
  EXPECT_EQ(ev.collapsed_records(), 1u);
  ASSERT_EQ(log.lines().size(), 1u);
  EXPECT_NE(log.lines()[0].find("'kv_ready'"), std::string::npos);
  EXPECT_NE(log.lines()[0].find("collapsed"), std::string::npos);
}

TEST(ExternalEvent, AWaitPastItsDeadlineMakesSynchronizeThrowNamingTheEvent) {
  ngtest::DiagnosticLog log;
  Stream s = Stream::create(), other = Stream::create();
  ExternalEvent ev("never_recorded");
  ev.set_wait_deadline(30ms);
  ev.wait(s);
  EXPECT_TRUE(throws<TimeoutError>([&] { s.synchronize(2000ms); },
                                        {"'never_recorded'", "30 ms deadline", s.str()}));
  // The error cancelled the wait (Note [Stalls]): nothing is left to wait for, no hang.
  EXPECT_NO_THROW(s.synchronize(2000ms));
  ASSERT_FALSE(log.lines().empty());
  EXPECT_NE(log.lines()[0].find("never_recorded"), std::string::npos);
  // The stream stays usable, and the cancelled wait does not consume a later record.
  ev.record(other);
  other.synchronize();
  EXPECT_TRUE(ev.is_set());
  EXPECT_NO_THROW(s.synchronize());
  int x = 0;
  launch_host_func(s, [&] { x = 1; });
  s.synchronize();
  EXPECT_EQ(x, 1);
}

TEST(ExternalEvent, AStalledWaitInsideAGraphNamesTheGraphTask) {
  ngtest::DiagnosticLog log;
  ExternalEvent ev("graph_gate");
  ev.set_wait_deadline(20ms);
  Graph g;
  {
    CaptureScope c(g);
    ev.wait(current_stream());
    Tensor t = zeros({4}, f32);
  }
  Stream s = Stream::create();
  g.replay(s);
  EXPECT_TRUE(throws<TimeoutError>([&] { s.synchronize(2000ms); },
                                        {"'graph_gate'", "graph " + std::to_string(g.id()), "task #0"}));
  ev.record(Stream::create());
  EXPECT_NO_THROW(s.synchronize());
}

TEST(ExternalEvent, DeadlineDefaultIsTenSecondsAndValidated) {
  EXPECT_EQ(default_external_wait_deadline(), 10000ms);
  ExternalEvent ev;
  EXPECT_EQ(ev.wait_deadline(), 10000ms);
  EXPECT_TRUE(throws<ArgumentError>([&] { ev.set_wait_deadline(-1ms); }, {"deadline = -1", ">= 0"}));
}
