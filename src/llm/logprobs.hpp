// Log-probabilities of a logits row (Request::logprobs), computed on the host from the row the
// runner reads back, for the rows that asked only.
#pragma once

#include <cstdint>

#include "npugraph/llm/request.hpp"

namespace npugraph::llm {

// log-softmax of `row` (V float32 logits, NaN as -inf) in double: logprob of `token` and the `top`
// largest (most likely first, ties: lower id first). A row without a finite logit gives -inf.
TokenLogprob token_logprob(const float* row, std::int64_t V, std::int32_t token, std::int64_t top);

}  // namespace npugraph::llm
