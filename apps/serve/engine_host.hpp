// npugraph-serve's engine side: one thread steps the engine and hands each request's outputs to
// that request's sink; admission, submission and cancellation from any thread. No HTTP here.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "npugraph/llm/engine.hpp"
#include "serve/metrics.hpp"
#include "serve/openai_api.hpp"

namespace npugraph::serve {

// Note [Engine host]
// Admission is one atomic counter of the requests admitted and not yet finished (tokenising,
// waiting or running), compared and raised in one step (compare-exchange), so a burst never
// overshoots max_batch + max_waiting: the rest get 503 + Retry-After at once. A request is
// tokenised by Engine::prepare on the caller's thread under no lock — a long prompt holds up
// nothing — and only then queued and its sink registered, together under the sink lock that
// delivery takes, so no output can arrive before its sink. Sinks run on the engine thread and
// must be quick (the server's post the bytes to the I/O thread). A request whose client is gone is
// cancelled, queued or running; the next step frees its KV blocks.
class EngineHost {
 public:
  struct Options {
    std::int64_t max_batch = 16, max_waiting = 64;
    std::chrono::milliseconds min_step{0};  // pace the engine (tests)
  };
  // Receives a request's outputs in order, on the engine thread; the last has finish != none.
  using Sink = std::function<void(llm::StepOutput)>;

  EngineHost(std::unique_ptr<llm::Engine> engine, Options options, Metrics& metrics);
  ~EngineHost();  // stops the engine thread (running requests are dropped)
  EngineHost(const EngineHost&) = delete;
  EngineHost& operator=(const EngineHost&) = delete;

  // Admits, tokenises and queues a request: its id, or the error to answer (503 full or
  // draining, 400 for what the engine refuses, context_length_exceeded naming `param`).
  std::variant<llm::RequestId, ApiError> submit(const llm::Request& request, const std::string& param, Sink sink);
  void cancel(llm::RequestId id);
  // Refuse new requests from now on (503).
  void start_draining() { draining_.store(true); }
  bool draining() const { return draining_.load(); }
  // Waits until nothing is admitted (every request finished) or `deadline`; true when nothing is.
  bool wait_idle(std::chrono::steady_clock::time_point deadline);
  // Cancels every admitted request.
  void cancel_all();
  llm::EngineLoad load() const { return engine_->load(); }
  const llm::Engine& engine() const { return *engine_; }

 private:
  void loop();
  void deliver(std::vector<llm::StepOutput> outs);
  void release();
  void poke();  // wakes the engine thread after a submit or cancel

  std::unique_ptr<llm::Engine> engine_;
  Options options_;
  Metrics& metrics_;
  std::atomic<std::int64_t> admitted_{0};
  std::atomic<bool> draining_{false}, stop_{false};
  struct Live {
    Sink sink;
    std::chrono::steady_clock::time_point arrived, last_token;
    bool first = true;
  };
  std::mutex mu_;  // live_
  std::map<llm::RequestId, Live> live_;
  std::mutex wake_mu_;
  std::condition_variable wake_, idle_;
  std::thread thread_;
};

}  // namespace npugraph::serve
