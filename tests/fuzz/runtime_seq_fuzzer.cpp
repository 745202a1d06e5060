// libFuzzer harness for runtime call sequences: the input is a program over two streams, two graphs,
// four task-group handles, two ExternalEvents and two Events, run on one thread. Each instruction is
// one opcode byte plus operand bytes: capture_begin/end (every mode, private or shared pools),
// CaptureScope / TaskGroupScope / UpdateScope around the next few instructions (left normally or by
// an exception), task_group_begin/end, small kernel launches (scale, add), fill/copy, host functions
// (some throw), task_update_begin/bind/end/abort (UpdateOrder::stream and ::launch, single and
// batched, end with record_after), replay, reset, graph destruction, ExternalEvent record / wait /
// reset / record_events / deadlines, Event record / wait / query / synchronize / elapsed_time,
// stream-on-stream waits, synchronize (with and without a timeout), device_synchronize, explicit
// GraphDefs, stream replacement (the old one dropped with whatever it holds) and allocations inside
// captures.
//
// Findings: a crash or sanitizer report; an exception that is not an npugraph::Error, or an
// InternalError; a stream left capturing or updating after the teardown; a hang (libFuzzer's
// -timeout): every wait is bounded (ExternalEvent deadlines of 0-3 ms, so a synchronize that
// depends on a stalled wait must throw instead of blocking) and the teardown drains every stream
// within a few seconds or reports it.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fuzz_input.hpp"
#include "npugraph/npugraph.hpp"

namespace {

namespace ng = npugraph;
using namespace std::chrono_literals;
using ng::Stream;
using ng::Tensor;
using ngfuzz::Input;
using ngfuzz::guarded;

constexpr int kMaxOps = 96;
constexpr int kMaxBlockingSyncs = 2;  // synchronize calls that may wait for a stall deadline, per input
constexpr std::size_t kMaxPoolTensors = 8;

std::atomic<std::uint64_t> g_host_calls{0};
std::atomic<std::uint64_t> g_inputs{0};

// Ops issue on the current stream: make `s` current for the call.
template <class F>
void on(const Stream& s, F&& f) {
  ng::StreamGuard guard(s);
  f();
}

// Two streams kept across inputs (creating and joining a worker costs ~1 ms under ASan); every
// input leaves them drained and in normal mode (the teardown checks it).
Stream& base_stream(int i) {
  static Stream s[2] = {Stream::create(), Stream::create()};
  return s[i];
}

struct World {
  // Tensors first: they are destroyed last, after every stream has drained.
  std::vector<Tensor> fixed;  // exact-size host buffers: f32 [8] x 3, f32 [4]
  std::vector<Tensor> pool;   // allocated by the program (inside captures: graph pools)
  Stream streams[2] = {base_stream(0), base_stream(1)};
  std::vector<Stream> all;  // every stream the program used (teardown drains them)
  ng::Graph graphs[2];
  Stream capture_stream[2] = {streams[0], streams[0]};  // where each graph's capture began
  ng::TaskGroupHandle handles[4];
  // Named after the input that made them (a diagnostic naming an older input's event points at
  // state that outlived its input).
  std::uint64_t serial = g_inputs.fetch_add(1) + 1;
  ng::ExternalEvent ext[2] = {ng::ExternalEvent("fuzz_ext0_input" + std::to_string(serial)),
                              ng::ExternalEvent("fuzz_ext1_input" + std::to_string(serial))};
  ng::Event events[2] = {ng::Event({.enable_timing = true}), ng::Event({.enable_timing = true})};
  ng::PoolHandle shared_pool;
  int blocking_syncs = 0;

  World() {
    for (int i = 0; i < 3; ++i) fixed.push_back(ngfuzz::exact_tensor({8}, ng::f32));
    fixed.push_back(ngfuzz::exact_tensor({4}, ng::f32));
    for (auto& e : ext) e.set_wait_deadline(1ms);
    all.assign(std::begin(streams), std::end(streams));
  }

