// What a request's sampled tokens become (Note [Output processor] in output_processor.cpp).
#pragma once

#include <cstdint>

#include "llm/request_state.hpp"
#include "npugraph/llm/request.hpp"
#include "npugraph/llm/tokenizer.hpp"

namespace npugraph::llm {

struct OutputOptions {
  std::int64_t vocab = 0;        // floats per logits row
  std::int64_t max_context = 0;  // a request whose sequence reaches it ends (FinishReason::length)
  bool keep_logits = false;      // Result::logits_hashes
  bool keep_full_logits = false;  // Result::logits
};

class OutputProcessor {
 public:
  OutputProcessor(const Tokenizer& tokenizer, OutputOptions options) : tok_(tokenizer), opt_(options) {}
  // Appends token `id` (sampled from the `logits` row) to the request and the text it completes to
  // `out`; true when the request is done (its result.finish says why).
  bool take(RequestState& r, std::int32_t id, const float* logits, StepOutput& out) const;
  // Ends the request's text: the decoder's tail (unless a stop string ended it), the rest of its
  // text into `out`, the finish reason (a stop string found in the tail turns length into stop).
  void finish(RequestState& r, FinishReason reason, StepOutput& out) const;

 private:
  const Tokenizer& tok_;
  OutputOptions opt_;
};

}  // namespace npugraph::llm
