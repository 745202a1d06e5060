// The decode engine's ops on a GPU (suite CudaGpuDecodeOps; ctest -L gpu; tools/gpu_check.sh):
// each op eagerly on cuda:0 against the same op on the cpu, and one captured -> replayed graph of
// them. Each test skips with a clear message where there is no CUDA device. NOT YET RUN ON A GPU:
// written and compiled without hardware (the kernels' math runs on the host in
// tests/ops/llm/test_decode_cuda_emulation.cpp, which also says why each op is or is not bitwise).
//
// Expectations: bitwise for rms_norm / add_rms_norm, embedding, reshape_and_cache and argmax (the
// CUDA kernels repeat the CPU kernels' rounding steps); rotary_embedding within a few float32 ulp
// of the cpu (the device's float64 pow / cos / sin against libm's); swiglu within expf's ulps;
// linear / weight_quant_linear within K 2^-24 sum |x w| (another summation order); sample: the
// cpu's tokens (a mismatch needs u * total within rounding of a boundary).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "llm/tiny_model.hpp"
#include "npugraph/llm/engine.hpp"
#include "npugraph/npugraph.hpp"
#include "ops/llm/llm_ops_util.hpp"
#include "support/host_tensors.hpp"
#include "support/require_gpu.hpp"

namespace llm_ops_test {
namespace {

namespace ops = ng::ops;
const ng::Device kGpu = ng::Device::cuda(0);

Tensor to_gpu(const Tensor& host) {
  Tensor t = ng::empty(host.shape(), host.dtype(), kGpu);
  ng::copy_(ng::current_stream(kGpu), t, host);
  return t;
}

Tensor to_host(const Tensor& dev) {
  Tensor host = ng::empty(dev.shape(), dev.dtype());
  const ng::Stream s = ng::current_stream(kGpu);
  ng::copy_(s, host, dev);
  s.synchronize();
  return host;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

TEST(CudaGpuDecodeOps, RmsNormAndAddRmsNormAreBitwiseTheCpu) {
  NG_REQUIRE_GPU();
  for (const DType dt : {DType::f32, DType::f16, DType::bf16}) {
    const Tensor x = random_tensor({5, 576}, 1, dt, -2, 2), x2 = random_tensor({5, 576}, 2, dt);
    const Tensor g = random_tensor({576}, 3, dt, 0.5f, 1.5f);
    const auto cpu = ops::npu_add_rms_norm(x, x2, g, 1e-5);
    const auto cpu1 = ops::npu_rms_norm(x, g, 1e-5);
    ng::device_synchronize();
    const auto gpu = ops::npu_add_rms_norm(to_gpu(x), to_gpu(x2), to_gpu(g), 1e-5);
    const auto gpu1 = ops::npu_rms_norm(to_gpu(x), to_gpu(g), 1e-5);
    EXPECT_TRUE(same_bytes(to_host(gpu.y), cpu.y)) << ng::dtype_name(dt);
    EXPECT_TRUE(same_bytes(to_host(gpu.x), cpu.x)) << ng::dtype_name(dt);
    EXPECT_TRUE(same_bytes(to_host(gpu.rstd), cpu.rstd)) << ng::dtype_name(dt);
    EXPECT_TRUE(same_bytes(to_host(gpu1.y), cpu1.y)) << ng::dtype_name(dt);
  }
}

TEST(CudaGpuDecodeOps, RotaryEmbeddingSwigluAndLinearsMatchTheCpu) {
  NG_REQUIRE_GPU();
  const Tensor pos = int_tensor({0, 9, 4000}, {3});
  const Tensor x = random_tensor({3, 9, 64}, 4, DType::f32, -3, 3);
  const ops::RopeOptions ro{.theta = 100000.0};
  const Tensor rope_cpu = ops::rotary_embedding(pos, x, ro);
  const Tensor gu = random_tensor({3, 2 * 1536}, 5, DType::f32, -8, 8);
  const Tensor sw_cpu = ops::npu_swiglu(gu);
  const Tensor xin = random_tensor({3, 576}, 6);
  const auto qw = ops::quantize(ops::QuantType::q4_1, random_values(1536 * 576, 7), 1536, 576);
  const Tensor lin_cpu = ops::weight_quant_linear(xin, qw, Tensor());
  const Tensor dense = random_tensor({100, 576}, 8, DType::f16);
  const Tensor dense_cpu = ops::linear(xin, dense, Tensor());
  ng::device_synchronize();
  ngtest::expect_close(to_host(ops::rotary_embedding(to_gpu(pos), to_gpu(x), ro)), rope_cpu, 0x1p-20, "rope");
  ngtest::expect_close(to_host(ops::npu_swiglu(to_gpu(gu))), sw_cpu, 0x1p-21, "swiglu");
  const ops::QuantWeight qw_gpu(to_gpu(qw.bytes()), qw.type(), qw.rows(), qw.cols());
  // Float32 reorderings move these sums by about 1e-5; 2e-3 max(1, |y|) still fails a wrong weight or index.
  ngtest::expect_close(to_host(ops::weight_quant_linear(to_gpu(xin), qw_gpu, Tensor())), lin_cpu, 1e-3, "q4_1");
  ngtest::expect_close(to_host(ops::linear(to_gpu(xin), to_gpu(dense), Tensor())), dense_cpu, 1e-3, "f16");
}

TEST(CudaGpuDecodeOps, EmbeddingCacheArgmaxAndSampleAreTheCpus) {
  NG_REQUIRE_GPU();
  const Tensor ids = int_tensor({3, 0, 9}, {3});
  const auto table = ops::quantize(ops::QuantType::q8_0, random_values(10 * 64, 9), 10, 64);
  const Tensor emb_cpu = ops::embedding(ids, table);
  const Tensor k = random_tensor({3, 32}, 10), v = random_tensor({3, 32}, 11);
  const Tensor slots = int_tensor({4, -1, 4}, {3});
  const Tensor kc = random_tensor({2, 4, 32}, 12, DType::f16), vc = random_tensor({2, 4, 32}, 13, DType::f16);
  const Tensor kc_gpu = to_gpu(kc), vc_gpu = to_gpu(vc);
  ops::reshape_and_cache(k, v, kc, vc, slots);
  const Tensor logits = random_tensor({4, 49152}, 14, DType::f32, -6, 6);
  const Tensor am_cpu = ops::argmax(logits);
  const Tensor seeds = ngtest::int_tensor({1, 2, 3, 4}, {4}, DType::i64);
  const Tensor steps = ngtest::int_tensor({0, 5, 6, 7}, {4}, DType::i64);
  const Tensor smp_cpu = ops::sample(logits, seeds, steps, {.temperature = 0.8});
  ng::device_synchronize();
  const ops::QuantWeight table_gpu(to_gpu(table.bytes()), table.type(), table.rows(), table.cols());
  EXPECT_TRUE(same_bytes(to_host(ops::embedding(to_gpu(ids), table_gpu)), emb_cpu));
  ops::reshape_and_cache(to_gpu(k), to_gpu(v), kc_gpu, vc_gpu, to_gpu(slots));
  EXPECT_TRUE(same_bytes(to_host(kc_gpu), kc));
  EXPECT_TRUE(same_bytes(to_host(vc_gpu), vc));
  const Tensor lg = to_gpu(logits);
  EXPECT_TRUE(same_bytes(to_host(ops::argmax(lg)), am_cpu));
  EXPECT_TRUE(same_bytes(to_host(ops::sample(lg, to_gpu(seeds), to_gpu(steps), {.temperature = 0.8})), smp_cpu));
  EXPECT_TRUE(ngtest::throws<ng::UnsupportedError>(
      [&] { (void)ops::sample(lg, to_gpu(seeds), to_gpu(steps), {.temperature = 0.8, .top_k = 40}); },
      {"sample on cuda:0", "top_k = 40"}));
  // A rows16 weight (the cpu q8 GEMV's layout) is refused on cuda, naming the weight and device.
  const ops::QuantWeight packed = ops::pack_rows16(ops::quantize(ops::QuantType::q4_1, random_values(16 * 64, 17), 16, 64));
  const ops::QuantWeight packed_gpu(to_gpu(packed.bytes()), packed.type(), 16, 64, ops::QuantLayout::rows16);
  EXPECT_TRUE(ngtest::throws<ng::UnsupportedError>(
      [&] { (void)ops::weight_quant_linear(to_gpu(random_tensor({1, 64}, 18)), packed_gpu); },
      {"weight = Q4_1[16, 64] rows16 on cuda:0", "rows layout only"}));
}

// Captured on cuda:0, replayed twice after its input changed: the replays read the device blocks
// and the new input, bitwise the eager GPU result on that input.
TEST(CudaGpuDecodeOps, ACapturedNormSwigluArgmaxChainReplaysBitwiseTheEagerGpuResult) {
  NG_REQUIRE_GPU();
  const ng::Stream s = ng::Stream::create(kGpu);
  ng::StreamGuard guard(s);
  const Tensor g = to_gpu(random_tensor({256}, 15));
  const Tensor x = to_gpu(random_tensor({2, 256}, 16));
  const Tensor y = ng::empty({2, 256}, DType::f32, kGpu), a = ng::empty({2, 128}, DType::f32, kGpu);
  const Tensor ids = ng::empty({2}, DType::i32, kGpu);
  auto issue = [&] {
    ops::rms_norm_out(x, g, 1e-5, y, Tensor());
    ops::swiglu_out(y, a);
    ops::argmax_out(a, ids);
  };
  ng::Graph graph;
  {
    ng::CaptureScope c(graph, s);
    issue();
  }
  for (std::uint32_t seed : {17u, 18u}) {
    ng::copy_(s, x, random_tensor({2, 256}, seed));
    issue();
    const Tensor eager_a = to_host(a), eager_ids = to_host(ids);
    graph.replay(s);
    EXPECT_TRUE(same_bytes(to_host(a), eager_a)) << seed;
    EXPECT_TRUE(same_bytes(to_host(ids), eager_ids)) << seed;
  }
}

// The decode engine on cuda:0 (EngineOptions::device) on the tiny random Llama of the engine tests:
// graph and eager GPU steps bitwise equal (the same kernels on the same inputs), and the first
// token's logits close to the cpu engine's (the linear reductions sum in another order).
TEST(CudaGpuEngine, TinyLlamaGraphAndEagerAgreeBitwiseAndTheFirstLogitsMatchTheCpu) {
  NG_REQUIRE_GPU();
  namespace llm = ng::llm;
  const auto path = ngtest::write_tiny_llama("tiny_llama_gpu.gguf");
  auto run = [&](ng::Device device, llm::StepMode mode) {
    llm::Engine e({.model = path, .max_batch = 2, .mode = mode, .keep_logits = true, .keep_full_logits = true,
                   .device = device});
    return e.generate(std::vector<llm::Request>{{.prompt = "hello there", .max_tokens = 6},
                                                {.prompt = "ab", .max_tokens = 4, .chat = false}});
  };
  const auto cpu = run(ng::Device::cpu(), llm::StepMode::eager);
  const auto eager = run(kGpu, llm::StepMode::eager);
  const auto graph = run(kGpu, llm::StepMode::graph);
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(graph[i].tokens, eager[i].tokens) << i;
    EXPECT_EQ(graph[i].logits_hashes, eager[i].logits_hashes) << i;
    ASSERT_FALSE(cpu[i].logits.empty());
    const std::size_t vocab = cpu[i].logits.size() / cpu[i].tokens.size();
    for (std::size_t j = 0; j < vocab; ++j)
      EXPECT_NEAR(eager[i].logits[j], cpu[i].logits[j], 1e-3 * std::max(1.0f, std::abs(cpu[i].logits[j]))) << j;
  }
}

}  // namespace
}  // namespace llm_ops_test
