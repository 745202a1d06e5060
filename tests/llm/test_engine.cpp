// The decode engine on a tiny random Llama model: graph and eager steps give bitwise-identical logits
// (batch 1, ragged batches with continuous batching, both graph orders, sampling), and bad requests
// and options give named errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "llm/tiny_model.hpp"
#include "npugraph/allocator_stats.hpp"
#include "npugraph/error.hpp"
#include "npugraph/llm/engine.hpp"
#include "npugraph/llm/tensor_parallel.hpp"
#include "runtime/backend.hpp"
#include "support/throws.hpp"

namespace {

namespace llm = npugraph::llm;
using ngtest::throws;

const std::filesystem::path& tiny() {
  static const auto path = ngtest::write_tiny_llama("tiny_llama.gguf");
  return path;
}

std::vector<llm::Result> run(llm::EngineOptions o, const std::vector<llm::Request>& requests) {
  o.model = tiny();
  o.keep_logits = true;
  llm::Engine engine(o);
  return engine.generate(requests);
}

void expect_same(const std::vector<llm::Result>& eager, const std::vector<llm::Result>& graph) {
  ASSERT_EQ(eager.size(), graph.size());
  for (std::size_t i = 0; i < eager.size(); ++i) {
    EXPECT_EQ(eager[i].tokens, graph[i].tokens) << "request " << i;
    EXPECT_EQ(eager[i].logits_hashes, graph[i].logits_hashes) << "request " << i;
    EXPECT_EQ(eager[i].logits_hashes.size(), eager[i].tokens.size());
    EXPECT_EQ(eager[i].text, graph[i].text);
  }
}

std::vector<llm::Request> ragged(std::int64_t max_tokens) {
  return {{.prompt = "hello", .max_tokens = max_tokens},
          {.prompt = "the tall cat sat on a mat", .max_tokens = max_tokens + 3},
          {.prompt = "ab", .max_tokens = max_tokens - 5, .chat = false},
          {.prompt = "a much longer prompt that needs more than one block of the cache? no, but many tokens",
           .max_tokens = max_tokens},
          {.prompt = "hello hello", .max_tokens = 1}};
}

TEST(LlmEngine, GraphAndEagerLogitsAreBitwiseEqualAtBatchOne) {
  const std::vector<llm::Request> req{{.prompt = "hello there", .max_tokens = 24}};
  const auto eager = run({.mode = llm::StepMode::eager}, req);
  const auto graph = run({.mode = llm::StepMode::graph}, req);
  ASSERT_EQ(eager[0].tokens.size(), 24u);
  expect_same(eager, graph);
}

TEST(LlmEngine, StackedProjectionsGiveTheSameLogitsBitwise) {
  // gate/up as one GEMV for any number of rows (prefill chunks, batched decode) and one token's
  // q/k/v as one GEMV (EngineOptions::fuse_projections) against the separate GEMVs: the same
  // per-row arithmetic, so the same logits at every step.
  const std::vector<llm::Request> req{{.prompt = "the tall cat", .max_tokens = 16}};
  for (llm::StepMode mode : {llm::StepMode::eager, llm::StepMode::graph}) {
    const auto stacked = run({.max_batch = 1, .mode = mode}, req);
    const auto separate = run({.max_batch = 1, .mode = mode, .fuse_projections = false}, req);
    ASSERT_EQ(stacked[0].tokens.size(), 16u);
    expect_same(separate, stacked);
    const auto batch = ragged(6);
    expect_same(run({.max_batch = 4, .mode = mode, .fuse_projections = false}, batch),
                run({.max_batch = 4, .mode = mode}, batch));
  }
}

TEST(LlmEngine, ARaggedBatchWithContinuousBatchingIsBitwiseEqualInBothGraphOrders) {
  const auto req = ragged(12);
  for (std::int64_t max_batch : {2, 8}) {  // 2: requests join as others leave; 8: padded buckets
    const auto eager = run({.max_batch = max_batch, .mode = llm::StepMode::eager}, req);
    const auto update_first = run({.max_batch = max_batch, .mode = llm::StepMode::graph}, req);
    const auto replay_first = run({.max_batch = max_batch, .mode = llm::StepMode::graph,
                                   .order = llm::GraphOrder::replay_then_update}, req);
    expect_same(eager, update_first);
    expect_same(eager, replay_first);
    EXPECT_EQ(eager[4].tokens.size(), 1u);
  }
  // A request's tokens do not depend on what it was batched with.
  const auto alone = run({.max_batch = 1, .mode = llm::StepMode::graph}, {req[1]});
  const auto together = run({.max_batch = 8, .mode = llm::StepMode::graph}, req);
  EXPECT_EQ(alone[0].tokens, together[1].tokens);
}

TEST(LlmEngine, SeededSamplingIsReproducibleAndEqualInGraphAndEager) {
  llm::EngineOptions o{.max_batch = 4, .temperature = 4.0, .top_k = 100, .top_p = 0.98};  // the tiny model is peaked
  std::vector<llm::Request> req{{.prompt = "once upon", .max_tokens = 16, .seed = 1},
                                {.prompt = "once upon", .max_tokens = 16, .seed = 2}};
  o.mode = llm::StepMode::eager;
  const auto eager = run(o, req);
  o.mode = llm::StepMode::graph;
  const auto graph = run(o, req);
  expect_same(eager, graph);
  EXPECT_NE(graph[0].tokens, graph[1].tokens);  // another seed, another draw
  EXPECT_EQ(run(o, req)[1].tokens, graph[1].tokens);
}

TEST(LlmEngine, BadRequestsAndOptionsGiveNamedErrors) {
  EXPECT_TRUE(throws<npugraph::ArgumentError>([] { run({}, {{.prompt = ""}}); },
                                                   {"requests[0].prompt is empty"}));
  EXPECT_TRUE(throws<npugraph::ArgumentError>(
      [] { run({.max_context = 16}, {{.prompt = std::string(200, 'x'), .chat = false}}); },
      {"requests[0].prompt is", "longer than the context", "max_context = 16"}));
  EXPECT_TRUE(throws<npugraph::ArgumentError>([] { run({.max_batch = 0}, {{.prompt = "hi"}}); },
                                                   {"max_batch = 0", "[1, 16]"}));
  EXPECT_TRUE(throws<npugraph::ArgumentError>([] { run({.max_context = 100000}, {{.prompt = "hi"}}); },
                                                   {"max_context = 100000", "512"}));
  EXPECT_TRUE(throws<npugraph::ArgumentError>(
      [] { llm::Engine e({.model = "/nonexistent/model.gguf"}); }, {"/nonexistent/model.gguf", "no such file"}));
  const auto gpt2 = ngtest::write_tiny_llama("tiny_gpt2.gguf", {.architecture = "gpt2"});
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { llm::Engine e({.model = gpt2}); },
                                                   {"tiny_gpt2.gguf", "general.architecture = 'gpt2'",
                                                    "npugraph runs llama, qwen2, qwen3, gemma3"}));
  // A known architecture whose feature tensors are missing: the loader names the first one.
  const auto qwen2 = ngtest::write_tiny_llama("tiny_qwen2_no_bias.gguf", {.architecture = "qwen2"});
  EXPECT_TRUE(throws<npugraph::ArgumentError>([&] { llm::Engine e({.model = qwen2}); },
                                                   {"tiny_qwen2_no_bias.gguf", "blk.0.attn_q.bias"}));
}

