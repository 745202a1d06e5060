// A request's penalties and logit biases, kept on the host and written into the step's per-row
// adjustment lists (ops::LogitAdjustRows) that the captured sampling op applies.
//
// Note [Logit adjustments]
// presence / frequency / repetition penalties and logit_bias change a row's logits before it is
// sampled, differently for every request and every step, so they must be per-row device buffers
// the captured step reads (as temperature is: Note [Step inputs]) — a new mix is new buffer
// contents, never a re-capture. Options weighed:
//   - a dense [max_batch, vocab] bias row added by an add op in the step: simple, but every row
//     pays vocab floats a step (written by the host, read by the op), penalised or not, and the
//     multiplicative repetition penalty does not fit an add (its sign depends on the logit);
//   - sparse lists: per row, a count and up to `capacity` entries (token, scale, add), meaning
//     logit[t] = (logit[t] > 0 ? logit[t] / scale : logit[t] * scale) + add. A token is listed
//     once, so the result does not depend on the list's order. The host writes only the tokens a
//     request touches (its bias keys, the tokens it has generated, with repetition_penalty its
//     prompt's), O(distinct tokens) a step; a row without adjustments writes count 0 and pays
//     nothing. Capacity: max_context (prompt + output tokens, distinct) + kMaxLogitBias.
// The lists are applied inside ops::sample_rows_out, not by an op of their own that rewrites the
// logits in place: a row with a non-zero count is copied to the kernel's scratch and adjusted
// there, so the step's logits stay the model's raw ones — what logprobs report (vLLM's
// raw_logprobs) and what keep_full_logits keeps — and rows without adjustments are not copied
// (the copy: about 5 us a row of SmolLM2's 49,152 logits on a 2-core Xeon; within the noise of a
// batch-16 step of ~35 ms there, measured with and without penalties on every row).
// Graph and eager issue the same sampling op on the same buffers: bitwise the same tokens. The
// CUDA sampler has no lists yet: the engine refuses these fields on a cuda device.
// Arithmetic: add = bias - count * frequency - (count > 0) * presence in double, rounded to
// float once; the kernel computes in float (tests recompute it so).
#pragma once

#include <cstdint>
#include <map>
#include <span>

#include "npugraph/llm/request.hpp"

namespace npugraph::llm {

class LogitAdjust {
 public:
  LogitAdjust() = default;
  // The request's settings; `prompt`: its tokens (seen, for repetition_penalty).
  LogitAdjust(const Request& r, std::span<const std::int32_t> prompt)
      : presence_(r.presence_penalty), frequency_(r.frequency_penalty), repetition_(r.repetition_penalty) {
    for (const auto& [token, bias] : r.logit_bias) entries_[token].bias = bias;
    if (repetition_ != 1)
      for (std::int32_t t : prompt) entries_[t].seen = true;
  }
  bool active() const { return presence_ != 0 || frequency_ != 0 || repetition_ != 1 || !entries_.empty(); }
  // A generated token.
  void take(std::int32_t token) {
    if (presence_ == 0 && frequency_ == 0 && repetition_ == 1) return;
    Entry& e = entries_[token];
    e.count += 1;
    e.seen = true;
  }
  // Writes the row's list (at most `capacity` entries; more cannot happen: Note [Logit
  // adjustments]); returns its length.
  std::int32_t write(std::int32_t* tokens, float* scale, float* add, std::int64_t capacity) const {
    std::int32_t n = 0;
    for (const auto& [token, e] : entries_) {
      const float s = e.seen && repetition_ != 1 ? static_cast<float>(repetition_) : 1.0f;
      const auto a = static_cast<float>(e.bias - static_cast<double>(e.count) * frequency_ -
                                        (e.count > 0 ? presence_ : 0.0));
      if (s == 1.0f && a == 0.0f) continue;
      if (n == capacity) break;
      tokens[n] = token, scale[n] = s, add[n] = a;
      ++n;
    }
    return n;
  }

 private:
  struct Entry {
    std::int64_t count = 0;  // in the output
    bool seen = false;       // in the prompt or the output (repetition_penalty)
    double bias = 0;
  };
  double presence_ = 0, frequency_ = 0, repetition_ = 1;
  std::map<std::int32_t, Entry> entries_;
};

}  // namespace npugraph::llm
