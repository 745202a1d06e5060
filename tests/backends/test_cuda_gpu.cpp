// The CUDA backend on a GPU (suites CudaGpu*; ctest -L gpu; tools/gpu_check.sh). Each test skips
// with a clear message where there is no CUDA device, and otherwise checks the GPU against the cpu
// backend: eager, replayed and updated-then-replayed results bitwise equal to the cpu's, in both
// update orders, for a graph that becomes one cudaGraphExec and for one the worker walks (it holds
// an ExternalEvent wait). NOT YET RUN ON A GPU: written and compiled without hardware.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "npugraph/npugraph.hpp"
#include "runtime/backend.hpp"
#include "support/require_gpu.hpp"

namespace {

namespace ng = npugraph;
namespace nd = npugraph::detail;

const ng::Device kGpu = ng::Device::cuda(0);

// A host tensor of `dtype` with values drawn from `seed` (exactly representable in every dtype's
// float conversion: the kernels round once, so any value works; these keep failures readable).
ng::Tensor host_random(std::int64_t n, ng::DType dtype, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  ng::Tensor t = ng::empty({n}, dtype);
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = dist(gen);
    if (dtype == ng::f32) t.data_ptr<float>()[i] = v;
    else if (dtype == ng::f16) t.data_ptr<ng::half>()[i] = ng::half(v);
    else t.data_ptr<ng::bfloat16>()[i] = ng::bfloat16(v);
  }
  return t;
}

ng::Tensor to_gpu(const ng::Stream& s, const ng::Tensor& host) {
  ng::Tensor t = ng::empty(host.shape(), host.dtype(), kGpu);
  ng::copy_(s, t, host);
  return t;
}

// The device tensor's bytes, after what `s` issued before.
std::vector<unsigned char> bytes_of(const ng::Stream& s, const ng::Tensor& dev) {
  ng::Tensor host = ng::empty(dev.shape(), dev.dtype());
  ng::copy_(s, host, dev);
  s.synchronize();
  const auto* p = static_cast<const unsigned char*>(host.data());
  return {p, p + host.nbytes()};
}

std::vector<unsigned char> bytes_of(const ng::Tensor& host) {
  ng::current_stream().synchronize();
  const auto* p = static_cast<const unsigned char*>(host.data());
  return {p, p + host.nbytes()};
}

int cycles() {
  const char* env = std::getenv("NPUGRAPH_GPU_CYCLES");  // tools/gpu_check.sh: 10000
  return env ? std::max(1, std::atoi(env)) : 100;
}

TEST(CudaGpu, MemoryMovesThroughTheBackend) {
  NG_REQUIRE_GPU();
  nd::Backend& b = nd::backend_for(kGpu);
  EXPECT_EQ(b.name(), "cuda");
  void* p = b.allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
  b.memset(p, 0x5a, 1000);
  std::vector<unsigned char> host(1000);
  b.copy(host.data(), p, 1000, nd::CopyKind::device_to_host);
  for (unsigned char c : host) ASSERT_EQ(c, 0x5a);
  b.deallocate(p, 1000);
}

TEST(CudaGpu, FillAndCopyRoundTrip) {
  NG_REQUIRE_GPU();
  ng::Stream s = ng::Stream::create(kGpu);
  for (ng::DType dt : {ng::f32, ng::f16, ng::bf16, ng::i64}) {
    ng::Tensor d = ng::empty({1000}, dt, kGpu);
    ng::fill_(s, d, 3.0);  // multi-byte patterns: the fill kernel
    ng::Tensor h = ng::empty({1000}, dt);
    ng::fill_(h, 3.0);
    EXPECT_EQ(bytes_of(s, d), bytes_of(h)) << ng::dtype_name(dt);
    ng::fill_(s, d, 0.0);  // cudaMemsetAsync
    ng::fill_(h, 0.0);
    EXPECT_EQ(bytes_of(s, d), bytes_of(h)) << ng::dtype_name(dt);
  }
}

TEST(CudaGpu, EagerAddAndScaleAreBitwiseTheCpuResults) {
  NG_REQUIRE_GPU();
  ng::Stream s = ng::Stream::create(kGpu);
  for (ng::DType dt : {ng::f32, ng::f16, ng::bf16}) {
    for (std::int64_t n : {1, 255, 4097, 1 << 21}) {
      const ng::Tensor a = host_random(n, dt, 1), b = host_random(n, dt, 2);
      const ng::Tensor da = to_gpu(s, a), db = to_gpu(s, b);
      ng::Tensor dsum = ng::empty({n}, dt, kGpu), dscaled = ng::empty({n}, dt, kGpu);
      {
        ng::StreamGuard guard(s);
        ng::ops::add_out(da, db, dsum);
        ng::ops::scale_out(da, -0.37, dscaled);
      }
      EXPECT_EQ(bytes_of(s, dsum), bytes_of(ng::ops::add(a, b))) << ng::dtype_name(dt) << " n " << n;
      EXPECT_EQ(bytes_of(s, dscaled), bytes_of(ng::ops::scale(a, -0.37))) << ng::dtype_name(dt) << " n " << n;
    }
  }
}