  // 0, 1: the two streams; 2: the current stream (a CaptureScope's side stream inside one).
  Stream stream(Input& in) {
    const int i = in.u8() % 3;
    if (i < 2) return streams[i];
    Stream s = ng::current_stream();
    remember(s);
    return s;
  }
  void remember(const Stream& s) {
    if (s.is_default()) ngfuzz::finding("the program reached the default stream");
    for (const Stream& t : all)
      if (t == s) return;
    all.push_back(s);
  }
  const Tensor& tensor(Input& in) {
    const std::size_t n = fixed.size() + pool.size();
    const std::size_t i = in.u8() % n;
    return i < fixed.size() ? fixed[i] : pool[i - fixed.size()];
  }
  ng::Graph& graph(Input& in, int* index = nullptr) {
    const int i = in.u8() & 1;
    if (index) *index = i;
    return graphs[i];
  }
  ng::TaskGroupHandle& handle(Input& in) { return handles[in.u8() % 4]; }
  ng::ExternalEvent& external(Input& in) { return ext[in.u8() & 1]; }
  ng::Event& event(Input& in) { return events[in.u8() & 1]; }
};

ng::CaptureOptions capture_options(World& w, Input& in) {
  ng::CaptureOptions o;
  static constexpr ng::CaptureMode kModes[] = {ng::CaptureMode::global, ng::CaptureMode::thread_local_,
                                              ng::CaptureMode::relaxed, ng::CaptureMode::global};
  o.mode = in.pick(kModes);
  switch (in.u8() % 4) {
    case 1:
      if (!w.shared_pool.defined()) w.shared_pool = ng::graph_pool_handle();
      o.pool = w.shared_pool;
      break;
    case 2: o.pool = w.graphs[in.u8() & 1].pool(); break;  // another graph's (maybe undefined)
    default: break;
  }
  return o;
}

void run_ops(World& w, Input& in, int& budget, int depth, bool propagate);

// Runs the next few instructions inside a scope; with `propagate`, the first error leaves the scope
// by an exception (the scope must abandon what it holds).
void nested(World& w, Input& in, int& budget, int depth) {
  const bool propagate = in.chance(64);
  run_ops(w, in, budget, depth + 1, propagate);
}

void host_task(const Stream& s, int kind) {
  switch (kind) {
    case 0: ng::launch_host_func(s, [] { g_host_calls.fetch_add(1, std::memory_order_relaxed); }); break;
    case 1: ng::launch_host_func(s, [] { throw ng::ArgumentError("fuzz host function error"); }); break;
    case 2: ng::launch_host_func(s, [] { throw std::runtime_error("fuzz host function std error"); }); break;
    // A slow task, so that later operations meet queued work: jitter, never followed by a check
    // that something did not happen (Note [Tests without time], tests/support/wait.hpp).
    default: ng::launch_host_func(s, [] { std::this_thread::sleep_for(50us); }); break;
  }
}

void one_op(World& w, Input& in, int& budget, int depth) {
  const std::uint8_t op = in.u8() % 40;
  if (ngfuzz::verbose()) std::fprintf(stderr, "%*sop %d\n", 2 * depth, "", op);
  switch (op) {
    case 0: {  // capture_begin
      int gi = 0;
      ng::Graph& g = w.graph(in, &gi);
      const Stream s = w.stream(in);
      const auto o = capture_options(w, in);
      g.capture_begin(s, o);
      w.capture_stream[gi] = s;
      break;
    }
    case 1: {  // capture_end (on any stream: the wrong one is an error)
      int gi = 0;
      ng::Graph& g = w.graph(in, &gi);
      const Stream s = in.chance(200) ? w.capture_stream[gi] : w.stream(in);
      g.capture_end(s);
      break;
    }
    case 2: ng::task_group_begin(w.stream(in)); break;
    case 3: {
      const Stream s = w.stream(in);
      ng::TaskGroupHandle& h = w.handle(in);
      h = ng::task_group_end(s);
      break;
    }
    case 4: case 5: {  // scale
      const Stream s = w.stream(in);
      const Tensor& x = w.tensor(in);
      const Tensor& y = w.tensor(in);
      const double alpha = static_cast<double>(static_cast<std::int8_t>(in.u8())) / 8.0;
      on(s, [&] { ng::ops::scale_out(x, alpha, y); });
      break;
    }
    case 6: {  // add
      const Stream s = w.stream(in);
      const Tensor& a = w.tensor(in);
      const Tensor& b = w.tensor(in);
      const Tensor& c = w.tensor(in);
      on(s, [&] { ng::ops::add_out(a, b, c); });
      break;
    }
    case 7: {
      const Stream s = w.stream(in);
      ng::fill_(s, w.tensor(in), static_cast<double>(in.u8()));
      break;
    }
    case 8: {
      const Stream s = w.stream(in);
      const Tensor& dst = w.tensor(in);
      ng::copy_(s, dst, w.tensor(in));
      break;
    }
    case 9: {
      const Stream s = w.stream(in);
      host_task(s, in.chance(40) ? 1 + in.u8() % 3 : 0);
      break;
    }
    case 10: case 11: {  // task_update_begin, single or batched
      const Stream s = w.stream(in);
      const auto order = in.flag() ? ng::UpdateOrder::launch : ng::UpdateOrder::stream;
      if (in.chance(48)) {
        const ng::TaskGroupHandle hs[2] = {w.handle(in), w.handle(in)};
        ng::task_update_begin(s, std::span<const ng::TaskGroupHandle>(hs, 2), order);
      } else {
        ng::task_update_begin(s, w.handle(in), order);
      }
      break;
    }
    case 12: {
      const Stream s = w.stream(in);
      if (in.chance(64)) {
        const ng::ExternalEvent es[1] = {w.external(in)};
        ng::task_update_end(s, es);
      } else {
        ng::task_update_end(s);
      }
      break;
    }
    case 13: ng::task_update_abort(w.stream(in)); break;
    case 14: case 15: {
      const ng::Graph& g = w.graph(in);
      const Stream s = w.stream(in);
      if (ngfuzz::verbose())
        std::fprintf(stderr, "%*sreplay graph %llu (%d tasks) on %s%s\n", 2 * depth, "",
                     static_cast<unsigned long long>(g.id()), static_cast<int>(g.num_tasks()),
                     s.str().c_str(), s.is_capturing() ? " (capturing)" : "");
      g.replay(s);
      break;
    }
    case 16: w.graph(in).reset(); break;
    case 17: { const Stream s = w.stream(in); w.external(in).record(s); break; }
    case 18: { const Stream s = w.stream(in); w.external(in).wait(s); break; }
    case 19: { const Stream s = w.stream(in); w.external(in).reset(s); break; }
    case 20: { const Stream s = w.stream(in); w.event(in).record(s); break; }
    case 21: {
      const Stream s = w.stream(in);
      if (in.flag()) s.wait(w.event(in));
      else s.wait(w.stream(in));
      break;
    }
    case 22: {  // synchronize, bounded by a timeout or (rarely) by the stall deadline alone
      const Stream s = w.stream(in);
      if (in.chance(32) && w.blocking_syncs < kMaxBlockingSyncs) {
        ++w.blocking_syncs;
        s.synchronize();
      } else {
        s.synchronize(std::chrono::milliseconds(in.u8() % 8));
      }
      break;
    }
    case 23:
      if (w.blocking_syncs < kMaxBlockingSyncs) {
        ++w.blocking_syncs;
        ng::device_synchronize();
      }
      break;
    case 24: {  // queries
      switch (in.u8() % 8) {
        case 0: (void)w.stream(in).query(); break;
        case 1: (void)w.event(in).query(); break;
        case 2:
          if (w.blocking_syncs < kMaxBlockingSyncs) {
            ++w.blocking_syncs;
            w.event(in).synchronize();
          }
          break;
        case 3: (void)w.events[0].elapsed_time(w.events[1]); break;
        case 4: { auto& e = w.external(in); (void)e.is_set(); (void)e.collapsed_records(); break; }
        case 5: { auto& g = w.graph(in); (void)g.state(); (void)g.num_tasks(); (void)g.dot(); (void)g.pool(); break; }
        case 6: { auto& h = w.handle(in); if (h.defined()) { (void)h.valid(); (void)h.num_tasks(); (void)h.graph_id(); } break; }
        default: { auto& g = w.graph(in); (void)g.exec().size(); (void)g.exec().dot(); break; }
      }
      break;
    }
    case 25: ng::set_current_stream(w.streams[in.u8() & 1]); break;
    case 26: {  // CaptureScope around the next instructions
      if (depth >= 2) break;
      ng::Graph& g = w.graph(in);
      const auto o = capture_options(w, in);
      if (in.chance(24)) {  // the per-thread side stream
        ng::CaptureScope scope(g, o);
        w.remember(scope.stream());
        nested(w, in, budget, depth);
      } else {
        const Stream& cs = w.streams[in.u8() & 1];
        if (ngfuzz::verbose())
          std::fprintf(stderr, "%*sCaptureScope graph %llu on %s\n", 2 * depth, "",
                       static_cast<unsigned long long>(g.id()), cs.str().c_str());
        ng::CaptureScope scope(g, cs, o);
        nested(w, in, budget, depth);
        if (in.chance(64)) scope.end();
      }
      break;
    }
    case 27: {  // TaskGroupScope
      if (depth >= 2) break;
      const Stream s = w.stream(in);
      ng::TaskGroupHandle& h = w.handle(in);
      ng::TaskGroupScope scope(s);
      nested(w, in, budget, depth);
      if (!in.chance(32)) h = scope.end();
      break;
    }
    case 28: {  // UpdateScope
      if (depth >= 2) break;
      const Stream s = w.stream(in);
      const auto order = in.flag() ? ng::UpdateOrder::launch : ng::UpdateOrder::stream;
      ng::UpdateScope scope(s, w.handle(in), order);
      {
        ng::StreamGuard guard(s);
        nested(w, in, budget, depth);
      }
      if (in.chance(64)) scope.end();
      break;
    }
    case 29: {
      const Stream s = w.stream(in);
      ng::record_events(std::span<const ng::ExternalEvent>(w.ext, 1 + (in.u8() & 1)), s);
      break;
    }
    case 30: w.external(in).set_wait_deadline(std::chrono::milliseconds(in.u8() % 4)); break;
    case 31: {  // destroy a graph (replays in flight keep what they use)
      int gi = 0;
      ng::Graph& g = w.graph(in, &gi);
      if (in.flag()) g = ng::Graph();
      else std::swap(w.graphs[0], w.graphs[1]), std::swap(w.capture_stream[0], w.capture_stream[1]);
      break;
    }
    case 32: {  // replace a stream: the old handle is dropped (the program keeps none of it)
      const int i = in.u8() & 1;
      Stream old = w.streams[i];
      w.streams[i] = in.chance(64) ? Stream::create(ng::Device::cpu(), {.num_threads = 1 + in.u8() % 3})
                                   : Stream::create();
      w.all.push_back(w.streams[i]);
      // Keep it for the teardown while a capture or an update still names it, and always when it
      // is one of the base streams (they outlive the input: their work must drain here).
      if (!old.is_capturing() && !old.is_updating() && !(old == base_stream(0)) &&
          !(old == base_stream(1))) {
        for (auto it = w.all.begin(); it != w.all.end(); ++it)
          if (*it == old) {
            w.all.erase(it);
            break;
          }
      }
      break;
    }
    case 33: {  // allocate on the current stream (a graph pool while it captures)
      if (w.pool.size() >= kMaxPoolTensors) break;
      const Stream s = w.stream(in);
      on(s, [&] { w.pool.push_back(ng::empty({in.flag() ? 8 : 4}, ng::f32)); });
      break;
    }
    case 34: {  // an explicit GraphDef: host and no-op kernel nodes, edges from the input
      ng::GraphDef def;
      const int n = 1 + in.u8() % 5;
      for (int k = 0; k < n; ++k) {
        std::vector<ng::GraphDef::NodeId> deps;
        const int nd = in.u8() % 3;
        for (int d = 0; d < nd; ++d) deps.push_back(in.u8() % (k + 2));  // may name a later node
        if (in.flag())
          def.add_host([] { g_host_calls.fetch_add(1, std::memory_order_relaxed); }, deps);
        else
          def.add_kernel(ng::ops::noop_kernel(), std::span<const std::byte>(), deps);
      }
      const ng::GraphExec exec = def.instantiate();
      (void)exec.dot();
      const Stream s = w.stream(in);
      exec.launch(s);
      if (in.flag()) exec.launch(s);
      break;
    }
    case 35: {  // an eager or captured host function that fails
      const Stream s = w.stream(in);
      host_task(s, 1 + in.u8() % 3);
      break;
    }
    case 36:
      if (w.blocking_syncs < kMaxBlockingSyncs) {
        ++w.blocking_syncs;
        ng::empty_cache();
      }
      break;
    case 37: {  // a launch-ordered update racing replays already queued
      const Stream s = w.stream(in);
      ng::TaskGroupHandle& h = w.handle(in);
      ng::task_update_begin(s, h, ng::UpdateOrder::launch);
      on(s, [&] { ng::ops::scale_out(w.fixed[0], static_cast<double>(in.u8()), w.fixed[1]); });
      ng::task_update_end(s);
      break;
    }
    case 38: {  // another thread's view: queries from a helper thread (capture modes)
      const Stream s = w.stream(in);
      std::thread t([&] {
        guarded("helper-thread query", [&] { (void)s.query(); });
        guarded("helper-thread synchronize", [&] { s.synchronize(std::chrono::milliseconds(1)); });
      });
      t.join();
      break;
    }
    default: {  // the kernel identity must match: an add bound to a scale task and vice versa
      const Stream s = w.stream(in);
      on(s, [&] { ng::ops::add_out(w.fixed[0], w.fixed[1], w.fixed[2]); });
      break;
    }
  }
}

void run_ops(World& w, Input& in, int& budget, int depth, bool propagate) {
  const int count = depth == 0 ? kMaxOps : 1 + in.u8() % 6;
  for (int i = 0; i < count && budget > 0 && in.left() > 0; ++i) {
    --budget;
    if (propagate) {
      one_op(w, in, budget, depth);  // the first error leaves the enclosing scope
    } else {
      guarded("op", [&] { one_op(w, in, budget, depth); });
    }
  }
}

// Leaves nothing running: ends updates and captures, releases every wait, drains every stream.
void teardown(World& w) {
  ng::set_current_stream(w.streams[0]);
  for (const Stream& s : w.all)
    if (s.is_updating()) guarded("teardown: task_update_abort", [&] { ng::task_update_abort(s); });
  for (int g = 0; g < 2; ++g) {
    if (w.graphs[g].state() != ng::Graph::State::capturing) continue;
    guarded("teardown: capture_end", [&] { w.graphs[g].capture_end(w.capture_stream[g]); });
    if (w.graphs[g].state() == ng::Graph::State::capturing) w.graphs[g].reset();
  }
  for (const Stream& s : w.all)
    if (s.is_capturing() || s.is_updating())
      ngfuzz::finding("teardown: " + s.str() + " is still capturing or updating after every graph "
                      "ended or reset its capture and every update was aborted");

  // Release waits: each record lets one blocked wait through.
  static const Stream releaser = Stream::create();
  const auto give_up = std::chrono::steady_clock::now() + 5s;
  for (;;) {
    bool idle = true;
    for (const Stream& s : w.all)
      if (!guarded("teardown: query", [&] { idle = idle && s.query(); }))
        ngfuzz::finding("teardown: Stream::query threw with no capture active: " + ngfuzz::last_error());
    if (idle) break;
    if (std::chrono::steady_clock::now() > give_up) {
      std::string busy;
      for (const Stream& s : w.all) {
        bool done = false;
        guarded("teardown: query", [&] { done = s.query(); });
        if (done) continue;
        busy += "\n  " + s.str() + ": ";
        busy += guarded("teardown: synchronize", [&] { s.synchronize(50ms); })
                    ? std::string("drained now")
                    : ngfuzz::last_error();
      }
      ngfuzz::finding("teardown of input " + std::to_string(w.serial) +
                      ": streams did not drain within 5 s after every ExternalEvent was "
                      "recorded repeatedly (a hang):" + busy);
    }
    for (auto& e : w.ext) guarded("teardown: record", [&] { e.record(releaser); });
    guarded("teardown: releaser", [&] { releaser.synchronize(100ms); });
    // The poll interval of a wait with a deadline (give_up, a finding), not a guess that work ran.
    std::this_thread::sleep_for(200us);
  }
  for (const Stream& s : w.all) guarded("teardown: synchronize", [&] { s.synchronize(1000ms); });
  guarded("teardown: device_synchronize", [] { ng::device_synchronize(); });
  ng::set_current_stream(Stream::default_stream());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ng::set_diagnostic_handler([](const std::string&) {});
  base_stream(0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in(data, size);
  {
    World w;
    ng::set_current_stream(w.streams[0]);
    int budget = kMaxOps;
    run_ops(w, in, budget, 0, false);
    teardown(w);
  }
  if (!ng::current_stream().is_default()) ngfuzz::finding("the current stream was not restored");
  return 0;
}
