// Streams and events (docs/semantics.md §1).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <span>
#include <thread>
#include <vector>

#include "npugraph/npugraph.hpp"
#include "support/blocked.hpp"
#include "support/host_tensors.hpp"
#include "support/throws.hpp"
#include "support/wait.hpp"

using namespace npugraph;
using namespace std::chrono_literals;
using ngtest::throws;

TEST(Stream, RunsInIssueOrderAsynchronously) {
  Stream s = Stream::create();
  std::vector<int> order;
  std::atomic<bool> gate{false};
  launch_host_func(s, [&] { while (!gate.load()) std::this_thread::yield(); order.push_back(0); });
  for (int i = 1; i <= 100; ++i) launch_host_func(s, [&order, i] { order.push_back(i); });
  EXPECT_FALSE(s.query());  // blocked behind the gate: the issuing thread did not wait
  gate = true;
  s.synchronize();
  EXPECT_TRUE(s.query());
  ASSERT_EQ(order.size(), 101u);
  for (int i = 0; i <= 100; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
}

TEST(Stream, CurrentStreamAndGuard) {
  Stream s = Stream::create();
  EXPECT_TRUE(current_stream().is_default());
  {
    StreamGuard g(s);
    EXPECT_EQ(current_stream(), s);
  }
  EXPECT_TRUE(current_stream().is_default());
  EXPECT_NE(s.id(), 0u);
  EXPECT_EQ(s.str(), "cpu stream " + std::to_string(s.id()));
}

TEST(Stream, CurrentStreamRefIsTheCurrentStreamWithoutACopy) {
  const Stream s = Stream::create();
  const Stream& current = current_stream_ref();
  EXPECT_EQ(current, current_stream());
  EXPECT_TRUE(current.is_default());
  const long uses = s.impl().use_count();
  {
    StreamGuard g(s);
    EXPECT_EQ(&current_stream_ref(), &current);  // the same slot, now holding s
    EXPECT_EQ(current, s);
    EXPECT_EQ(s.impl().use_count(), uses + 1);  // the slot's reference; the ref added none
  }
  EXPECT_TRUE(current.is_default());
  EXPECT_EQ(s.impl().use_count(), uses);
  set_current_stream(s);
  EXPECT_EQ(current_stream_ref(), s);
  set_current_stream(Stream::default_stream());
  EXPECT_TRUE(current_stream_ref().is_default());
  // Another thread has its own current stream.
  std::thread([&] { EXPECT_NE(&current_stream_ref(), &current); }).join();
}

TEST(Stream, KernelsFillCopyAndAddGiveTheRightValues) {
  Stream s = Stream::create();
  StreamGuard g(s);
  Tensor a = empty({5}, f32), b = empty({5}, f32), c = empty({5}, f32);
  fill_(a, 1.5);
  fill_(b, 2.0);
  ops::add_out(a, b, c);
  Tensor d = ops::scale(c, 2.0);
  Tensor e = empty({5}, f32);
  copy_(e, d);
  s.synchronize();
  EXPECT_EQ(ngtest::values_of(e), std::vector<float>(5, 7.0f));
  Tensor h = zeros({3}, f16);
  s.synchronize();
  EXPECT_EQ(static_cast<float>(h.data_ptr<half>()[2]), 0.0f);
}

TEST(Stream, ATaskErrorSurfacesAtSynchronizeNamingTheTaskAndTheStreamStaysUsable) {
  Stream s = Stream::create();
  launch_host_func(s, [] { throw std::runtime_error("boom"); });
  int after = 0;
  launch_host_func(s, [&] { after = 1; });
  EXPECT_TRUE(throws<TaskError>([&] { s.synchronize(); }, {"host_func", "boom", s.str()}));
  EXPECT_EQ(after, 1);                 // later work still ran
  EXPECT_NO_THROW(s.synchronize());    // the error was reported once
  launch_host_func(s, [&] { after = 2; });
  s.synchronize();
  EXPECT_EQ(after, 2);
}

TEST(Stream, SynchronizeWithTimeoutThrowsWhenWorkDoesNotFinish) {
  Stream s = Stream::create();
  ngtest::Gate gate;  // closed: the work provably does not finish within the timeout
  launch_host_func(s, [gate] { gate.wait(); });
  EXPECT_TRUE(throws<TimeoutError>([&] { s.synchronize(30ms); }, {"timed out after 30 ms", "0 of 1"}));
  gate.open();
  EXPECT_NO_THROW(s.synchronize());
}

TEST(Event, OrdersOneStreamAfterAnother) {
  Stream a = Stream::create(), b = Stream::create();
  ngtest::Gate gate;
  std::atomic<int> seen{-1};
  int value = 0;
  launch_host_func(a, [&, gate] { gate.wait(); value = 42; });
  Event e;
  e.record(a);
  b.wait(e);
  launch_host_func(b, [&] { seen = value; });
  // Once b's worker is blocked on a, b's host function cannot have run (a is held by the gate);
  // a wait that does not hold b lets it run instead (Note [Tests without time]).
  ASSERT_TRUE(ngtest::eventually([&] { return ngtest::blocked_on(b, a) || seen.load() != -1; }));
  EXPECT_EQ(seen.load(), -1);  // b is held by the event
  EXPECT_TRUE(ngtest::blocked_on(b, a));
  EXPECT_FALSE(e.query());
  gate.open();
  b.synchronize();
  EXPECT_EQ(seen.load(), 42);
  EXPECT_TRUE(e.query());
}

TEST(Event, WaitStreamAndSynchronize) {
  Stream a = Stream::create(), b = Stream::create();
  ngtest::Gate gate;
  int value = 0;
  std::atomic<int> seen{-1};
  launch_host_func(a, [&, gate] { gate.wait(); value = 7; });
  b.wait(a);
  launch_host_func(b, [&] { seen = value; });
  // b is provably behind a's held work before a may finish.
  ASSERT_TRUE(ngtest::eventually([&] { return ngtest::blocked_on(b, a) || seen.load() != -1; }));
  EXPECT_EQ(seen.load(), -1);
  gate.open();
  b.synchronize();
  EXPECT_EQ(seen.load(), 7);
  Event e;
  EXPECT_TRUE(e.query());  // never recorded
  e.record(a);
  e.synchronize();
  EXPECT_TRUE(e.query());
}

TEST(Event, ElapsedTime) {
  using clock = std::chrono::steady_clock;
  const auto ms_between = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<float, std::milli>(b - a).count();
  };
  Stream s = Stream::create();
  Event start({.enable_timing = true}), end({.enable_timing = true});
  clock::time_point in, out;  // written by the task, read after the synchronize
  const auto before = clock::now();
  start.record(s);
  // Work that takes a while by its own clock: no bound here is a guess about scheduling, both are
  // measured (Note [Tests without time]).
  launch_host_func(s, [&] {
    in = clock::now();
    while (clock::now() - in < 2ms) std::this_thread::yield();
    out = clock::now();
  });
  end.record(s);
  end.synchronize();
  const auto after = clock::now();
  const float ms = start.elapsed_time(end);
  EXPECT_GE(ms, ms_between(in, out) - 0.01f);       // the interval holds the work between the records
  EXPECT_LE(ms, ms_between(before, after) + 0.01f);  // and lies within what the host saw
  Event plain;
  plain.record(s);
  EXPECT_TRUE(throws<ArgumentError>([&] { start.elapsed_time(plain); }, {"enable_timing"}));
}

