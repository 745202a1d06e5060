// The decode engine: a GGUF model (llama, qwen2, qwen3, gemma3) generating text on npugraph.
//
//   npugraph::llm::Engine engine({.model = "SmolLM2-135M-Instruct.Q4_1.gguf"});
//   auto results = engine.generate({{.prompt = "What is a graph?"}},
//                                  [](std::size_t i, std::string_view text) { std::cout << text; });
//
// Or step by step, as a server drives it (Note [Step-level engine] in src/llm/engine_step.cpp):
//
//   const llm::RequestId id = engine.submit({.messages = {{"user", "Hi"}}, .temperature = 0.7});
//   while (!engine.idle())
//     for (const llm::StepOutput& out : engine.step()) std::cout << out.text;   // any request's
//   engine.cancel(other_id);                                                   // from any thread
//
// Requests run with continuous batching: up to max_batch at once; each is prefilled eagerly in
// chunks of prefill_chunk tokens when it joins (chunks interleaved with the running requests'
// decode steps), then decoded together one token per step; a finished or cancelled request frees
// its KV blocks at once and a waiting one joins. A decode step is captured once per batch-size
// bucket (1, 2, 4, 8, 16) and updated in place every step (src/llm/runner.hpp, Note [Decode step
// graph]); each row's sampling settings are device buffers the step reads, so a new mix of
// requests is never a re-capture. StepMode::eager runs the same ops without a graph, as the
// baseline, with the same logits bitwise. A request's logits and tokens never depend on what else
// runs: they are bitwise those it gets alone on the same options (Note [Batch invariance] in
// src/llm/engine_step.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "npugraph/device.hpp"
#include "npugraph/dtype.hpp"
#include "npugraph/llm/request.hpp"
#include "npugraph/llm/tokenizer.hpp"
#include "npugraph/ops/linear.hpp"

namespace npugraph::llm {

class Model;
class ModelRunner;
struct RequestState;  // src/llm/request_state.hpp
class Scheduler;      // src/llm/scheduler.hpp
class TensorParallel;  // npugraph/llm/tensor_parallel.hpp

enum class StepMode { graph, eager };
// How a graph step's attention updates meet its replay (Note [Decode step graph]).
enum class GraphOrder { update_then_replay, replay_then_update };

struct EngineOptions {
  std::filesystem::path model{};         // a GGUF file of an architecture in src/llm/arch
  int threads = 0;                       // compute threads (0: every core)
  std::int64_t max_batch = 16;           // sequences decoded together (1..16)
  std::int64_t max_context = 0;          // tokens per sequence, prompt included (0: the model's, at most 2048)
  std::int64_t block_size = 128;         // KV cache block (a multiple of 128, for FIA's prefill)
  std::int64_t prefill_chunk = 256;      // prompt tokens per prefill pass
  StepMode mode = StepMode::graph;
  GraphOrder order = GraphOrder::update_then_replay;
  double temperature = 0.0;              // 0: greedy
  std::int64_t top_k = 0;                // 0: no top-k
  double top_p = 1.0;
  bool keep_logits = false;              // keep a hash of every step's logits (graph vs eager checks)
  bool keep_full_logits = false;         // keep every step's logits row (reference checks; vocab floats each)
  bool fuse_projections = true;          // gate/up as one GEMV, and q/k/v for one token (the same logits, bitwise)
  // Tensor-parallel decode (Note [Tensor-parallel split]): this process is rank tensor_parallel->rank()
  // of size(); it loads only its part of the weights and all-reduces after w.o and w.down. Every rank
  // must make the same Engine calls with the same options and requests. Null: the whole model here.
  std::shared_ptr<TensorParallel> tensor_parallel{};
  // Where the model runs: the cpu, or cuda:N (the weights copied there once, the runner's buffers
  // there; Note [Engine on a device] in src/llm/runner.hpp). A cuda device without a GPU (or a
  // build without the CUDA backend) is an UnsupportedError naming the device, before the model loads.
  Device device = Device::cpu();
  // What the quantised weights' GEMVs (batches of up to 16 tokens) multiply: x quantised to int8
  // per block of 32 as llama.cpp does (q8), or x as it is (f32); Note [Q8 activations]. Unset: q8
  // on the cpu, f32 on cuda (q8 on a cuda device is an UnsupportedError).
  std::optional<ops::Activations> activations{};
  // The KV cache's element type: float32 (exact), or float16 / bfloat16 (half the bytes attention
  // reads per step, as llama.cpp's default float16 cache; each key and value rounded once as it is
  // written, attention computing in float32 on the widened values). cpu only for the half types.
  DType kv_dtype = DType::f32;
  // Prefix caching (Note [Prefix cache] in src/llm/prefix_cache.hpp): full KV blocks of finished
  // and running prompts stay cached, keyed by their token prefix; a later prompt starting with the
  // same tokens takes them and prefills only the rest, with the same logits bitwise as without.
  // Hits come in steps of lcm(block_size, prefill_chunk) tokens. Cached blocks no request holds
  // count as free (EngineLoad::kv_blocks_cached) and are evicted least recently used.
  bool prefix_cache = false;
  // Mixed steps (Note [Mixed steps] in src/llm/engine_step.cpp): a step's prompt chunk runs in the
  // same forward pass as its decode rows, every row with the bits of its own pass (the cpu, without
  // tensor parallelism); elsewhere, and when false, the chunk runs before the decode step.
  bool mixed_steps = true;
};

// Host time of decode steps, split as the summary shows it.
struct StepTimes {
  double inputs = 0;  // writing ids, positions, slots, block tables into the device buffers
  double update = 0;  // the attention layers' task updates (graph mode)
  double launch = 0;  // issuing the step: the replay (graph) or every op (eager)
  double wait = 0;    // until the step's results are readable
};

struct RunStats {
  std::int64_t prefill_tokens = 0, decode_tokens = 0, decode_steps = 0;
  // Decode steps that carried a prompt chunk (Note [Mixed steps]): apart from the decode and
  // prefill figures above (one pass does both), their decode rows, chunk tokens and time.
  std::int64_t mixed_steps = 0, mixed_decode_tokens = 0, mixed_prefill_tokens = 0;
  double mixed_seconds = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  double capture_seconds = 0;      // graph mode: capturing the buckets' decode steps (once each)
  StepTimes host;                  // summed over decode steps
  std::vector<std::int64_t> batch_per_step;
};

// A request checked and tokenised by Engine::prepare(), not yet queued.
class PreparedRequest {
 public:
  PreparedRequest(PreparedRequest&&) noexcept;
  PreparedRequest& operator=(PreparedRequest&&) noexcept;
  ~PreparedRequest();
  std::int64_t prompt_tokens() const;

