// The engine's scheduler (Note [Step-level engine] in engine_step.cpp): the requests as they wait,
// prefill and decode; what other threads hand to step() through its lock (submits, cancels); and
// each step's plan — cancellations, admissions, prefill chunks under the step's token budget.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "llm/request_state.hpp"
#include "npugraph/llm/request.hpp"

namespace npugraph::llm {

// One prefill chunk of a step: `tokens` prompt tokens of `request`, from its cached length on. The
// chunk that reaches the prompt's end samples its first token.
struct PrefillChunk {
  RequestState* request = nullptr;
  std::int64_t tokens = 0;
};

// What a step does, decided before it runs (a plain value; the requests stay the scheduler's).
struct StepPlan {
  std::vector<std::unique_ptr<RequestState>> cancelled;  // ended by cancel(): reported, blocks freed
  std::vector<PrefillChunk> prefill;                     // in order
  // The decode step's rows, in admission order: the requests past their prefill and those whose
  // prompt this step's chunks finish. One that ends on its first token leaves before the decode
  // step (drop_decode).
  std::vector<RequestState*> decode;
  void drop_decode(const RequestState* a) { std::erase(decode, a); }
};

class Scheduler {
 public:
  Scheduler(std::int64_t max_batch, std::int64_t prefill_chunk) : max_batch_(max_batch), prefill_chunk_(prefill_chunk) {}

  // Thread-safe: a checked request queued (its id assigned), a cancel asked, the load.
  RequestId enqueue(std::unique_ptr<RequestState> request);
  bool cancel(RequestId id);
  bool idle() const;
  EngineLoad load(std::int64_t kv_blocks_total) const;

  // The stepping thread's: held through step() (a second concurrent step() is refused).
  std::unique_lock<std::mutex> begin_step();
  // Takes the submits and cancels; ends cancelled requests (into the plan), admits waiting ones
  // into free batch rows (`admit` sees each as it joins, before its chunks are planned: the
  // prefix cache may set its cached length), plans prefill chunks (prefill_chunk tokens in all, a
  // quarter of that while others decode, at least one token, in admission order) and names the
  // decode rows.
  StepPlan schedule(const std::function<void(RequestState&)>& admit = {});
  // Running requests, in admission order; a finished one is reset to null, then retire() drops it.
  std::vector<std::unique_ptr<RequestState>>& active() { return active_; }
  void retire();
  // After a step: finished requests leave `live`; the KV gauges and prefix cache counts load()
  // reports (the fields of `kv` other than running, waiting and kv_blocks_total).
  void publish(const std::vector<StepOutput>& outputs, const EngineLoad& kv);
  // Requests a failed step ended, reported by the next step.
  std::vector<StepOutput> take_failed() { return std::move(failed_); }
  void set_failed(std::vector<StepOutput> failed) { failed_ = std::move(failed); }

 private:
  std::int64_t max_batch_, prefill_chunk_;
  // Shared with enqueue() / cancel() / idle() / load() on other threads.
  mutable std::mutex mu_;
  std::deque<std::unique_ptr<RequestState>> incoming_;  // submitted, not yet seen by step()
  std::set<RequestId> live_;                            // submitted and not yet reported finished
  std::set<RequestId> cancels_;                         // cancel() asked, step() not yet done it
  RequestId next_id_ = 1;
  std::int64_t running_ = 0, waiting_ = 0;  // as the last step() left them (+ submits)
  EngineLoad kv_;                           // the KV fields, as the last step() left them
  std::mutex stepping_;
  // The stepping thread's.
  std::deque<std::unique_ptr<RequestState>> queue_;    // waiting for a batch row
  std::vector<std::unique_ptr<RequestState>> active_;  // prefilling or decoding, in admission order
  std::vector<StepOutput> failed_;
};

}  // namespace npugraph::llm
