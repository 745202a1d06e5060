// Stalled waits (Note [Stalls]): every synchronize that depends on a stalled stream raises instead of
// blocking; the stall is cancelled so that the next correct step works; deadlines never overflow.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <limits>

#include "npugraph/npugraph.hpp"
#include "support/bitwise.hpp"
#include "support/diagnostics.hpp"
#include "support/host_tensors.hpp"
#include "support/throws.hpp"
#include "support/wait.hpp"

namespace {

namespace ng = npugraph;
using namespace std::chrono_literals;
using ngtest::throws;

// device_synchronize covers every live stream: errors other tests left on theirs (a shuffled run)
// are collected first, so what these tests expect of it is about their own streams.
void drain_device() {
  for (int i = 0; i < 16; ++i) {
    try {
      ng::device_synchronize();
      return;
    } catch (const ng::Error&) {
    }
  }
}

// b is stalled in an ExternalEvent wait; a waits on b (wait_stream). a's synchronize and
// device_synchronize used to block forever; each now raises naming the event and the stalled stream.
TEST(Stalls, ASynchronizeThroughWaitStreamRaisesNamingTheEventAndTheStalledStream) {
  ngtest::DiagnosticLog log;
  drain_device();
  const ng::Stream a = ng::Stream::create(), b = ng::Stream::create();
  ng::ExternalEvent ev("b_gate");
  ev.set_wait_deadline(100ms);
  ev.wait(b);
  a.wait(b);
  std::atomic<int> after_a{0};
  ng::launch_host_func(a, [&] { ++after_a; });
  EXPECT_TRUE(throws<ng::TimeoutError>([&] { a.synchronize(5000ms); },
                                            {a.str(), "'b_gate'", b.str(), "100 ms deadline"}));
  // The stall was cancelled by a's synchronize: b reports it at its own, once; a's work went on.
  EXPECT_TRUE(throws<ng::TimeoutError>([&] { b.synchronize(5000ms); }, {b.str(), "'b_gate'"}));
  EXPECT_NO_THROW(a.synchronize(5000ms));
  EXPECT_EQ(after_a.load(), 1);
  EXPECT_NO_THROW(ng::device_synchronize());
}

// The order: b's synchronize raises first (cancelling the stall); a waited on an event b
// recorded behind the stalled wait, so a's synchronize raises too, and so does device_synchronize
// when it is the first to look.
TEST(Stalls, WorkThatWaitedOnACancelledStallReportsItToo) {
  ngtest::DiagnosticLog log;
  drain_device();
  const ng::Stream a = ng::Stream::create(), b = ng::Stream::create();
  ng::ExternalEvent ev("b_gate");
  ev.set_wait_deadline(100ms);
  ev.wait(b);
  a.wait(b);
  EXPECT_TRUE(throws<ng::TimeoutError>([&] { b.synchronize(5000ms); }, {"'b_gate'", "100 ms deadline"}));
  EXPECT_TRUE(throws<ng::TimeoutError>([&] { a.synchronize(5000ms); }, {a.str(), b.str(), "'b_gate'"}));
  EXPECT_NO_THROW(a.synchronize());
  // Once more, with device_synchronize as the only call: it raises, then everything is clean.
  ev.wait(b);
  a.wait(b);
  EXPECT_TRUE(throws<ng::TimeoutError>([] { ng::device_synchronize(); }, {"'b_gate'"}));
  try {
    ng::device_synchronize();  // the other stream's share of the same stall, at most once
  } catch (const ng::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("'b_gate'"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(ng::device_synchronize());
  // Work issued after the cancel is not affected.
  a.wait(b);
  EXPECT_NO_THROW(a.synchronize());
}

TEST(Stalls, EventSynchronizeOnAStalledRecorderRaises) {
  ngtest::DiagnosticLog log;
  const ng::Stream b = ng::Stream::create();
  ng::ExternalEvent ev("recorder_gate");
  ev.set_wait_deadline(50ms);
  ev.wait(b);
  ng::Event done;
  done.record(b);
  EXPECT_TRUE(throws<ng::TimeoutError>([&] { done.synchronize(); },
                                            {"Event::synchronize", b.str(), "'recorder_gate'"}));
  EXPECT_TRUE(throws<ng::TimeoutError>([&] { b.synchronize(); }, {"'recorder_gate'"}));
  EXPECT_NO_THROW(done.synchronize());
}

// The seed's pattern with a forgotten record: capture `wait; reset; group(fia.out)`, replay without
// a record -> TimeoutError. The stuck wait used to stay behind and consume the next record, so the
// correct next step (update, record, replay) timed out again. Now the stalled replay is cancelled
// and the next correct step gives the eager result.
TEST(Stalls, AfterAForgottenRecordTheNextCorrectStepGivesTheRightResult) {
  ngtest::DiagnosticLog log;
  std::vector<double> x;
  const ng::Tensor q = ngtest::random_tensor(x, {1, 4, 1, 32}, ng::f16, 21);
  const ng::Tensor k = ngtest::random_tensor(x, {1, 4, 64, 32}, ng::f16, 22);
  const ng::Tensor v = ngtest::random_tensor(x, {1, 4, 64, 32}, ng::f16, 23);
  ng::ops::FiaOptions opt{.actual_seq_lengths_kv = {29}, .num_heads = 4, .scale = 0.2,
                          .input_layout = "BNSD"};
  ng::ExternalEvent event("step_ready");
  event.set_wait_deadline(100ms);
  ng::Graph g;
  ng::TaskGroupHandle handle;
  ng::Tensor ws, out, lse;
  {
    ng::CaptureScope capture(g);
    const ng::Stream s = ng::current_stream();
    ws = ng::ops::fia_max_workspace(q, k, v, opt);
    out = ngtest::filled_tensor({1, 4, 1, 32}, ng::f16, 0);
    lse = ng::empty({1}, ng::f32);
    event.wait(s);
    event.reset(s);
    ng::task_group_begin(s);
    ng::ops::fused_infer_attention_score_out(q, k, v, opt, ws, out, lse);
    handle = ng::task_group_end(s);
  }
  const ng::Stream s = ng::Stream::create(), update_stream = ng::Stream::create();
  auto step = [&](std::int64_t len, bool record) {
    opt.actual_seq_lengths_kv = {len};
    {
      ng::StreamGuard on(update_stream);
      ng::UpdateScope update(update_stream, handle);
      ng::ops::fused_infer_attention_score_out(q, k, v, opt, ws, out, lse);
    }
    if (record) event.record(update_stream);
    g.replay(s);
  };
  auto eager = [&](std::int64_t len) {
    ng::ops::FiaOptions o = opt;
    o.actual_seq_lengths_kv = {len};
    const ng::Tensor r = ng::ops::fused_infer_attention_score(q, k, v, o).attention_out;
    ng::device_synchronize();
    return r;
  };
  step(40, /*record=*/true);
  s.synchronize();
  EXPECT_TRUE(ngtest::bitwise_equal(out, eager(40)));
  step(50, /*record=*/false);  // forgotten
  EXPECT_TRUE(throws<ng::TimeoutError>([&] { s.synchronize(5000ms); },
                                            {"'step_ready'", "graph " + std::to_string(g.id()), "cancelled"}));
  EXPECT_TRUE(ngtest::bitwise_equal(out, eager(40)));  // the cancelled replay wrote nothing
  EXPECT_FALSE(event.is_set());
  for (std::int64_t len : {60, 17, 64}) {
    step(len, /*record=*/true);
    EXPECT_NO_THROW(s.synchronize(5000ms));
    EXPECT_TRUE(ngtest::bitwise_equal(out, eager(len))) << len;
    EXPECT_FALSE(event.is_set());
  }
}

// Deadlines far past the clock's range used to overflow in the ms -> ns comparison and fire after
// ~20 ms; now they mean "never".
// The fuzzer's first open finding (tests/fuzz/regressions, fixed): b waits for e's record on a,
// which sits behind a stalled ExternalEvent wait; then e is recorded again on c, which waits on b.
// b's blocked_on edge must name a (the stream of the record b needs), not c (e's latest
// recorder): through c the search met b again and found no stall, so b.synchronize() blocked
// until its own timeout and device_synchronize() forever.
TEST(Stalls, AWaitIsBlockedOnTheStreamOfTheRecordItNeedsNotTheLatestRecorder) {
  ngtest::DiagnosticLog log;
  drain_device();
  const ng::Stream a = ng::Stream::create(), b = ng::Stream::create(), c = ng::Stream::create();
  ng::ExternalEvent gate("a_gate");
  gate.set_wait_deadline(50ms);
  ng::Event e, f;
  gate.wait(a);
  e.record(a);  // record 1: behind the stalled wait
  ngtest::Gate re_recorded;
  ng::launch_host_func(b, [re_recorded] { re_recorded.wait(); });  // b blocks after the re-record
  b.wait(e);    // b needs record 1
  f.record(b);
  c.wait(f);    // c is blocked on b
  e.record(c);  // record 2, on c: e's latest recorder
  re_recorded.open();
  EXPECT_TRUE(throws<ng::TimeoutError>([&] { b.synchronize(5000ms); },
                                       {b.str(), "synchronize gave up", a.str(), "'a_gate'"}));
  drain_device();  // the cancel lets a, b and c run on; their reports are collected here
  EXPECT_NO_THROW(c.synchronize(5000ms));
}

TEST(Stalls, HugeDeadlinesNeverFireAndLongTimeoutsDoNotOverflow) {
  ngtest::DiagnosticLog log;
  const ng::Stream s = ng::Stream::create();
  ng::ExternalEvent ev("patient");
  ev.set_wait_deadline(std::chrono::milliseconds::max());
  EXPECT_EQ(ev.wait_deadline(), std::chrono::milliseconds::max());
  ev.wait(s);
  // Not a stall: the plain timeout of this synchronize.
  EXPECT_TRUE(throws<ng::TimeoutError>([&] { s.synchronize(150ms); }, {"timed out after 150 ms"}));
  EXPECT_TRUE(log.lines().empty()) << log.lines().front();
  ev.record(ng::Stream::create());
  EXPECT_NO_THROW(s.synchronize(std::chrono::milliseconds::max()));
  ng::set_default_external_wait_deadline(std::chrono::milliseconds::max());
  EXPECT_EQ(ng::default_external_wait_deadline(), std::chrono::milliseconds::max());
  ng::set_default_external_wait_deadline(10000ms);
}

}  // namespace
