#include "llm/scheduler.hpp"

#include <algorithm>

#include "npugraph/error.hpp"

namespace npugraph::llm {

RequestId Scheduler::enqueue(std::unique_ptr<RequestState> a) {
  const std::lock_guard lock(mu_);
  a->id = next_id_++;
  const RequestId id = a->id;
  live_.insert(id);
  incoming_.push_back(std::move(a));
  waiting_ += 1;
  return id;
}

bool Scheduler::cancel(RequestId id) {
  const std::lock_guard lock(mu_);
  if (!live_.contains(id)) return false;
  cancels_.insert(id);
  return true;
}

bool Scheduler::idle() const {
  const std::lock_guard lock(mu_);
  return live_.empty();
}

EngineLoad Scheduler::load(std::int64_t kv_blocks_total) const {
  const std::lock_guard lock(mu_);
  EngineLoad l = kv_;
  l.running = running_;
  l.waiting = waiting_;
  l.kv_blocks_total = kv_blocks_total;
  return l;
}

std::unique_lock<std::mutex> Scheduler::begin_step() {
  std::unique_lock stepping(stepping_, std::try_to_lock);
  NG_CHECK_ARG(stepping.owns_lock(), "step: another thread is in step() of this engine: one step at a time");
  return stepping;
}

StepPlan Scheduler::schedule(const std::function<void(RequestState&)>& admit) {
  StepPlan plan;
  std::set<RequestId> cancels;
  {
    const std::lock_guard lock(mu_);
    for (auto& a : incoming_) queue_.push_back(std::move(a));
    incoming_.clear();
    cancels.swap(cancels_);
  }
  // 1. Cancellations: waiting requests leave the queue, running ones their batch row.
  auto cancel_from = [&](auto& list) {
    for (auto& a : list)
      if (cancels.contains(a->id)) plan.cancelled.push_back(std::move(a));
    std::erase_if(list, [](const auto& a) { return !a; });
  };
  cancel_from(queue_);
  cancel_from(active_);
  // 2. Admission while batch rows are free.
  while (!queue_.empty() && static_cast<std::int64_t>(active_.size()) < max_batch_) {
    active_.push_back(std::move(queue_.front()));
    queue_.pop_front();
    if (admit) admit(*active_.back());
  }
  // 3. Prefill chunks: while others decode, a quarter of the budget (their inter-token latency
  // bounded, joiners still admitted every step). A chunk is always [k * prefill_chunk, (k + 1) *
  // prefill_chunk) of its own prompt, whatever the budget (Note [Batch invariance]).
  const bool decoding_now = std::any_of(active_.begin(), active_.end(), [](const auto& a) { return a->prefilled; });
  std::int64_t budget = decoding_now ? std::max<std::int64_t>(1, prefill_chunk_ / 4) : prefill_chunk_;
  // 4. The decode rows: every request past its prefill, and every one whose prompt this step's
  // chunks finish (its first token comes from the last chunk), in admission order.
  for (auto& a : active_) {
    const auto total = static_cast<std::int64_t>(a->seq.tokens.size());
    std::int64_t cached = a->seq.cached;
    while (!a->prefilled && cached < total && budget > 0) {
      const std::int64_t n = std::min(prefill_chunk_, total - cached);
      plan.prefill.push_back({a.get(), n});
      cached += n;
      budget -= n;
    }
    if (a->prefilled || cached == total) plan.decode.push_back(a.get());
  }
  return plan;
}

void Scheduler::retire() { std::erase_if(active_, [](const auto& a) { return !a; }); }

void Scheduler::publish(const std::vector<StepOutput>& outputs, const EngineLoad& kv) {
  const std::lock_guard lock(mu_);
  for (const StepOutput& o : outputs)
    if (o.finish != FinishReason::none) live_.erase(o.id);
  running_ = static_cast<std::int64_t>(active_.size());
  waiting_ = static_cast<std::int64_t>(queue_.size() + incoming_.size());
  kv_ = kv;
}

}  // namespace npugraph::llm
