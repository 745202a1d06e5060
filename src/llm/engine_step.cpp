// The step-level engine: submit / step / cancel (include/npugraph/llm/engine.hpp).
//
// Note [Step-level engine]
// A server's batch changes every step; the engine's does too, without ever re-capturing. submit()
// checks and tokenises a request on the caller's thread and queues it under the scheduler's lock;
// cancel() marks an id under the same lock. step() (one thread at a time) takes both, then:
//   1. cancelled requests end: waiting ones leave the queue, running ones free their KV blocks;
//   2. waiting requests join while batch rows are free (max_batch; the KV cache holds max_context
//      tokens for every row, so a joined request never runs out of blocks);
//   3. prefill: the joined requests' next chunks, in admission order, prefill_chunk tokens in all
//      per step — a quarter of that while other requests decode, which bounds their inter-token
//      latency (at 16 streaming clients on SmolLM2 it took p99 from 134 to 95 ms) — at least one
//      chunk. A chunk is always [k * prefill_chunk, (k + 1) * prefill_chunk)
//      of its own prompt, whatever else runs, so a request's logits do not depend on the mix; the
//      chunk that ends a prompt samples its first token;
//   4. one decode step of every request past its prefill (the captured step of its bucket,
//      updated: Note [Decode step graph]);
//   5. each new token is appended and decoded to text; a request ends on an end-of-generation
//      token, a stop string, max_tokens or a full context, and frees its blocks at once.
// Sampling settings are per request: each row's temperature, top_k, top_p, seed and step are the
// runner's device buffers, written with the step's inputs and read by the captured sampling op
// (ops::sample_rows_out), whose draw depends on (seed, step) only — so a request samples the same
// tokens alone or in any batch, and greedy requests are bitwise those of a run one at a time.
// Stop strings: text that could be the start of a stop string is held back until the next token
// decides it; the text a request returns ends before the first stop string's start.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "llm/engine_scheduler.hpp"
#include "npugraph/error.hpp"

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