// A model of K-quant matrices and a Q6_K embedding (Note [Quantisation table]): graph and eager
// agree bitwise on a ragged batch; Q6_K matrices take q8 activations by default (the logits of
// Activations::q8, not f32's), graph == eager again. A matrix type without a kernel (Q3_K) is
// refused at load, naming the file, the tensor, its type and the types npugraph computes on.
TEST(LlmEngine, KQuantModelsRunAndUnknownTypesAreRefused) {
  const auto kq = ngtest::write_tiny_llama("tiny_q4k.gguf", {.hidden = 256, .ffn = 512, .matrix_type = 12, .embd_type = 14});
  auto run_k = [&](llm::EngineOptions o, const std::vector<llm::Request>& r) {
    o.model = kq;
    o.keep_logits = true;
    llm::Engine engine(o);
    return engine.generate(r);
  };
  const auto eager = run_k({.mode = llm::StepMode::eager}, ragged(10));
  const auto graph = run_k({.mode = llm::StepMode::graph}, ragged(10));
  expect_same(eager, graph);
  // Q6_K matrices: the default activations are q8 (their own kernel), graph == eager.
  const auto k6 = ngtest::write_tiny_llama("tiny_q6k.gguf", {.hidden = 256, .ffn = 512, .matrix_type = 14, .embd_type = 14});
  auto run_k6 = [&](llm::EngineOptions o) {
    o.model = k6;
    o.keep_logits = true;
    llm::Engine engine(o);
    return engine.generate(ragged(10));
  };
  const auto f32 = run_k6({.activations = npugraph::ops::Activations::f32});
  const auto dflt = run_k6({});
  const auto q8 = run_k6({.activations = npugraph::ops::Activations::q8});
  expect_same(run_k6({.mode = llm::StepMode::eager}), dflt);
  for (std::size_t i = 0; i < f32.size(); ++i) {
    EXPECT_EQ(q8[i].logits_hashes, dflt[i].logits_hashes) << i;
    EXPECT_NE(f32[i].logits_hashes, dflt[i].logits_hashes) << i;
  }
  const auto q3 = ngtest::write_tiny_llama("tiny_q3k.gguf", {.hidden = 256, .ffn = 512, .matrix_type = 11});
  EXPECT_TRUE(throws<npugraph::ArgumentError>(
      [&] { llm::Engine e({.model = q3}); },
      {"tiny_q3k.gguf", "tensor 'blk.0.attn_q.weight' is Q3_K",
       "npugraph computes on F32, F16, Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K matrices"}));
}

