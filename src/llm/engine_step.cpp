// The step-level engine: submit / step / cancel (include/npugraph/llm/engine.hpp).
//
// Note [Step-level engine]
// A server's batch changes every step; the engine's does too, without ever re-capturing. submit()
// checks and tokenises a request on the caller's thread and queues it under the scheduler's lock;
// cancel() marks an id under the same lock. step() (one thread at a time) takes both, then:
//   1. cancelled requests end: waiting ones leave the queue, running ones free their KV blocks;
//   2. waiting requests join while batch rows are free (max_batch; the KV cache holds max_context
//      tokens for every row, so a joined request never runs out of blocks); with the prefix cache
//      a joining prompt first takes its cached prefix's blocks (Note [Prefix cache]);
//   3. prefill: the joined requests' next chunks, in admission order, prefill_chunk tokens in all
//      per step — a quarter of that while other requests decode, which bounds their inter-token
//      latency (at 16 streaming clients on SmolLM2 it took p99 from 134 to 95 ms) — at least one
//      chunk. A chunk is always [k * prefill_chunk, (k + 1) * prefill_chunk) of its own prompt,
//      whatever else runs (Note [Batch invariance]); the chunk that ends a prompt samples its
//      first token; after each chunk the sequence publishes the blocks it may to the prefix cache;
//   4. one decode step of every request past its prefill (the captured step of its bucket,
//      updated: Note [Decode step graph]) — with step 3's last chunk in the same pass where the
//      steps mix (Note [Mixed steps]);
//   5. each new token goes to the output processor (Note [Output processor]: text, stop strings,
//      finish reasons); a request that ends frees its blocks at once.
// Sampling settings are per request: each row's temperature, top_k, top_p, seed and step, and its
// penalties and logit biases as a list (Note [Logit adjustments]), are the runner's device
// buffers, written with the step's inputs and read by the captured sampling op
// (ops::sample_rows_out), whose draw depends on (seed, step) only — so, the logits being the
// request's own (Note [Batch invariance]), a request samples the same tokens alone or in any batch.
//
// Note [Batch invariance]
// What is guaranteed: on one engine's options (model, device, threads, prefill_chunk, activations,
// kv_dtype, block_size, max_context) and machine (its SIMD target), a request's logits at every
// step, and so its tokens (greedy or seeded) and text, are bitwise those it gets alone — whatever
// other requests run beside it, when they joined, how long their prompts are, the decode bucket
// its row falls in, its row, which KV blocks it holds, and whether its prompt's first blocks came
// from the prefix cache (Note [Prefix cache]: a hit ends on a chunk boundary, and only blocks of
// full prefill chunks are cached, so the chunks it computes are its cold ones). Not across options: threads changes
// FIA's decode splits, prefill_chunk the chunks, activations the projections' arithmetic.
// Why — every op computes a request's rows with the same operations in the same order whatever
// else shares the call:
//   - Prefill runs one request's chunk at a time (FIA batch 1), at positions fixed by its own
//     prompt (above): the scheduler's budget decides how many chunks a step runs, never where one
//     starts or ends. With q8 activations, rows16 projections run the packed q8 kernel at every
//     row count; a projection in the rows layout takes the q8 GEMV for a chunk of up to 16 tokens
//     and the float32 GEMM for a longer one — fixed by the request's own length and prefill_chunk.
//   - A decode step is one row per request (max_batch <= 16: always the q8 GEMV on the cpu). The
//     projections compute each output row as one chain in a fixed order, whatever the number of
//     rows (Note [Linear kernels]; Note [Linear on CUDA]); RMSNorm, rope, SwiGLU, the embedding,
//     the KV write and sampling are per row; padding rows write no KV and attend to nothing.
//   - Attention: FIA's decode kernel splits row b's KV columns by b's own length and the thread
//     count only (Note [FIA decode splits]; on CUDA split_count() in fia_cuda_core.hpp), and
//     merges the splits in order; the block table maps the same columns in the same order
//     wherever the blocks are. It once sized the splits from the whole batch's KV length: a row
//     past kMinSplit (256) tokens got fewer splits beside others than alone, and 0 of 16 copies
//     of a 3-chunk prompt kept their lone bits (issue 46, item 5).
//   - A mixed step (below) computes each row with the ops of its own pass: the same bits.
// Tested: tests/llm/test_engine_batch_invariance.cpp (16 copies of a 3-chunk prompt; 16 prompt
// lengths up to 3 chunks; graph and eager), test_engine_step.cpp (requests joining mid-flight),
// FiaFast.DecodeRowsHaveTheirLoneBitsInAnyBatch, and the linear suites' batch-invariance tests.
//
// Note [Mixed steps]
// A step that prefills a joining prompt while others decode used to run the chunk, then the decode
// step: the decoders waited for both passes over the weights, and a step's cost was the chunk's
// plus a decode step's (issue 47 item 6). Where the steps mix (ModelRunner::mixes()), the plan's
// last chunk runs in the decode step's pass instead: rows [0, D) are the D other requests the step
// decodes, one token each (no padding rows), rows [D, D + n) the chunk's n tokens. Every
// op but attention takes all D + n rows in one call — embedding, RMSNorm, the projections (each
// weight read once for the decode rows and the chunk), RoPE at each row's position, the KV write at
// each row's slot, SwiGLU/GeGLU; attention is two FIA calls, the decode rows' (batch D, their
// block tables and lengths) and the chunk's (batch 1, causal or the band over its prompt's blocks),
// each the call its own pass issues; the output projection and sampling take the D decode rows and,
// when the chunk ends its prompt, its last row (sampling row D: its first token).
// Same bits: each of these ops computes a row from that row alone, whatever else shares the call,
// except the projections in the rows layout with q8 activations (the K-quants: Gemma 3 Q4_K_M's
// Q4_K/Q6_K), whose GEMV serves up to 16 rows and the float32 GEMM more: in a step of more than 16
// rows each of those is two calls, the decode rows' and the chunk's (LayerStep::split), as their
// own passes make them — the shared weight read is lost there, the rest of the pass is not. The
// rows16 weights' q8 kernel serves every row count (SmolLM2's Q4_1/Q8_0 are all one call). The
// cpu only, without tensor parallelism (EngineOptions::mixed_steps turns it off). A mixed step is
// eager: graph mode's captured buckets are decode-only, and graph == eager.
// The chunk's own request, when the chunk ends its prompt, samples its first token there and
// decodes from the next step (an unmixed step decodes it at once: one token more in its first
// step). Measured (2-core Xeon, a prompt joining D decoders): the join step took 32-39 ms mixed
// against 36-48 ms unmixed at D = 1, 3, 8 (SmolLM2, a 45-token chat prompt), 38-48 ms against
// 50-56 ms at D = 1, 4 (Gemma 3 Q4_K_M, a ~50-token raw prompt, its K-quant projections per part).
// Tested: the engine suites' joins mid-flight (each request's tokens and logits bitwise its lone
// run) run mixed steps and count them; mixed_steps = false runs none.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "llm/output_processor.hpp"
#include "llm/prefix_cache.hpp"
#include "llm/scheduler.hpp"
#include "npugraph/error.hpp"

