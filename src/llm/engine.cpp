#include "npugraph/llm/engine.hpp"

#include <chrono>
#include <cstring>
#include <algorithm>
#include <deque>

#include "llm/runner.hpp"
#include "npugraph/error.hpp"
#include "npugraph/llm/tensor_parallel.hpp"
#include "npugraph/stream.hpp"

namespace npugraph::llm {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::uint64_t fnv1a(const void* data, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

void check_options(const EngineOptions& o) {
  NG_CHECK_ARG(o.max_batch >= 1 && o.max_batch <= 16, "max_batch = ", o.max_batch, ": must be in [1, 16]");
  NG_CHECK_ARG(o.block_size >= 128 && o.block_size <= 512 && o.block_size % 128 == 0, "block_size = ",
               o.block_size, ": must be 128, 256, 384 or 512 (FIA's paged prefill)");
  NG_CHECK_ARG(o.max_context == 0 || o.max_context >= 2, "max_context = ", o.max_context,
               ": must be at least 2 tokens (0: the model's context, at most 2048)");
  NG_CHECK_ARG(o.prefill_chunk >= 1 && o.prefill_chunk <= 2048, "prefill_chunk = ", o.prefill_chunk,
               ": must be in [1, 2048]");
  NG_CHECK_ARG(o.threads >= 0, "threads = ", o.threads, ": must be >= 0 (0: every core)");
  NG_CHECK_ARG(o.temperature >= 0 && o.temperature == o.temperature, "temperature = ", o.temperature,
               ": must be >= 0 (0: greedy)");
  NG_CHECK_ARG(o.top_p > 0 && o.top_p <= 1, "top_p = ", o.top_p, ": must be in (0, 1]");
  NG_CHECK_ARG(o.top_k >= 0, "top_k = ", o.top_k, ": must be >= 0 (0: no top-k)");
  NG_CHECK_ARG(!o.activations || *o.activations == ops::Activations::f32 ||
                   *o.activations == ops::Activations::q8,
               "activations = ", static_cast<int>(*o.activations), ": must be Activations::f32 or Activations::q8");
  if (!o.device.is_cpu()) {
    NG_CHECK_AS(UnsupportedError, o.activations != ops::Activations::q8, "device = ", o.device.str(),
                ": activations = q8 runs on the cpu only (leave activations unset, or Activations::f32)");
    NG_CHECK_AS(UnsupportedError, !o.tensor_parallel || o.tensor_parallel->size() == 1, "device = ",
                o.device.str(), ": tensor parallelism (", o.tensor_parallel->size(),
                " ranks) runs on the cpu only (its collectives are MPI on host memory)");
    (void)Stream::default_stream(o.device);  // no such device: UnsupportedError naming it and why
  }
}

// A request being served.
struct Active {
  std::size_t index;
  Sequence seq;
  Result result;
  std::unique_ptr<StreamDecoder> decoder;
  std::int64_t max_tokens;
};

}  // namespace

Engine::Engine(EngineOptions options) : options_(std::move(options)) {
  check_options(options_);
  TensorSplit split;
  if (const auto& tp = options_.tensor_parallel) split = {.rank = tp->rank(), .size = tp->size()};
  model_ = Model::load(options_.model, split);
  const ModelConfig& mc = model_->config();
  if (options_.max_context == 0) {
    options_.max_context = std::min<std::int64_t>(mc.context, 2048);
    if (mc.sliding_window > 0) options_.max_context = std::min(options_.max_context, mc.sliding_window);
  }
  NG_CHECK_AS(UnsupportedError, mc.sliding_window == 0 || options_.max_context <= mc.sliding_window,
              "max_context = ", options_.max_context, ": ", mc.name, "'s sliding-window layers attend to the last ",
              mc.sliding_window, " tokens, and npugraph's decode attention takes no window yet: max_context must be at "
              "most ", mc.sliding_window, " (then every layer sees the whole context, as the window would)");
  NG_CHECK_ARG(options_.max_context <= model_->config().context, "max_context = ", options_.max_context,
               ": the model was trained for ", model_->config().context, " tokens");
  runner_ = std::make_unique<ModelRunner>(model_, options_);
}

Engine::~Engine() = default;

const Model& Engine::model() const { return *model_; }
std::int64_t Engine::vocab() const { return model_->config().vocab; }

std::vector<Result> Engine::generate(std::span<const Request> requests,
                                     const std::function<void(std::size_t, std::string_view)>& on_text) {
  const Tokenizer& tok = model_->tokenizer();
  stats_ = {};
  std::vector<Result> results(requests.size());
  std::deque<Active> waiting;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    NG_CHECK_ARG(!r.prompt.empty(), "requests[", i, "].prompt is empty: give the model something to answer");
    NG_CHECK_ARG(r.max_tokens >= 1, "requests[", i, "].max_tokens = ", r.max_tokens, ": must be >= 1");
    Active a{i, {}, {}, std::make_unique<StreamDecoder>(tok, DecodeOptions{.skip_special = true}), r.max_tokens};
    const std::vector<ChatMessage> turn{{"user", r.prompt}};
    a.seq.tokens = tok.encode(r.chat ? tok.apply_chat_template(turn, true) : r.prompt);
    a.seq.seed = r.seed;
    const auto n = static_cast<std::int64_t>(a.seq.tokens.size());
    NG_CHECK_ARG(n + 1 <= options_.max_context, "requests[", i, "].prompt is ", n,
                 " tokens: longer than the context allows (max_context = ", options_.max_context,
                 " leaves room for ", options_.max_context - 1, " prompt tokens)");
    a.result.prompt_tokens = a.seq.tokens;
    waiting.push_back(std::move(a));
  }
  std::vector<Active> running;
  // Appends a generated token; returns whether the request is done.
  auto take = [&](Active& a, std::int32_t id, const float* logits) {
    a.seq.tokens.push_back(id);
    a.seq.generated += 1;
    a.result.tokens.push_back(id);
    const auto vocab = static_cast<std::size_t>(model_->config().vocab);
    if (options_.keep_logits) a.result.logits_hashes.push_back(fnv1a(logits, vocab * sizeof(float)));
    if (options_.keep_full_logits) a.result.logits.insert(a.result.logits.end(), logits, logits + vocab);
    const bool stop = tok.is_end_of_generation(id);
    if (!stop) {
      const std::string piece = a.decoder->push(id);
      a.result.text += piece;
      if (on_text && !piece.empty()) on_text(a.index, piece);
    }
    a.result.stopped = stop;
    return stop || a.seq.generated >= a.max_tokens ||
           static_cast<std::int64_t>(a.seq.tokens.size()) >= options_.max_context;
  };
  auto finish = [&](Active& a) {
    const std::string tail = a.decoder->finish();
    a.result.text += tail;
    if (on_text && !tail.empty()) on_text(a.index, tail);
    runner_->blocks().release(a.seq.blocks);
    results[a.index] = std::move(a.result);
  };
  while (!waiting.empty() || !running.empty()) {
    // Admit waiting requests while there is room in the batch (continuous batching).
    while (!waiting.empty() && static_cast<std::int64_t>(running.size()) < runner_->max_batch()) {
      Active a = std::move(waiting.front());
      waiting.pop_front();
      const auto t = Clock::now();
      const Tensor logits = runner_->prefill(a.seq);
      stats_.prefill_seconds += since(t);
      stats_.prefill_tokens += static_cast<std::int64_t>(a.seq.tokens.size());
      if (take(a, runner_->next_ids()[0], static_cast<const float*>(logits.data()))) finish(a);
      else running.push_back(std::move(a));
    }
    if (running.empty()) continue;
    std::vector<Sequence*> batch;
    for (Active& a : running) batch.push_back(&a.seq);
    if (options_.mode == StepMode::graph) {  // capture once per bucket, outside the step's timing
      const auto tc = Clock::now();
      runner_->prepare(static_cast<std::int64_t>(batch.size()));
      stats_.capture_seconds += since(tc);
    }
    const auto t = Clock::now();
    const Tensor logits = runner_->decode(batch, options_.mode, stats_.host);
    stats_.decode_seconds += since(t);
    stats_.decode_steps += 1;
    stats_.decode_tokens += static_cast<std::int64_t>(batch.size());
    stats_.batch_per_step.push_back(static_cast<std::int64_t>(batch.size()));
    const std::int32_t* ids = runner_->next_ids();
    const auto* rows = static_cast<const float*>(logits.data());
    std::vector<Active> still;
    for (std::size_t b = 0; b < running.size(); ++b) {
      if (take(running[b], ids[b], rows + b * static_cast<std::size_t>(model_->config().vocab))) finish(running[b]);
      else still.push_back(std::move(running[b]));
    }
    running = std::move(still);
  }
  return results;
}

}  // namespace npugraph::llm
