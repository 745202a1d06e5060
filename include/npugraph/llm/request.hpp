// What a request is, how it ends, and what it produces: the types shared by the engine, its scheduler
// and output processor (src/llm), and the servers that speak for it (apps/serve).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "npugraph/error.hpp"
#include "npugraph/llm/constraint.hpp"
#include "npugraph/llm/tokenizer.hpp"

namespace npugraph::llm {

// A prompt (or conversation) that leaves no room in the context (max_context): an ArgumentError
// that a server tells apart by its type (OpenAI's "context_length_exceeded"), not by its text.
class ContextLengthError : public ArgumentError {
 public:
  using ArgumentError::ArgumentError;
};

// One request: a prompt, or a conversation rendered by the model's chat template.
struct Request {
  std::string prompt{};
  std::vector<ChatMessage> messages{};  // when given: the conversation (prompt must be empty)
  std::int64_t max_tokens = 64;         // generated tokens at most (the context may end it sooner)
  bool chat = true;        // wrap the prompt in the model's chat template as a user turn
  std::uint64_t seed = 0;  // sampling seed (temperature > 0): draws depend on (seed, step) only
  // Sampling, per request; unset: the engine's options.
  std::optional<double> temperature{};  // >= 0 (0: greedy)
  std::optional<std::int64_t> top_k{};  // 0..vocab (0: no top-k)
  std::optional<double> top_p{};        // (0, 1]
  // Generation ends where the text first contains one of these; the text returned stops before it.
  std::vector<std::string> stop{};
  // Log-probabilities of each generated token and of its `logprobs` most likely alternatives
  // (0..kMaxTopLogprobs); unset: none. They are the model's own distribution: log-softmax of the
  // raw logits, before penalties, logit_bias and temperature (vLLM's default, "raw_logprobs").
  std::optional<std::int64_t> logprobs{};
  // The same for every prompt token after the first (vLLM's prompt_logprobs; what OpenAI's
  // completions give with echo): each from the logits of the position before it, computed for
  // the whole prompt while it is prefilled (a projection to the vocabulary for every prompt row).
  std::optional<std::int64_t> prompt_logprobs{};
  // Applied to the logits before sampling (Note [Logit adjustments] in src/llm/logit_adjust.hpp),
  // in this order: repetition_penalty (> 0; 1: off) divides a positive logit, multiplies a
  // negative one, of every token in the prompt or the output so far (llama.cpp's, vLLM's); then
  // OpenAI's logit[t] += logit_bias[t] - count[t] * frequency_penalty - (count[t] > 0) *
  // presence_penalty, count[t] being t's occurrences in the output so far. Penalties in [-2, 2],
  // biases in [-100, 100], at most kMaxLogitBias of them, each a token of the vocabulary.
  double presence_penalty = 0, frequency_penalty = 0, repetition_penalty = 1;
  std::map<std::int32_t, double> logit_bias{};
  // Constrained decoding (Note [Token constraints] in npugraph/llm/constraint.hpp): when set, called
  // once as the request is prepared; each generated token is drawn from those its constraint allows
  // (after the penalties and biases), and the request stops when the constraint says it is finished.
  // cpu only (an UnsupportedError on cuda).
  TokenConstraintFactory constraint{};
};

inline constexpr std::int64_t kMaxTopLogprobs = 20;
inline constexpr std::int64_t kMaxLogitBias = 1024;

// A generated token's log-probability and its most likely alternatives (most likely first; ties:
// the lower token id first).
struct TokenLogprob {
  std::int32_t token = 0;
  double logprob = 0;
  std::vector<std::pair<std::int32_t, double>> top{};
};

// Why a request ended.
enum class FinishReason {
  none,       // still running
  stop,       // an end-of-generation token or a stop string
  length,     // max_tokens, or the context is full
  cancelled,  // cancel()
  error,      // a step() failed (it threw) while the request was running
};
// "stop", "length", "cancelled", "error"; "" for none.
const char* finish_reason_name(FinishReason reason) noexcept;

using RequestId = std::uint64_t;

struct Result {
  std::vector<std::int32_t> prompt_tokens, tokens;  // tokens: generated ones
  std::string text;
  bool stopped = false;  // ended on an end-of-generation token or a stop string (else max_tokens or the context)
  FinishReason finish = FinishReason::none;
  // With keep_logits: per generated token, a 64-bit hash of its logits row's bytes.
  std::vector<std::uint64_t> logits_hashes;
  // With keep_full_logits: per generated token, the logits row it was chosen from (vocab floats).
  std::vector<float> logits;
  // With Request::logprobs: per generated token.
  std::vector<TokenLogprob> logprobs;
  // With Request::prompt_logprobs: per prompt token, the first one's logprob NaN (it has none).
  std::vector<TokenLogprob> prompt_logprobs;
};

// What one request produced in one step().
struct StepOutput {
  RequestId id = 0;
  std::string text;                   // text decoded this step (a stop string's possible start held back)
  std::vector<std::int32_t> tokens;   // tokens generated this step
  std::vector<TokenLogprob> logprobs;  // theirs, with Request::logprobs
  std::vector<TokenLogprob> prompt_logprobs;  // with Request::prompt_logprobs: in the first output
  FinishReason finish = FinishReason::none;  // none: it goes on
  std::int64_t prompt_tokens = 0, completion_tokens = 0;  // so far
  std::int64_t cached_tokens = 0;  // of the prompt's, taken from the prefix cache (EngineOptions::prefix_cache)
  std::optional<Result> result{};     // the whole result, once finished
};

// A snapshot of the engine's load (any thread).
struct EngineLoad {
  std::int64_t running = 0, waiting = 0;        // requests decoding or prefilling / queued
  std::int64_t kv_blocks_used = 0, kv_blocks_total = 0;  // used: held by requests
  // Of the blocks free (total - used): those holding a cached prefix (EngineOptions::prefix_cache),
  // kept for a later prompt until evicted.
  std::int64_t kv_blocks_cached = 0;
  // Since the engine started, in tokens (vLLM's prefix_cache_queries / _hits): the prompt tokens
  // looked up in the prefix cache, and those of them taken from it.
  std::int64_t prefix_cache_queries = 0, prefix_cache_hits = 0;
  // Since the engine started: decode steps that carried a prompt chunk (Note [Mixed steps]).
  std::int64_t mixed_steps = 0;
};

}  // namespace npugraph::llm