 private:
  friend class Engine;
  explicit PreparedRequest(std::unique_ptr<RequestState> state);
  std::unique_ptr<RequestState> state_;
};

class Engine {
 public:
  // Loads the model and sizes the KV cache and buffers. ArgumentError for a bad option (named), an
  // unknown file, or a model npugraph does not run.
  explicit Engine(EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Generates for every request (submit() each, then step() until all are done); `on_text(i,
  // piece)` receives request i's text as it is decoded. ArgumentError as submit() says, naming
  // requests[i]; nothing runs then. Requests already submitted run alongside.
  std::vector<Result> generate(std::span<const Request> requests,
                               const std::function<void(std::size_t, std::string_view)>& on_text = {});

  // Queues a request; thread-safe. ArgumentError naming the field for: no prompt and no messages
  // (or both), max_tokens < 1, temperature / top_k / top_p / logprobs / penalties / logit_bias
  // out of range, an empty stop string, a prompt that leaves no room in max_context
  // (ContextLengthError, an ArgumentError: npugraph/llm/request.hpp); UnsupportedError for top_k /
  // top_p, penalties and logit_bias on cuda.
  RequestId submit(const Request& request);
  // submit() in two halves, for a server: prepare() checks and tokenises (const, thread-safe, takes
  // no lock: the work of a long prompt holds up nothing else), then submit(PreparedRequest) queues
  // it (a short lock). A prompt whose bytes alone prove it longer than the context is refused
  // before it is tokenised (Tokenizer::min_tokens). Errors as submit(const Request&).
  PreparedRequest prepare(const Request& request) const;
  RequestId submit(PreparedRequest request);
  // One step: admits waiting requests into free batch rows and KV blocks, runs the next prefill
  // chunks (prefill_chunk tokens in all, a quarter of that while others decode; at least one
  // chunk), then one decode step of every request
  // past its prefill; returns what each request produced (finished ones included, cancelled ones
  // with FinishReason::cancelled). One thread at a time: a second concurrent step() is an
  // ArgumentError. A failure inside the step (an op's error) propagates and ends every running
  // request: the next step() reports them with FinishReason::error; the engine stays usable.
  std::vector<StepOutput> step();
  // Cancels a waiting or running request (thread-safe); its KV blocks are freed by the next step(),
  // which reports it. False when no such request is waiting or running.
  bool cancel(RequestId id);
  // Nothing waiting or running (thread-safe).
  bool idle() const;
  EngineLoad load() const;
  // Decode-step graphs captured so far (graph mode): one per batch-size bucket ever used, however
  // the requests and their sampling settings mix.
  std::int64_t captured_graphs() const;

  // Timings: the last generate()'s, or every step() since reset_stats().
  const RunStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }
  const Model& model() const;
  std::int64_t vocab() const;
  const EngineOptions& options() const { return options_; }

 private:
  EngineOptions options_;
  std::shared_ptr<const Model> model_;
  std::unique_ptr<ModelRunner> runner_;
  RunStats stats_;
  struct PrefixCounts {
    std::int64_t queries = 0, hits = 0;  // prompt tokens looked up, taken (the stepping thread's)
  } prefix_;
  std::int64_t mixed_steps_ = 0;  // since the engine started (EngineLoad::mixed_steps)
  // The requests from submit() to their end, and each step's plan (src/llm/scheduler.hpp).
  std::unique_ptr<Scheduler> sched_;
  // A checked, tokenised request (errors name `label`'s fields), and its queueing.
  std::unique_ptr<RequestState> make_state(const Request& request, const std::string& label) const;
  RequestId enqueue(std::unique_ptr<RequestState> pending);
};

}  // namespace npugraph::llm