TEST(Stream, DeviceSynchronizeWaitsForEveryStream) {
  Stream a = Stream::create(), b = Stream::create();
  std::atomic<int> done{0};
  ngtest::Gate gate_a, gate_b;
  launch_host_func(a, [&, gate_a] { gate_a.wait(); ++done; });
  launch_host_func(b, [&, gate_b] { gate_b.wait(); ++done; });
  // Each stream's work is let go only once device_synchronize provably waits for that stream: one it
  // skipped would still be held when it returns (Note [Tests without time]).
  bool both_waited = false;
  std::thread opener([&, gate_a, gate_b] {
    both_waited = ngtest::eventually([&] {
      if (!gate_a.is_open() && ngtest::synchronizing(a)) gate_a.open();
      if (!gate_b.is_open() && ngtest::synchronizing(b)) gate_b.open();
      return gate_a.is_open() && gate_b.is_open();
    });
    gate_a.open();  // past the deadline: let the streams drain, the test fails below
    gate_b.open();
  });
  device_synchronize();
  EXPECT_EQ(done.load(), 2);
  opener.join();
  EXPECT_TRUE(both_waited);
}

TEST(Stream, BadArguments) {
  Tensor a = empty({4}, f32), b = empty({5}, f32), c = empty({4}, i32);
  EXPECT_TRUE(throws<ArgumentError>([&] { copy_(a, b); }, {"copy_", "f", "4"}));
  EXPECT_TRUE(throws<ArgumentError>([&] { copy_(a, c); }, {"dtype", "int32"}));
  EXPECT_TRUE(throws<ArgumentError>([&] { fill_(c, 0.5); }, {"value = 0.5", "integer"}));
  EXPECT_TRUE(throws<ArgumentError>([&] { ops::add_out(a, b, a); }, {"add", "b", "shape"}));
  EXPECT_TRUE(throws<ArgumentError>([&] { ops::scale(c, 2.0); }, {"scale", "int32"}));
  EXPECT_TRUE(throws<ArgumentError>([] { Stream::create(Device::cpu(), {.num_threads = -1}); },
                                         {"num_threads = -1"}));
}

// launch() with the bytes of a struct as a fixed-extent span (std::as_bytes of a one-element span)
// sends those bytes, not the span object (the struct overload does not take spans).
namespace {

struct SpanProbe {
  float* out;
  float value;
};
void write_probe(const void* params, std::size_t size, const ExecContext&) {
  if (size != sizeof(SpanProbe)) return;
  SpanProbe p;
  std::memcpy(&p, params, sizeof p);
  *p.out = p.value;
}
const KernelDef kSpanProbe{.name = "span_probe", .cpu = &write_probe};

}  // namespace

TEST(Stream, LaunchWithAFixedExtentByteSpanSendsTheBytesItViews) {
  float out = 0;
  const SpanProbe p{&out, 7.0f};
  const auto bytes = std::as_bytes(std::span<const SpanProbe, 1>(&p, 1));
  static_assert(decltype(bytes)::extent == sizeof(SpanProbe));
  launch(current_stream(), kSpanProbe, bytes);
  current_stream().synchronize();
  EXPECT_EQ(out, 7.0f);
  const SpanProbe q{&out, 9.0f};
  launch(current_stream(), kSpanProbe, std::as_bytes(std::span<const SpanProbe, 1>(&q, 1)), TensorUses{});
  current_stream().synchronize();
  EXPECT_EQ(out, 9.0f);
}
