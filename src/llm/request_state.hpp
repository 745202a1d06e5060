// A request inside the engine, from submit() to its end: its sequence (tokens, KV blocks, sampling
// settings), what it has produced, and where its text stands (src/llm/output_processor.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "llm/runner.hpp"
#include "npugraph/llm/request.hpp"
#include "npugraph/llm/tokenizer.hpp"

namespace npugraph::llm {

struct RequestState {
  RequestId id = 0;
  Sequence seq;
  Result result;
  std::unique_ptr<StreamDecoder> decoder;
  std::int64_t max_tokens = 0;
  std::vector<std::string> stop;
  std::size_t emitted = 0;  // bytes of result.text handed out in StepOutputs
  std::int64_t prefix_hit = 0;  // prompt tokens taken from the prefix cache (Note [Prefix cache])
  bool prefilled = false;   // its prompt's KV is cached and its first token taken
  bool cut = false;         // a stop string ended it (its text is final)
};

}  // namespace npugraph::llm
