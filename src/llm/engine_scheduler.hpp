// The step-level engine's state (Note [Step-level engine] in engine_step.cpp): requests as they
// wait, prefill and decode, and what other threads hand to step() through the lock.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "llm/runner.hpp"
#include "npugraph/llm/engine.hpp"
#include "npugraph/llm/tokenizer.hpp"

namespace npugraph::llm {

// A request from submit() to its end.
struct Engine::Pending {
  RequestId id = 0;
  Sequence seq;
  Result result;
  std::unique_ptr<StreamDecoder> decoder;
  std::int64_t max_tokens = 0;
  std::vector<std::string> stop;
  std::size_t emitted = 0;  // bytes of result.text handed out in StepOutputs
  bool prefilled = false;   // its prompt's KV is cached and its first token taken
  bool cut = false;         // a stop string ended it (its text is final)
};

struct Engine::Scheduler {
  // Shared with submit() / cancel() / idle() / load() on other threads.
  mutable std::mutex mu;
  std::deque<std::unique_ptr<Pending>> incoming;  // submitted, not yet seen by step()
  std::set<RequestId> live;                       // submitted and not yet reported finished
  std::set<RequestId> cancels;                    // cancel() asked, step() not yet done it
  RequestId next_id = 1;
  std::int64_t running = 0, waiting = 0, kv_used = 0;  // as the last step() left them (+ submits)
  std::mutex stepping;  // held through step(): one at a time
  // step()'s own (the thread in step()).
  std::deque<std::unique_ptr<Pending>> queue;    // waiting for a batch row
  std::vector<std::unique_ptr<Pending>> active;  // prefilling or decoding, in admission order
  std::vector<StepOutput> failed;                // requests a failed step ended, reported next step
};

}  // namespace npugraph::llm