// EngineOptions::activations: unset is q8 on the cpu (the same logits as asking for it), f32 gives
// other logits (x is not quantised), and graph and eager agree bitwise in both.
TEST(LlmEngine, ActivationsDefaultToQ8OnTheCpuAndF32IsAvailable) {
  using npugraph::ops::Activations;
  const std::vector<llm::Request> req{{.prompt = "hello there", .max_tokens = 12}};
  const auto unset = run({}, req);
  const auto q8 = run({.activations = Activations::q8}, req);
  const auto f32 = run({.activations = Activations::f32}, req);
  const auto f32_eager = run({.mode = llm::StepMode::eager, .activations = Activations::f32}, req);
  EXPECT_EQ(unset[0].logits_hashes, q8[0].logits_hashes);
  EXPECT_NE(f32[0].logits_hashes, q8[0].logits_hashes);
  expect_same(f32_eager, f32);
}

// EngineOptions::kv_dtype: a float16 / bfloat16 cache gives graph == eager bitwise (ragged batches,
// continuous batching), logits other than the float32 cache's (so the half cache is what attention
// reads) and within the halves' rounding of them (float32 activations: no q8 rounding flips).
TEST(LlmEngine, AHalfKvCacheIsBitwiseGraphEqualEagerAndCloseToFloat32) {
  using npugraph::DType;
  using npugraph::ops::Activations;
  const std::vector<llm::Request> req{{.prompt = "the tall cat sat on a mat", .max_tokens = 6}};
  llm::EngineOptions base{.activations = Activations::f32};
  base.keep_full_logits = true;
  const auto f32 = run(base, req);
  for (DType dt : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(npugraph::dtype_name(dt));
    llm::EngineOptions o = base;
    o.kv_dtype = dt;
    const auto half = run(o, req);
    EXPECT_NE(half[0].logits_hashes, f32[0].logits_hashes);
    // The first token's logits: the prompt's attention read the half cache too.
    const std::size_t V = half[0].logits.size() / half[0].tokens.size();
    double scale = 0, diff = 0;
    for (std::size_t i = 0; i < V; ++i) {
      scale = std::max(scale, std::abs(static_cast<double>(f32[0].logits[i])));
      diff = std::max(diff, std::abs(static_cast<double>(half[0].logits[i]) - f32[0].logits[i]));
    }
    EXPECT_GT(diff, 0.0);
    EXPECT_LT(diff, (dt == DType::f16 ? 1e-2 : 5e-2) * (1 + scale));
    for (llm::GraphOrder order : {llm::GraphOrder::update_then_replay, llm::GraphOrder::replay_then_update}) {
      const auto batch = ragged(8);
      expect_same(run({.max_batch = 4, .mode = llm::StepMode::eager, .kv_dtype = dt}, batch),
                  run({.max_batch = 4, .mode = llm::StepMode::graph, .order = order, .kv_dtype = dt}, batch));
    }
  }
}

