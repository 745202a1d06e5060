// Constrained decoding: a request whose tokens must follow a grammar (a JSON schema, a tool call's
// shape) says, before each of its tokens is sampled, which tokens may come next.
//
// Note [Token constraints]
// A constraint is the request's own state machine (a grammar matcher): before each token it writes
// the allowed tokens as a bitmask, after it it is told the token drawn. The engine keeps no grammar
// of its own: what a constraint means is its maker's (npugraph-serve makes them from JSON schemas
// with xgrammar: Note [Structured output] in apps/serve/grammar.hpp). The masks are per-row device
// buffers that the captured sampling step reads (ops::TokenMaskRows, like temperature and the
// adjustment lists: Note [Step inputs], Note [Logit adjustments]): a constrained row's disallowed
// logits read as -inf in the sampler's copy, after penalties and biases; rows without a constraint
// are not copied. The logits themselves stay the model's — logprobs report the model's
// distribution, as vLLM's do. Graph and eager issue the same sampling op on the same buffers, so a
// constrained request's tokens are the same bits in both modes, and alone or batched. The CUDA
// sampler has no masks yet: the engine refuses constraints on a cuda device.
//
// When a constraint refuses the token drawn (it cannot, if it writes its masks right) the request
// ends with FinishReason::error; when it says nothing may follow (finished()), the request ends
// with FinishReason::stop. A constraint is made when its request is prepared (one per request, and
// one per choice of a request copied for n > 1) and used by the engine's step thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

namespace npugraph::llm {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // The tokens that may come next: bit t % 32 of mask[t / 32] set for each allowed token t;
  // mask.size() is ceil(vocab / 32) (vocab: the model's logits width), words zeroed by the caller
  // are for the constraint to fill. Called before each token of the request is sampled (possibly
  // more than once for one token).
  virtual void allowed(std::span<std::uint32_t> mask) = 0;
  // The token drawn (from the last mask); false when the constraint refuses it.
  virtual bool accept(std::int32_t token) = 0;
  // Nothing may follow: the request ends (FinishReason::stop).
  virtual bool finished() const = 0;
};

// Makes a request's constraint when the request is prepared (Request::constraint).
using TokenConstraintFactory = std::function<std::unique_ptr<TokenConstraint>()>;

}  // namespace npugraph::llm
