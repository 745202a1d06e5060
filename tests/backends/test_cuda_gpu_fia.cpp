// FIA on a GPU (suite CudaGpuFia; ctest -L gpu; tools/gpu_check.sh): the CUDA kernels (Note [FIA
// CUDA kernels]) against the CPU op and the float64 reference of the parity harness, and eager vs
// replayed vs updated-then-replayed results on the GPU, bitwise. Each test skips with a clear
// message where there is no CUDA device. NOT YET RUN ON A GPU: written and compiled without
// hardware (the same math runs on the host in tests/ops/test_fia_cuda_emulation.cpp).
//
// Tolerance against the CPU op and the reference: the parity harness's bounds (fia_case.hpp),
// twice eps against the CPU op (both round once, possibly to neighbours), since the GPU sums in
// another order; GPU against GPU: bitwise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "npugraph/npugraph.hpp"
#include "ops/fia_case.hpp"
#include "runtime/backend.hpp"
#include "support/require_gpu.hpp"

namespace fia_test {
namespace {

namespace ng = npugraph;
using ngtest::expect_close;
namespace nd = npugraph::detail;

const ng::Device kGpu = ng::Device::cuda(0);

Tensor to_gpu(const ng::Stream& s, const Tensor& host) {
  if (!host.defined()) return host;
  Tensor t = ng::empty(host.shape(), host.dtype(), kGpu);
  ng::copy_(s, t, host);
  return t;
}

Tensor to_host(const ng::Stream& s, const Tensor& dev) {
  Tensor host = ng::empty(dev.shape(), dev.dtype());
  ng::copy_(s, host, dev);
  s.synchronize();
  return host;
}

std::vector<unsigned char> bytes_of(const Tensor& host) {
  const auto* p = static_cast<const unsigned char*>(host.data());
  return {p, p + host.nbytes()};
}

// A call's tensors on the GPU (query, key, value and the option tensors the CUDA kernels read).
struct GpuCall {
  Tensor q, k, v;
  ng::ops::FiaOptions opt;
};

GpuCall on_gpu(const ng::Stream& s, const Tensor& q, const Tensor& k, const Tensor& v,
               const ng::ops::FiaOptions& o) {
  GpuCall g{to_gpu(s, q), to_gpu(s, k), to_gpu(s, v), o};
  g.opt.atten_mask = to_gpu(s, o.atten_mask);
  g.opt.pse_shift = to_gpu(s, o.pse_shift);
  g.opt.block_table = to_gpu(s, o.block_table);
  return g;
}

struct GpuResult {
  Tensor out, lse;  // on the host
};

GpuResult run_eager(const ng::Stream& s, const GpuCall& g) {
  ng::StreamGuard guard(s);
  const auto r = ng::ops::fused_infer_attention_score(g.q, g.k, g.v, g.opt);
  return {to_host(s, r.attention_out), to_host(s, r.softmax_lse)};
}

void expect_cpu_parity(const Tensor& q, const Tensor& k, const Tensor& v,
                       const ng::ops::FiaOptions& o, const FiaBuilt* reference) {
  const ng::Stream s = ng::Stream::create(kGpu);
  const GpuResult r = run_eager(s, on_gpu(s, q, k, v, o));
  const auto cpu = ng::ops::fused_infer_attention_score(q, k, v, o);
  ng::current_stream().synchronize();
  expect_close(r.out, cpu.attention_out, out_bound(q.dtype()), "attention_out", " on the GPU");
  expect_close(r.lse, cpu.softmax_lse, 1e-5, "softmax_lse", " on the GPU");
  if (reference) expect_matches(*reference, r.out, r.lse);
}

class CudaGpuFiaParity : public ::testing::TestWithParam<FiaCase> {};

TEST_P(CudaGpuFiaParity, MatchesTheCpuOpAndTheReference) {
  NG_REQUIRE_GPU();
  const FiaBuilt b = build_case(GetParam());
  expect_cpu_parity(b.q, b.k, b.v, b.opt, &b);
}

// Named CudaGpu/...: tools/gpu_check.sh and ctest -L gpu select --gtest_filter=CudaGpu*.
INSTANTIATE_TEST_SUITE_P(
    CudaGpu, CudaGpuFiaParity,
    ::testing::Values(
        FiaCase{.layout = "BNSD", .dtype = DType::f16, .decode = true},
        FiaCase{.layout = "BSH", .dtype = DType::bf16, .decode = true},
        FiaCase{.layout = "BSND", .dtype = DType::f16, .gqa = 4, .decode = true},
        FiaCase{.layout = "BNSD", .dtype = DType::f16, .gqa = 2, .decode = true, .kv = Kv::paged_bnsd},
        FiaCase{.layout = "BSH", .dtype = DType::bf16, .decode = true, .kv = Kv::paged_bsh},
        FiaCase{.layout = "BNSD", .dtype = DType::f16, .mode = 2},
        FiaCase{.layout = "BSH", .dtype = DType::bf16, .gqa = 2, .mode = 3},
        FiaCase{.layout = "BNSD", .dtype = DType::f16, .gqa = 4, .mode = 3, .kv = Kv::paged_bnsd},
        FiaCase{.layout = "BNSD_BSND", .dtype = DType::f16, .mode = 0},
        FiaCase{.layout = "BNSD", .dtype = DType::bf16, .pse = true}),
    [](const ::testing::TestParamInfo<FiaCase>& i) { return i.param.name(); });

// Decode at serving shapes: 32 query heads, D = 128, `kv_heads` KV heads, KV capacity 4096,
// lengths given per batch (B = lengths.size()).
struct Decode {
  Tensor q, k, v;
  ng::ops::FiaOptions opt;
};

Decode decode_case(DType dtype, std::int64_t kv_heads, std::vector<std::int64_t> lengths) {
  const auto B = static_cast<std::int64_t>(lengths.size());
  std::vector<double> qv, kv, vv;
  Decode d{random_tensor(qv, {B, 32, 1, 128}, dtype, 21),
           random_tensor(kv, {B, kv_heads, 4096, 128}, dtype, 22, -2.0, 2.0),
           random_tensor(vv, {B, kv_heads, 4096, 128}, dtype, 23), {}};
  d.opt.num_heads = 32;
  d.opt.num_key_value_heads = kv_heads;
  d.opt.input_layout = "BNSD";
  d.opt.scale = 1.0 / std::sqrt(128.0);
  d.opt.actual_seq_lengths_kv = std::move(lengths);
  d.opt.softmax_lse_flag = true;
  return d;
}

std::vector<std::int64_t> ragged16() {
  std::vector<std::int64_t> l;
  for (std::int64_t b = 0; b < 16; ++b) l.push_back((b * 977 + 1) % 4096 + (b == 3 ? 0 : 1));
  l[5] = 0;  // an empty batch: zeros and lse = +inf
  l[9] = 4096;
  return l;
}

TEST(CudaGpuFia, DecodeB1AndB16RaggedMatchTheCpuOp) {
  NG_REQUIRE_GPU();
  for (DType dtype : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(ng::dtype_name(dtype));
    const Decode b1 = decode_case(dtype, 32, {4000});
    expect_cpu_parity(b1.q, b1.k, b1.v, b1.opt, nullptr);
    const Decode b16 = decode_case(dtype, 8, ragged16());  // GQA 4
    expect_cpu_parity(b16.q, b16.k, b16.v, b16.opt, nullptr);
  }
}

// Eager vs replay vs update-then-replay on the GPU, bitwise: the captured decode task is updated
// to other lengths each cycle (stream-ordered and launch-ordered), and each replay must give the
// eager GPU result of the same lengths.
void update_cycles(ng::UpdateOrder order) {
  const ng::Stream s = ng::Stream::create(kGpu), u = ng::Stream::create(kGpu);
  Decode d = decode_case(DType::f16, 8, ragged16());
  const GpuCall g = on_gpu(s, d.q, d.k, d.v, d.opt);
  Tensor ws, out, lse;
  {
    ng::StreamGuard guard(s);
    ws = ng::ops::fia_max_workspace(g.q, g.k, g.v, g.opt);
    out = ng::empty(ng::ops::fia_output_shape(g.q, g.k, g.v, g.opt), DType::f16, kGpu);
    lse = ng::empty(ng::ops::fia_lse_shape(g.q, g.k, g.v, g.opt), DType::f32, kGpu);
  }
  ng::Graph graph;
  ng::TaskGroupHandle group;
  {
    ng::CaptureScope capture(graph, s);
    ng::task_group_begin(s);
    ng::ops::fused_infer_attention_score_out(g.q, g.k, g.v, g.opt, ws, out, lse);
    group = ng::task_group_end(s);
    capture.end();
  }
  graph.replay(s);
  const GpuResult first = run_eager(s, g);
  ASSERT_EQ(bytes_of(to_host(s, out)), bytes_of(first.out)) << "first replay vs eager";
  ASSERT_EQ(bytes_of(to_host(s, lse)), bytes_of(first.lse)) << "first replay vs eager";
  const int cycles = 20;
  for (int c = 1; c <= cycles; ++c) {
    GpuCall next = g;
    for (std::int64_t& l : next.opt.actual_seq_lengths_kv) l = (l + 613 * c) % 4097;
    ng::task_update_begin(u, group, order);
    {
      ng::StreamGuard guard(u);
      ng::ops::fused_infer_attention_score_out(next.q, next.k, next.v, next.opt, ws, out, lse);
    }
    ng::task_update_end(u);
    u.synchronize();
    graph.replay(s);
    const Tensor got_out = to_host(s, out), got_lse = to_host(s, lse);
    const GpuResult eager = run_eager(s, next);
    ASSERT_EQ(bytes_of(got_out), bytes_of(eager.out)) << "update then replay, cycle " << c;
    ASSERT_EQ(bytes_of(got_lse), bytes_of(eager.lse)) << "update then replay, cycle " << c;
    if (c == cycles) {  // and the CPU op agrees with the last one
      ng::ops::FiaOptions host_opt = d.opt;
      host_opt.actual_seq_lengths_kv = next.opt.actual_seq_lengths_kv;
      const auto cpu = ng::ops::fused_infer_attention_score(d.q, d.k, d.v, host_opt);
      ng::current_stream().synchronize();
      expect_close(got_out, cpu.attention_out, out_bound(DType::f16), "attention_out", " on the GPU");
    }
  }
}

TEST(CudaGpuFia, StreamOrderedUpdatesThenReplaysAreBitwiseTheEagerGpuResult) {
  NG_REQUIRE_GPU();
  update_cycles(ng::UpdateOrder::stream);
}

TEST(CudaGpuFia, LaunchOrderedUpdatesThenReplaysAreBitwiseTheEagerGpuResult) {
  NG_REQUIRE_GPU();
  update_cycles(ng::UpdateOrder::launch);
}

}  // namespace
}  // namespace fia_test