TEST(LlmEngine, BadKvDtypesAreRefused) {
  EXPECT_TRUE(throws<npugraph::ArgumentError>(
      [] { run({.kv_dtype = npugraph::DType::i8}, {{.prompt = "hi"}}); },
      {"kv_dtype = int8", "must be float32, float16 or bfloat16"}));
  // A half cache on a cuda device: refused before the model loads, whether or not a GPU is present.
  EXPECT_TRUE(throws<npugraph::UnsupportedError>(
      [] {
        llm::Engine e({.model = "/nonexistent/model.gguf", .device = npugraph::Device::cuda(0),
                       .kv_dtype = npugraph::DType::f16});
      },
      {"device = cuda:0", "kv_dtype = float16 runs on the cpu only"}));
}

TEST(LlmEngine, BadActivationsAreRefused) {
  EXPECT_TRUE(throws<npugraph::ArgumentError>(
      [] { run({.activations = static_cast<npugraph::ops::Activations>(9)}, {{.prompt = "hi"}}); },
      {"activations = 9", "must be Activations::f32 or Activations::q8"}));
  // q8 on a cuda device: refused before the model loads, whether or not a GPU is present.
  EXPECT_TRUE(throws<npugraph::UnsupportedError>(
      [] {
        llm::Engine e({.model = "/nonexistent/model.gguf", .device = npugraph::Device::cuda(0),
                       .activations = npugraph::ops::Activations::q8});
      },
      {"device = cuda:0", "activations = q8 runs on the cpu only"}));
}

// EngineOptions::device: a cuda device this machine lacks (or this build has no backend for) is an
// UnsupportedError naming it, raised before the model file is opened (the path does not exist).
TEST(LlmEngine, ACudaDeviceWithoutAGpuIsRefusedBeforeTheModelLoads) {
  if (npugraph::detail::cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present: CudaGpuEngine covers it";
  const char* why = NPUGRAPH_BUILT_WITH_CUDA ? "no CUDA device is present" : "no backend";
  EXPECT_TRUE(throws<npugraph::UnsupportedError>(
      [&] { llm::Engine e({.model = "/nonexistent/model.gguf", .device = npugraph::Device::cuda(0)}); },
      {"cuda:0", why}));
}

// Tensor parallelism with a cuda device is refused, naming the device and the rank count (its
// collectives are MPI on host memory), whether or not a GPU is present.
TEST(LlmEngine, TensorParallelOnACudaDeviceIsRefused) {
  struct TwoRanks final : llm::TensorParallel {
    int rank() const override { return 0; }
    int size() const override { return 2; }
    void all_reduce(const npugraph::Tensor&) override {}
  };
  EXPECT_TRUE(throws<npugraph::UnsupportedError>(
      [&] {
        llm::Engine e({.model = "/nonexistent/model.gguf", .tensor_parallel = std::make_shared<TwoRanks>(),
                       .device = npugraph::Device::cuda(0)});
      },
      {"device = cuda:0", "tensor parallelism (2 ranks)", "cpu only"}));
}

}  // namespace