// out = scale(x, alpha) in a task group, then sum = out + y: the graph captured on `s`, replayed,
// and updated (alpha, and x switched between two tensors) then replayed, `cycles()` times, each
// result compared with the cpu's bitwise. `with_wait`: the graph starts with an ExternalEvent wait
// (the torch_npu pattern: update on another stream, record after install), so it is walked on the
// worker; without it the graph is one cudaGraphExec.
void update_cycles(ng::UpdateOrder order, bool with_wait) {
  const std::int64_t n = 3000;
  ng::Stream s = ng::Stream::create(kGpu), u = ng::Stream::create(kGpu);
  const ng::DType dt = ng::bf16;
  const ng::Tensor x[2] = {host_random(n, dt, 10), host_random(n, dt, 11)};
  const ng::Tensor y = host_random(n, dt, 12);
  const ng::Tensor dx[2] = {to_gpu(s, x[0]), to_gpu(s, x[1])};
  const ng::Tensor dy = to_gpu(s, y);
  ng::Tensor dout = ng::empty({n}, dt, kGpu), dsum = ng::empty({n}, dt, kGpu);
  s.synchronize();
  ng::ExternalEvent ready("params_ready");
  ng::Graph g;
  ng::TaskGroupHandle group;
  {
    ng::CaptureScope capture(g, s);
    if (with_wait) ready.wait(s);
    ng::task_group_begin(s);
    ng::ops::scale_out(dx[0], 0.5, dout);
    group = ng::task_group_end(s);
    ng::ops::add_out(dout, dy, dsum);
    capture.end();
  }
  auto expect = [&](int xi, double alpha, const char* what, int cycle) {
    const ng::Tensor ref = ng::ops::add(ng::ops::scale(x[xi], alpha), y);
    ASSERT_EQ(bytes_of(s, dsum), bytes_of(ref)) << what << " (cycle " << cycle << ", alpha " << alpha << ")";
  };
  if (with_wait) ready.record(u);
  g.replay(s);
  expect(0, 0.5, "first replay", 0);
  for (int c = 1; c <= cycles(); ++c) {
    const int xi = c % 2;
    const double alpha = 0.25 * (c % 7) - 0.75;
    ng::task_update_begin(u, group, order);
    {
      ng::StreamGuard guard(u);
      ng::ops::scale_out(dx[xi], alpha, dout);
    }
    if (with_wait) {
      const ng::ExternalEvent after[] = {ready};
      ng::task_update_end(u, after);
    } else {
      ng::task_update_end(u);
      u.synchronize();  // stream order: the install has run before the replay is issued
    }
    g.replay(s);
    expect(xi, alpha, "update then replay", c);
  }
}

TEST(CudaGpu, StreamOrderedUpdatesThenReplaysAreBitwiseTheCpuGraphExec) {
  NG_REQUIRE_GPU();
  update_cycles(ng::UpdateOrder::stream, false);
}
TEST(CudaGpu, LaunchOrderedUpdatesThenReplaysAreBitwiseTheCpuGraphExec) {
  NG_REQUIRE_GPU();
  update_cycles(ng::UpdateOrder::launch, false);
}
TEST(CudaGpu, StreamOrderedUpdatesWithAnExternalEventAreBitwiseTheCpuWalkedGraph) {
  NG_REQUIRE_GPU();
  update_cycles(ng::UpdateOrder::stream, true);
}

TEST(CudaGpu, EventsTimeDeviceWorkAndOrderTwoStreams) {
  NG_REQUIRE_GPU();
  ng::Stream a = ng::Stream::create(kGpu), b = ng::Stream::create(kGpu);
  const std::int64_t n = 1 << 22;
  const ng::Tensor x = host_random(n, ng::f32, 5);
  const ng::Tensor dx = to_gpu(a, x);
  ng::Tensor dy = ng::empty({n}, ng::f32, kGpu), dz = ng::empty({n}, ng::f32, kGpu);
  ng::Event start({.enable_timing = true}), stop({.enable_timing = true}), done;
  start.record(a);
  {
    ng::StreamGuard guard(a);
    for (int i = 0; i < 10; ++i) ng::ops::scale_out(dx, 2.0, dy);
  }
  stop.record(a);
  done.record(a);
  done.wait(b);  // b's add reads dy only after a wrote it
  {
    ng::StreamGuard guard(b);
    ng::ops::add_out(dy, dx, dz);
  }
  b.synchronize();
  EXPECT_GE(start.elapsed_time(stop), 0.0f);
  EXPECT_EQ(bytes_of(b, dz), bytes_of(ng::ops::add(ng::ops::scale(x, 2.0), x)));
}

TEST(CudaGpu, AnExternalEventWaitHoldsTheStreamUntilTheRecord) {
  NG_REQUIRE_GPU();
  ng::Stream a = ng::Stream::create(kGpu), b = ng::Stream::create(kGpu);
  const ng::Tensor x = host_random(1000, ng::f16, 7);
  const ng::Tensor dx = to_gpu(b, x);
  ng::Tensor dy = ng::empty({1000}, ng::f16, kGpu);
  b.synchronize();
  ng::ExternalEvent go("go");
  go.wait(a);
  {
    ng::StreamGuard guard(a);
    ng::ops::scale_out(dx, 3.0, dy);
  }
  EXPECT_FALSE(a.query());
  go.record(b);
  a.synchronize();
  EXPECT_EQ(bytes_of(a, dy), bytes_of(ng::ops::scale(x, 3.0)));
}

}  // namespace