namespace npugraph::llm {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

const char* finish_reason_name(FinishReason reason) noexcept {
  switch (reason) {
    case FinishReason::none: return "";
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::error: return "error";
  }
  return "";
}

Engine::~Engine() = default;

std::unique_ptr<RequestState> Engine::make_state(const Request& r, const std::string& label) const {
  const Tokenizer& tok = model_->tokenizer();
  NG_CHECK_ARG(r.prompt.empty() || r.messages.empty(), label, ": give a prompt or messages, not both");
  NG_CHECK_ARG(!r.prompt.empty() || !r.messages.empty(), label,
               ".prompt is empty (and no messages): give the model something to answer");
  NG_CHECK_ARG(r.max_tokens >= 1, label, ".max_tokens = ", r.max_tokens, ": must be >= 1");
  const double temperature = r.temperature.value_or(options_.temperature);
  const std::int64_t top_k = r.top_k.value_or(options_.top_k);
  const double top_p = r.top_p.value_or(options_.top_p);
  NG_CHECK_ARG(std::isfinite(temperature) && temperature >= 0, label, ".temperature = ", temperature,
               ": must be finite and >= 0 (0: greedy)");
  NG_CHECK_ARG(top_k >= 0 && top_k <= vocab(), label, ".top_k = ", top_k, ": must be in [0, ", vocab(),
               "] (0: no top-k; the model's vocabulary)");
  NG_CHECK_ARG(top_p > 0 && top_p <= 1, label, ".top_p = ", top_p, ": must be in (0, 1]");
  for (const auto& [name, k] : {std::pair{"logprobs", r.logprobs}, std::pair{"prompt_logprobs", r.prompt_logprobs}})
    if (k)
      NG_CHECK_ARG(*k >= 0 && *k <= kMaxTopLogprobs, label, ".", name, " = ", *k, ": must be in [0, ",
                   kMaxTopLogprobs, "] (the alternatives listed per token)");
  for (const auto& [name, v] : {std::pair{"presence_penalty", r.presence_penalty},
                                std::pair{"frequency_penalty", r.frequency_penalty}})
    NG_CHECK_ARG(std::isfinite(v) && v >= -2 && v <= 2, label, ".", name, " = ", v, ": must be in [-2, 2]");
  NG_CHECK_ARG(std::isfinite(r.repetition_penalty) && r.repetition_penalty > 0, label, ".repetition_penalty = ",
               r.repetition_penalty, ": must be finite and > 0 (1: off)");
  NG_CHECK_ARG(static_cast<std::int64_t>(r.logit_bias.size()) <= kMaxLogitBias, label, ".logit_bias has ",
               r.logit_bias.size(), " entries: at most ", kMaxLogitBias);
  for (const auto& [token, bias] : r.logit_bias) {
    NG_CHECK_ARG(token >= 0 && token < vocab(), label, ".logit_bias[", token, "]: token ", token,
                 " is outside the vocabulary [0, ", vocab(), ")");
    NG_CHECK_ARG(std::isfinite(bias) && bias >= -100 && bias <= 100, label, ".logit_bias[", token, "] = ", bias,
                 ": must be in [-100, 100]");
  }
  const bool adjusts = r.presence_penalty != 0 || r.frequency_penalty != 0 || r.repetition_penalty != 1 ||
                       !r.logit_bias.empty();
  NG_CHECK_AS(UnsupportedError, !adjusts || options_.device.is_cpu(), label, ": penalties and logit_bias on ",
              options_.device.str(), ": the CUDA sampler applies none yet (cpu only)");
  NG_CHECK_AS(UnsupportedError, !r.constraint || options_.device.is_cpu(), label, ": a constraint (structured output) on ",
              options_.device.str(), ": the CUDA sampler applies no token masks yet (cpu only)");
  for (std::size_t i = 0; i < r.stop.size(); ++i)
    NG_CHECK_ARG(!r.stop[i].empty(), label, ".stop[", i, "] is empty: a stop string needs at least one character");
  if (!options_.device.is_cpu() && temperature > 0)
    NG_CHECK_AS(UnsupportedError, (top_k == 0 || top_k == vocab()) && top_p == 1.0, label, ": top_k = ", top_k,
                ", top_p = ", top_p, " on ", options_.device.str(),
                ": the CUDA sampler draws from the whole vocabulary only (top_k 0, top_p 1)");
  for (std::size_t i = 0; i < r.messages.size(); ++i) {
    const std::string& role = r.messages[i].role;
    NG_CHECK_ARG(role == "system" || role == "user" || role == "assistant", label, ".messages[", i, "].role = '",
                 role, "': must be 'system', 'user' or 'assistant'");
  }
  auto a = std::make_unique<RequestState>();
  a->decoder = std::make_unique<StreamDecoder>(tok, DecodeOptions{.skip_special = true});
  const std::vector<ChatMessage> turn{{"user", r.prompt}};
  const std::string text = !r.messages.empty() ? tok.apply_chat_template(r.messages, true)
                           : r.chat           ? tok.apply_chat_template(turn, true)
                                              : r.prompt;
  const char* field = r.messages.empty() ? "prompt" : "messages";
  // Proved too long by its bytes: refused before the work of tokenising it (Note [A token count's
  // lower bound]).
  const auto at_least = static_cast<std::int64_t>(tok.min_tokens(text));
  NG_CHECK_AS(ContextLengthError, at_least + 1 <= options_.max_context, label, ".", field, " is ", text.size(),
              " bytes, at least ", at_least, " tokens: longer than the context allows (max_context = ",
              options_.max_context, " leaves room for ", options_.max_context - 1, " prompt tokens)");
  a->seq.tokens = tok.encode(text);
  const auto n = static_cast<std::int64_t>(a->seq.tokens.size());
  NG_CHECK_ARG(n >= 1, label, ": the prompt encodes to no tokens");
  NG_CHECK_AS(ContextLengthError, n + 1 <= options_.max_context, label, ".", field, " is ", n,
               " tokens: longer than the context allows (max_context = ", options_.max_context, " leaves room for ",
               options_.max_context - 1, " prompt tokens)");
  a->seq.seed = r.seed;
  a->seq.temperature = static_cast<float>(temperature);
  a->seq.top_k = top_k;
  a->seq.top_p = static_cast<float>(top_p);
  a->seq.logprobs = r.logprobs.value_or(-1);
  a->seq.prompt_logprobs = r.prompt_logprobs.value_or(-1);
  a->seq.adjust = LogitAdjust(r, a->seq.tokens);
  if (r.constraint) {
    a->seq.constraint = r.constraint();
    NG_CHECK_ARG(a->seq.constraint != nullptr, label, ".constraint: the factory made no constraint (null)");
  }
  a->max_tokens = r.max_tokens;
  a->stop = r.stop;
  a->result.prompt_tokens = a->seq.tokens;
  return a;
}

RequestId Engine::enqueue(std::unique_ptr<RequestState> a) { return sched_->enqueue(std::move(a)); }

RequestId Engine::submit(const Request& request) { return enqueue(make_state(request, "request")); }

PreparedRequest Engine::prepare(const Request& request) const {
  return PreparedRequest(make_state(request, "request"));
}

RequestId Engine::submit(PreparedRequest request) {
  NG_CHECK_ARG(request.state_ != nullptr, "request: a PreparedRequest already submitted (moved from)");
  return enqueue(std::move(request.state_));
}

PreparedRequest::PreparedRequest(std::unique_ptr<RequestState> state) : state_(std::move(state)) {}
PreparedRequest::PreparedRequest(PreparedRequest&&) noexcept = default;
PreparedRequest& PreparedRequest::operator=(PreparedRequest&&) noexcept = default;
PreparedRequest::~PreparedRequest() = default;
std::int64_t PreparedRequest::prompt_tokens() const {
  return state_ ? static_cast<std::int64_t>(state_->seq.tokens.size()) : 0;
}

bool Engine::cancel(RequestId id) { return sched_->cancel(id); }

std::int64_t Engine::captured_graphs() const { return runner_->captured(); }

bool Engine::idle() const { return sched_->idle(); }

EngineLoad Engine::load() const { return sched_->load(runner_->blocks().num_blocks()); }

std::vector<StepOutput> Engine::step() {
  Scheduler& s = *sched_;
  const auto stepping = s.begin_step();
  const OutputProcessor processor(model_->tokenizer(),
                                  {.vocab = model_->config().vocab, .max_context = options_.max_context,
                                   .keep_logits = options_.keep_logits, .keep_full_logits = options_.keep_full_logits});
  std::vector<StepOutput> outs = s.take_failed();
  auto output = [&](const RequestState& a) -> StepOutput& {
    for (StepOutput& prev : outs)  // its first token may be in this step's outputs already
      if (prev.id == a.id) return prev;
    StepOutput& o = outs.emplace_back();
    o.id = a.id;
    o.prompt_tokens = static_cast<std::int64_t>(a.result.prompt_tokens.size());
    o.cached_tokens = a.prefix_hit;
    return o;
  };
  // Ends a request: its text and finish reason (the processor), its blocks back to the cache.
  auto done = [&](std::unique_ptr<RequestState>& a, FinishReason reason, StepOutput& o) {
    processor.finish(*a, reason, o);
    runner_->blocks().release(a->seq.blocks);
    o.completion_tokens = static_cast<std::int64_t>(a->result.tokens.size());
    o.result = std::move(a->result);
    a.reset();
  };
  BlockManager& blocks = runner_->blocks();
  auto kv_load = [&] {
    return EngineLoad{.kv_blocks_used = blocks.used_blocks(), .kv_blocks_cached = blocks.cached_free_blocks(),
                      .prefix_cache_queries = prefix_.queries, .prefix_cache_hits = prefix_.hits,
                      .mixed_steps = mixed_steps_};
  };
  // Note [Prefix cache]: a joining prompt takes its cached prefix, unless it wants every prompt
  // row's logits (prompt logprobs).
  const PrefixPolicy policy{.block_size = options_.block_size, .prefill_chunk = options_.prefill_chunk};
  auto admit = [&](RequestState& a) {
    if (!blocks.caching() || a.seq.prompt_logprobs >= 0) return;
    a.prefix_hit = take_cached_prefix(blocks, a.seq, policy);
    prefix_.queries += static_cast<std::int64_t>(a.seq.tokens.size());
    prefix_.hits += a.prefix_hit;
  };
  // The scheduler's plan: cancellations (1), admissions (2), prefill chunks (3).
  StepPlan plan = s.schedule(admit);
  for (auto& a : plan.cancelled) done(a, FinishReason::cancelled, output(*a));
  const auto vocab = static_cast<std::size_t>(model_->config().vocab);
  // A chunk's end: its blocks to the prefix cache; the one that ends a prompt samples its first
  // token (`id`, from `logits`).
  auto chunk_done = [&](RequestState& a, const float* logits, std::int32_t id) {
    if (blocks.caching()) publish_prefix(blocks, a.seq, static_cast<std::int64_t>(a.result.prompt_tokens.size()), policy);
    if (!logits) return;
    a.prefilled = true;
    StepOutput& o = output(a);
    if (a.seq.prompt_logprobs >= 0) {
      a.result.prompt_logprobs = std::move(a.seq.prompt_logprobs_out);
      o.prompt_logprobs = a.result.prompt_logprobs;
    }
    auto& slot = *std::find_if(s.active().begin(), s.active().end(), [&](const auto& p) { return p.get() == &a; });
    if (processor.take(a, id, logits, o)) {
      plan.drop_decode(&a);  // ended on its first token
      done(slot, a.result.finish, o);
    } else
      o.completion_tokens = a.seq.generated;
  };
  // 5. A decode step's tokens, text, ends (the output processor): row b is decoding[b]'s.
  auto decoded = [&](const std::vector<RequestState*>& decoding, const float* rows, const std::int32_t* ids) {
    for (auto& a : s.active()) {
      const auto b = static_cast<std::size_t>(std::find(decoding.begin(), decoding.end(), a.get()) - decoding.begin());
      if (b == decoding.size()) continue;
      StepOutput& o = output(*a);
      if (processor.take(*a, ids[b], rows + b * vocab, o))
        done(a, a->result.finish, o);
      else
        o.completion_tokens = a->seq.generated;
    }
    s.retire();
  };
  auto run_chunk = [&](RequestState& a) {
    const std::int64_t before = a.seq.cached;
    const auto t = Clock::now();
    const Tensor logits = runner_->prefill(a.seq, /*max_chunks=*/1);
    stats_.prefill_seconds += since(t);
    stats_.prefill_tokens += a.seq.cached - before;
    chunk_done(a, logits.defined() ? static_cast<const float*>(logits.data()) : nullptr, runner_->next_ids()[0]);
  };
  try {
    // Note [Mixed steps]: the plan's last chunk joins the decode rows of every other request the
    // plan decodes (its own request, when the chunk ends its prompt, decodes from the next step).
    const PrefillChunk* joined = nullptr;
    auto others = [&](const PrefillChunk& c) {
      std::vector<RequestState*> rest;
      for (RequestState* a : plan.decode)
        if (a != c.request) rest.push_back(a);
      return rest;
    };
    if (runner_->mixes() && !plan.prefill.empty() && plan.prefill.back().request->seq.prompt_logprobs < 0 &&
        !others(plan.prefill.back()).empty())
      joined = &plan.prefill.back();
    // 3. The prefill chunks (but the joined one).
    for (const PrefillChunk& chunk : plan.prefill)
      if (&chunk != joined) run_chunk(*chunk.request);
    s.retire();
    std::vector<RequestState*> decoders;
    if (joined) {
      decoders = others(*joined);  // those the other chunks ended on their first token have left it
      if (decoders.empty()) {      // none left to join: the chunk runs alone, as unmixed
        run_chunk(*joined->request);
        s.retire();
        joined = nullptr;
      }
    }
    // 4. One decode step of the plan's rows (every request past its prefill; with a joined chunk,
    // all but its own).
    const std::vector<RequestState*>& decoding = joined ? decoders : plan.decode;
    for (const RequestState* a : decoding)
      NG_CHECK_STATE(a->prefilled, "step: request ", a->id, " was planned to decode, but its prompt is prefilled only to ",
                     a->seq.cached, " of ", a->seq.tokens.size(), " tokens");
    std::vector<Sequence*> batch;
    for (RequestState* a : decoding) batch.push_back(&a->seq);
    if (joined) {  // one pass: the decode rows first, then the chunk's
      RequestState& a = *joined->request;
      const std::int64_t before = a.seq.cached;
      const auto t = Clock::now();
      const Tensor logits = runner_->mixed(batch, a.seq, stats_.host);
      stats_.mixed_seconds += since(t);
      stats_.mixed_steps += 1;
      mixed_steps_ += 1;
      stats_.mixed_decode_tokens += static_cast<std::int64_t>(batch.size());
      stats_.mixed_prefill_tokens += a.seq.cached - before;
      const auto* rows = static_cast<const float*>(logits.data());
      const std::int32_t* ids = runner_->next_ids();
      const bool ends = logits.size(0) > static_cast<std::int64_t>(batch.size());
      chunk_done(a, ends ? rows + batch.size() * vocab : nullptr, ids[batch.size()]);
      s.retire();
      decoded(decoding, rows, ids);
    } else if (!batch.empty()) {
      const auto n = static_cast<std::int64_t>(batch.size());
      if (options_.mode == StepMode::graph) {  // capture once per bucket, outside the step's timing
        const auto tc = Clock::now();
        runner_->prepare(n);
        stats_.capture_seconds += since(tc);
      }
      const auto t = Clock::now();
      const Tensor logits = runner_->decode(batch, options_.mode, stats_.host);
      stats_.decode_seconds += since(t);
      stats_.decode_steps += 1;
      stats_.decode_tokens += n;
      stats_.batch_per_step.push_back(n);
      decoded(decoding, static_cast<const float*>(logits.data()), runner_->next_ids());
    }
  } catch (...) {
    // The step failed (an op's error): what it produced and every request in a batch row, ended,
    // are reported by the next step.
    for (auto& a : s.active()) {
      if (!a) continue;
      StepOutput& o = outs.emplace_back();
      o.id = a->id;
      o.prompt_tokens = static_cast<std::int64_t>(a->result.prompt_tokens.size());
      processor.finish(*a, FinishReason::error, o);
      runner_->blocks().release(a->seq.blocks);
      o.completion_tokens = static_cast<std::int64_t>(a->result.tokens.size());
      o.result = std::move(a->result);
      a.reset();
    }
    s.retire();
    s.set_failed(std::move(outs));
    s.publish({}, kv_load());
    throw;
  }
  s.publish(outs, kv_load());
  return outs;
}

}  // namespace npugraph::llm