namespace {

// FIA's workspace bytes are not monotonic in the shape: the runner sized it at the powers of two
// up to prefill_chunk (and the decode buckets), and with SmolLM2's attention (9 query heads of 64,
// 3 KV heads), max_batch 4 and prefill_chunk 128, a 106-token chunk needed more than any of them:
// npugraph-serve answered 500 ("workspace has 325312 bytes; these arguments need 336576"). Every
// chunk length from 1 to prefill_chunk now runs, and every decode batch of 1 .. max_batch.
TEST(LlmEngine, EveryChunkLengthAndBatchFitsTheWorkspace) {
  static const auto smol = ngtest::write_tiny_llama(
      "tiny_smollm_heads.gguf", {.layers = 1, .hidden = 576, .heads = 9, .kv_heads = 3, .ffn = 64});
  llm::Engine e({.model = smol, .threads = 2, .max_batch = 4, .prefill_chunk = 128, .mode = llm::StepMode::eager});
  auto drain = [&](const std::string& what) {
    while (!e.idle()) {
      std::vector<llm::StepOutput> outs;
      ASSERT_NO_THROW(outs = e.step()) << what;
      for (const llm::StepOutput& o : outs) {
        EXPECT_NE(o.finish, llm::FinishReason::error) << what;
      }
    }
  };
  std::string prompt;
  for (int n = 1; n <= 140; ++n) {
    prompt += static_cast<char>('a' + n % 26);
    e.submit({.prompt = prompt, .max_tokens = 1, .chat = false});
    drain(std::to_string(n) + " characters");
  }
  for (int b = 1; b <= 4; ++b) {  // decode batches of each size
    for (int i = 0; i < b; ++i) e.submit({.prompt = "abc" + std::string(static_cast<std::size_t>(i), 'd'), .max_tokens = 3, .chat = false});
    drain("batch " + std::to_string(b));
  }
}

}  // namespace

namespace {

// Issue 45 item 5 (a static memory plan: a replay allocates nothing): once a bucket's step is
// captured, its decode steps — the inputs written, the attention updated, the graph replayed,
// the token sampled — make no allocation in npugraph's allocator, in either graph order; the
// buffers, the workspace and the graph's pool were all sized up front. (Eager steps allocate
// nothing either: every op writes the runner's buffers through its out= form.)
TEST(LlmEngine, DecodeReplaysAllocateNothing) {
  for (llm::GraphOrder order : {llm::GraphOrder::update_then_replay, llm::GraphOrder::replay_then_update}) {
    llm::Engine e({.model = tiny(), .threads = 2, .max_batch = 4, .mode = llm::StepMode::graph, .order = order});
    for (int i = 0; i < 3; ++i)  // EOS (2) banned: every request runs its 40 tokens
      e.submit({.prompt = "the tall cat " + std::to_string(i), .max_tokens = 40, .chat = false, .logit_bias = {{2, -100.0}}});
    for (int s = 0; s < 4; ++s) e.step();  // prefilled; the bucket of 4 captured and replayed once
    ASSERT_EQ(e.load().running, 3);
    const npugraph::AllocatorStats before = npugraph::allocator_stats();
    const std::int64_t captured = e.captured_graphs();
    for (int s = 0; s < 20; ++s) {
      const std::vector<llm::StepOutput> outs = e.step();
      ASSERT_EQ(outs.size(), 3u) << "step " << s << ": one token per running request";
    }
    const npugraph::AllocatorStats after = npugraph::allocator_stats();
    EXPECT_EQ(e.captured_graphs(), captured);
    EXPECT_EQ(after.allocation[npugraph::kStatAll].allocated, before.allocation[npugraph::kStatAll].allocated)
        << "allocations made by 20 decode replays";
    EXPECT_EQ(after.num_device_alloc, before.num_device_alloc);
    // The counter sees an allocation where there is one (the measurement is live).
    const npugraph::Tensor t = npugraph::empty({1 << 16}, npugraph::DType::f32);
    EXPECT_EQ(npugraph::allocator_stats().allocation[npugraph::kStatAll].allocated,
              after.allocation[npugraph::kStatAll].allocated + 1);
  }
}

}  // namespace