// The length of the longest suffix of `text` (after `from`) that is a proper prefix of a stop string.
std::size_t held_back(const std::string& text, std::size_t from, const std::vector<std::string>& stops) {
  std::size_t hold = 0;
  for (const std::string& s : stops)
    for (std::size_t k = std::min(s.size() - 1, text.size() - from); k > hold; --k)
      if (text.compare(text.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
  return hold;
}

// Cuts the text before its first stop string, if it has one; a stop string can only start at or
// after `emitted` (what may start one is held back).
bool cut_at_stop(std::string& text, std::size_t emitted, const std::vector<std::string>& stops) {
  std::size_t cut = std::string::npos;
  for (const std::string& s : stops) cut = std::min(cut, text.find(s, emitted));
  if (cut == std::string::npos) return false;
  text.resize(cut);
  return true;
}

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

std::unique_ptr<Engine::Pending> Engine::prepare(const Request& r, const std::string& label) const {
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
  auto a = std::make_unique<Pending>();
  a->decoder = std::make_unique<StreamDecoder>(tok, DecodeOptions{.skip_special = true});
  if (!r.messages.empty()) {
    a->seq.tokens = tok.encode(tok.apply_chat_template(r.messages, true));
  } else {
    const std::vector<ChatMessage> turn{{"user", r.prompt}};
    a->seq.tokens = tok.encode(r.chat ? tok.apply_chat_template(turn, true) : r.prompt);
  }
  const auto n = static_cast<std::int64_t>(a->seq.tokens.size());
  NG_CHECK_ARG(n >= 1, label, ": the prompt encodes to no tokens");
  NG_CHECK_ARG(n + 1 <= options_.max_context, label, ".", r.messages.empty() ? "prompt" : "messages", " is ", n,
               " tokens: longer than the context allows (max_context = ", options_.max_context, " leaves room for ",
               options_.max_context - 1, " prompt tokens)");
  a->seq.seed = r.seed;
  a->seq.temperature = static_cast<float>(temperature);
  a->seq.top_k = top_k;
  a->seq.top_p = static_cast<float>(top_p);
  a->max_tokens = r.max_tokens;
  a->stop = r.stop;
  a->result.prompt_tokens = a->seq.tokens;
  return a;
}

RequestId Engine::enqueue(std::unique_ptr<Pending> a) {
  const std::lock_guard lock(sched_->mu);
  a->id = sched_->next_id++;
  const RequestId id = a->id;
  sched_->live.insert(id);
  sched_->incoming.push_back(std::move(a));
  sched_->waiting += 1;
  return id;
}

RequestId Engine::submit(const Request& request) { return enqueue(prepare(request, "request")); }

bool Engine::cancel(RequestId id) {
  const std::lock_guard lock(sched_->mu);
  if (!sched_->live.contains(id)) return false;
  sched_->cancels.insert(id);
  return true;
}

std::int64_t Engine::captured_graphs() const { return runner_->captured(); }

bool Engine::idle() const {
  const std::lock_guard lock(sched_->mu);
  return sched_->live.empty();
}

EngineLoad Engine::load() const {
  const std::lock_guard lock(sched_->mu);
  return {.running = sched_->running, .waiting = sched_->waiting, .kv_blocks_used = sched_->kv_used,
          .kv_blocks_total = runner_->blocks().num_blocks()};
}

// Appends a generated token and the text it completes to `out`; true when the request is done.
bool Engine::take(Pending& a, std::int32_t id, const float* logits, StepOutput& out) {
  const Tokenizer& tok = model_->tokenizer();
  a.seq.tokens.push_back(id);
  a.seq.generated += 1;
  a.result.tokens.push_back(id);
  out.tokens.push_back(id);
  const auto vocab = static_cast<std::size_t>(model_->config().vocab);
  if (options_.keep_logits) a.result.logits_hashes.push_back(fnv1a(logits, vocab * sizeof(float)));
  if (options_.keep_full_logits) a.result.logits.insert(a.result.logits.end(), logits, logits + vocab);
  if (tok.is_end_of_generation(id)) {
    a.result.stopped = true;
    a.result.finish = FinishReason::stop;
    return true;
  }
  a.result.text += a.decoder->push(id);
  if (cut_at_stop(a.result.text, a.emitted, a.stop)) {
    a.result.stopped = a.cut = true;
    a.result.finish = FinishReason::stop;
    return true;
  }
  if (a.seq.generated >= a.max_tokens || static_cast<std::int64_t>(a.seq.tokens.size()) >= options_.max_context) {
    a.result.finish = FinishReason::length;
    return true;
  }
  const std::size_t ready = a.result.text.size() - held_back(a.result.text, a.emitted, a.stop);
  out.text += a.result.text.substr(a.emitted, ready - a.emitted);
  a.emitted = ready;
  return false;
}

// Ends a request: the decoder's tail (unless a stop string ended it), the rest of its text, its
// blocks back to the cache, its result into `out`.
void Engine::finish(Pending& a, FinishReason reason, StepOutput& out) {
  if (!a.cut) {
    a.result.text += a.decoder->finish();
    if (cut_at_stop(a.result.text, a.emitted, a.stop)) {
      a.result.stopped = true;
      if (reason == FinishReason::length) reason = FinishReason::stop;
    }
  }
  a.result.finish = reason;
  out.text += a.result.text.substr(std::min(a.emitted, a.result.text.size()));
  a.emitted = a.result.text.size();
  out.finish = reason;
  runner_->blocks().release(a.seq.blocks);
}

std::vector<StepOutput> Engine::step() {
  Scheduler& s = *sched_;
  const std::unique_lock stepping(s.stepping, std::try_to_lock);
  NG_CHECK_ARG(stepping.owns_lock(), "step: another thread is in step() of this engine: one step at a time");
  std::vector<StepOutput> outs = std::move(s.failed);
  s.failed.clear();
  std::set<RequestId> cancels;
  {
    const std::lock_guard lock(s.mu);
    for (auto& a : s.incoming) s.queue.push_back(std::move(a));
    s.incoming.clear();
    cancels.swap(s.cancels);
  }
  auto output = [&](const Pending& a) -> StepOutput& {
    StepOutput& o = outs.emplace_back();
    o.id = a.id;
    o.prompt_tokens = static_cast<std::int64_t>(a.result.prompt_tokens.size());
    return o;
  };
  auto done = [&](std::unique_ptr<Pending>& a, FinishReason reason, StepOutput& o) {
    finish(*a, reason, o);
    o.completion_tokens = static_cast<std::int64_t>(a->result.tokens.size());
    o.result = std::move(a->result);
    a.reset();
  };
  auto compact = [](auto& list) { std::erase_if(list, [](const auto& a) { return !a; }); };
  // 1. Cancellations.
  for (auto& a : s.queue)
    if (cancels.contains(a->id)) done(a, FinishReason::cancelled, output(*a));
  compact(s.queue);
  for (auto& a : s.active)
    if (cancels.contains(a->id)) done(a, FinishReason::cancelled, output(*a));
  compact(s.active);
  try {
    // 2. Admission.
    while (!s.queue.empty() && static_cast<std::int64_t>(s.active.size()) < runner_->max_batch()) {
      s.active.push_back(std::move(s.queue.front()));
      s.queue.pop_front();
    }
    // 3. Prefill chunks, prefill_chunk tokens in all (at least one chunk).
    // While others decode, a step prefills a quarter as much: the decoders' inter-token latency
    // bounded, joiners still admitted every step.
    bool decoding_now = false;
    for (const auto& a : s.active) decoding_now = decoding_now || a->prefilled;
    std::int64_t budget = decoding_now ? std::max<std::int64_t>(1, options_.prefill_chunk / 4) : options_.prefill_chunk;
    for (auto& a : s.active) {
      while (a && !a->prefilled && budget > 0) {
        const std::int64_t before = a->seq.cached;
        const auto t = Clock::now();
        const Tensor logits = runner_->prefill(a->seq, /*max_chunks=*/1);
        stats_.prefill_seconds += since(t);
        stats_.prefill_tokens += a->seq.cached - before;
        budget -= a->seq.cached - before;
        if (!logits.defined()) continue;
        a->prefilled = true;
        StepOutput& o = output(*a);
        if (take(*a, runner_->next_ids()[0], static_cast<const float*>(logits.data()), o))
          done(a, a->result.finish, o);
        else
          o.completion_tokens = a->seq.generated;
      }
    }
    compact(s.active);
    // 4. One decode step of every request past its prefill.
    std::vector<Pending*> decoding;
    for (auto& a : s.active)
      if (a->prefilled) decoding.push_back(a.get());
    if (!decoding.empty()) {
      std::vector<Sequence*> batch;
      for (Pending* a : decoding) batch.push_back(&a->seq);
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
      const std::int32_t* ids = runner_->next_ids();
      const auto* rows = static_cast<const float*>(logits.data());
      const auto vocab = static_cast<std::size_t>(model_->config().vocab);
      // 5. Tokens, text, ends.
      for (auto& a : s.active) {
        if (!a->prefilled) continue;
        const auto b = static_cast<std::size_t>(
            std::find(decoding.begin(), decoding.end(), a.get()) - decoding.begin());
        if (b == decoding.size()) continue;
        StepOutput* o = nullptr;
        for (StepOutput& prev : outs)  // its first token may be in this step's outputs already
          if (prev.id == a->id) o = &prev;
        if (!o) o = &output(*a);
        if (take(*a, ids[b], rows + b * vocab, *o))
          done(a, a->result.finish, *o);
        else
          o->completion_tokens = a->seq.generated;
      }
      compact(s.active);
    }
  } catch (...) {
    // The step failed (an op's error): what it produced and every request in a batch row, ended,
    // are reported by the next step.
    s.failed = std::move(outs);
    for (auto& a : s.active) {
      if (!a) continue;
      StepOutput& o = s.failed.emplace_back();
      o.id = a->id;
      o.prompt_tokens = static_cast<std::int64_t>(a->result.prompt_tokens.size());
      finish(*a, FinishReason::error, o);
      o.completion_tokens = static_cast<std::int64_t>(a->result.tokens.size());
      o.result = std::move(a->result);
    }
    s.active.clear();
    const std::lock_guard lock(s.mu);
    s.running = 0;
    s.waiting = static_cast<std::int64_t>(s.queue.size() + s.incoming.size());
    s.kv_used = runner_->blocks().num_blocks() - runner_->blocks().free_blocks();
    throw;
  }
  const std::lock_guard lock(s.mu);
  for (const StepOutput& o : outs)
    if (o.finish != FinishReason::none) s.live.erase(o.id);
  s.running = static_cast<std::int64_t>(s.active.size());
  s.waiting = static_cast<std::int64_t>(s.queue.size() + s.incoming.size());
  s.kv_used = runner_->blocks().num_blocks() - runner_->blocks().free_blocks();
  return outs;
}

}  // namespace npugraph::llm
