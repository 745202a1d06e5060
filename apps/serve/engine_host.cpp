#include "serve/engine_host.hpp"

#include <iostream>

#include "npugraph/error.hpp"

namespace npugraph::serve {

using Clock = std::chrono::steady_clock;

EngineHost::EngineHost(std::unique_ptr<llm::Engine> engine, Options options, Metrics& metrics)
    : engine_(std::move(engine)), options_(options), metrics_(metrics), thread_([this] { loop(); }) {}

EngineHost::~EngineHost() {
  {
    const std::lock_guard lock(wake_mu_);
    stop_.store(true);
  }
  wake_.notify_all();
  thread_.join();
}

std::variant<llm::RequestId, ApiError> EngineHost::submit(const llm::Request& request, const std::string& param,
                                                          Sink sink) {
  if (draining_.load())
    return ApiError{.status = 503, .message = "the server is shutting down", .type = "server_error"};
  const std::int64_t cap = options_.max_batch + options_.max_waiting;
  std::int64_t n = admitted_.load();
  do {
    if (n >= cap) {
      const llm::EngineLoad l = engine_->load();
      return ApiError{.status = 503,
                      .message = "the server is full (" + std::to_string(l.running) + " running, " +
                                 std::to_string(l.waiting) + " waiting; --max-batch " +
                                 std::to_string(options_.max_batch) + ", --max-waiting " +
                                 std::to_string(options_.max_waiting) + "): retry later",
                      .type = "server_error", .code = "queue_full"};
    }
  } while (!admitted_.compare_exchange_weak(n, n + 1));
  std::optional<llm::PreparedRequest> prepared;
  try {
    prepared.emplace(engine_->prepare(request));  // tokenises: no lock held
  } catch (const llm::ContextLengthError& e) {
    release();
    return ApiError{.message = e.what(), .param = param, .code = "context_length_exceeded"};
  } catch (const npugraph::Error& e) {
    release();
    return ApiError{.message = e.what()};
  }
  llm::RequestId id = 0;
  {
    const std::lock_guard lock(mu_);
    id = engine_->submit(std::move(*prepared));
    live_[id] = Live{.sink = std::move(sink), .arrived = Clock::now()};
  }
  poke();
  return id;
}

void EngineHost::poke() {
  { const std::lock_guard lock(wake_mu_); }  // the engine thread is either before its check or waiting
  wake_.notify_one();
}

void EngineHost::cancel(llm::RequestId id) {
  if (engine_->cancel(id)) poke();
}

void EngineHost::cancel_all() {
  std::vector<llm::RequestId> ids;
  {
    const std::lock_guard lock(mu_);
    for (const auto& [id, live] : live_) ids.push_back(id);
  }
  for (llm::RequestId id : ids) engine_->cancel(id);
  poke();
}

void EngineHost::release() {
  if (admitted_.fetch_sub(1) == 1) {
    const std::lock_guard lock(wake_mu_);
    idle_.notify_all();
  }
}

bool EngineHost::wait_idle(Clock::time_point deadline) {
  std::unique_lock lock(wake_mu_);
  return idle_.wait_until(lock, deadline, [&] { return admitted_.load() == 0; });
}

void EngineHost::deliver(std::vector<llm::StepOutput> outs) {
  const auto now = Clock::now();
  std::int64_t tokens = 0, finished = 0;
  {
    const std::lock_guard lock(mu_);
    for (llm::StepOutput& out : outs) {
      tokens += static_cast<std::int64_t>(out.tokens.size());
      const auto it = live_.find(out.id);
      if (it == live_.end()) continue;
      Live& l = it->second;
      if (!out.tokens.empty()) {
        if (l.first) {
          metrics_.first_token(std::chrono::duration<double>(now - l.arrived).count());
          l.first = false;
          for (std::size_t k = 1; k < out.tokens.size(); ++k) metrics_.inter_token(0);
        } else {
          const double gap = std::chrono::duration<double>(now - l.last_token).count();
          for (std::size_t k = 0; k < out.tokens.size(); ++k)
            metrics_.inter_token(gap / static_cast<double>(out.tokens.size()));
        }
        l.last_token = now;
      }
      const bool last = out.finish != llm::FinishReason::none;
      if (last) metrics_.finished(llm::finish_reason_name(out.finish));
      l.sink(std::move(out));
      if (last) {
        live_.erase(it);
        finished += 1;
      }
    }
  }
  for (std::int64_t i = 0; i < finished; ++i) release();
  metrics_.tokens(tokens, now);
}

void EngineHost::loop() {
  std::int64_t steps = 0;
  for (;;) {
    {
      std::unique_lock lock(wake_mu_);
      wake_.wait(lock, [&] { return !engine_->idle() || stop_.load(); });
      if (stop_.load()) return;
    }
    if (++steps % 4096 == 0) engine_->reset_stats();  // RunStats keeps a batch size per step
    const auto t = Clock::now();
    try {
      deliver(engine_->step());
      if (options_.min_step.count() > 0) std::this_thread::sleep_until(t + options_.min_step);
    } catch (const std::exception& e) {  // the running requests are reported 'error' by the next step
      std::cerr << "npugraph-serve: a step failed: " << e.what() << '\n';
    }
  }
}

}  // namespace npugraph::serve
