// npugraph-serve's /metrics: Prometheus text exposition of the engine's load and the latencies the
// engine thread observes (time to first token, inter-token), with tokens per second over the last
// ten seconds.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>

#include "npugraph/llm/engine.hpp"

namespace npugraph::serve {

class Histogram {
 public:
  static constexpr std::array<double, 12> kBounds{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  void observe(double v) {
    for (std::size_t i = 0; i < kBounds.size(); ++i)
      if (v <= kBounds[i]) counts_[i] += 1;
    count_ += 1;
    sum_ += v;
  }
  void write(std::ostringstream& o, const char* name, const char* help) const {
    o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " histogram\n";
    for (std::size_t i = 0; i < kBounds.size(); ++i) o << name << "_bucket{le=\"" << kBounds[i] << "\"} " << counts_[i] << '\n';
    o << name << "_bucket{le=\"+Inf\"} " << count_ << '\n' << name << "_sum " << sum_ << '\n' << name << "_count " << count_ << '\n';
  }

 private:
  std::array<std::uint64_t, kBounds.size()> counts_{};
  std::uint64_t count_ = 0;
  double sum_ = 0;
};

class Metrics {
 public:
  using Clock = std::chrono::steady_clock;
  void tokens(std::int64_t n, Clock::time_point now) {
    const std::lock_guard lock(mu_);
    generated_ += n;
    window_.emplace_back(now, n);
    while (!window_.empty() && now - window_.front().first > std::chrono::seconds(10)) window_.pop_front();
  }
  void first_token(double seconds) {
    const std::lock_guard lock(mu_);
    ttft_.observe(seconds);
  }
  void inter_token(double seconds) {
    const std::lock_guard lock(mu_);
    itl_.observe(seconds);
  }
  void finished(const std::string& reason) {
    const std::lock_guard lock(mu_);
    finished_[reason] += 1;
  }
  void rejected(int status) {
    const std::lock_guard lock(mu_);
    rejected_[status] += 1;
  }
  std::string text(const llm::EngineLoad& load, Clock::time_point now) {
    const std::lock_guard lock(mu_);
    std::ostringstream o;
    auto gauge = [&](const char* name, const char* help, double v) {
      o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " gauge\n" << name << ' ' << v << '\n';
    };
    gauge("npugraph_requests_running", "Requests in a batch row (prefilling or decoding).", static_cast<double>(load.running));
    gauge("npugraph_requests_waiting", "Requests queued for a batch row.", static_cast<double>(load.waiting));
    gauge("npugraph_kv_blocks_used", "KV cache blocks held by requests.", static_cast<double>(load.kv_blocks_used));
    gauge("npugraph_kv_blocks_free", "KV cache blocks free (the cached ones among them).",
          static_cast<double>(load.kv_blocks_total - load.kv_blocks_used));
    gauge("npugraph_kv_blocks_cached", "Free KV cache blocks holding a cached prompt prefix, kept until evicted.",
          static_cast<double>(load.kv_blocks_cached));
    auto counter = [&](const char* name, const char* help, std::int64_t v) {
      o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " counter\n" << name << ' ' << v << '\n';
    };
    counter("npugraph_prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
            load.prefix_cache_queries);
    counter("npugraph_prefix_cache_hits_total", "Prompt tokens taken from the prefix cache (of those looked up).",
            load.prefix_cache_hits);
    counter("npugraph_mixed_steps_total", "Decode steps that carried a joining prompt's chunk in the same pass.",
            load.mixed_steps);
    while (!window_.empty() && now - window_.front().first > std::chrono::seconds(10)) window_.pop_front();
    std::int64_t recent = 0;
    for (const auto& [t, n] : window_) recent += n;
    gauge("npugraph_generation_tokens_per_second", "Generated tokens per second over the last 10 s.",
          static_cast<double>(recent) / 10.0);
    o << "# HELP npugraph_generation_tokens_total Generated tokens.\n# TYPE npugraph_generation_tokens_total counter\n"
      << "npugraph_generation_tokens_total " << generated_ << '\n';
    o << "# HELP npugraph_requests_finished_total Finished requests by finish reason.\n"
      << "# TYPE npugraph_requests_finished_total counter\n";
    for (const auto& [reason, n] : finished_) o << "npugraph_requests_finished_total{reason=\"" << reason << "\"} " << n << '\n';
    o << "# HELP npugraph_requests_rejected_total Requests refused before they ran, by HTTP status.\n"
      << "# TYPE npugraph_requests_rejected_total counter\n";
    for (const auto& [status, n] : rejected_) o << "npugraph_requests_rejected_total{status=\"" << status << "\"} " << n << '\n';
    ttft_.write(o, "npugraph_time_to_first_token_seconds", "From a request's arrival to its first token.");
    itl_.write(o, "npugraph_inter_token_latency_seconds", "Between a request's consecutive tokens.");
    return o.str();
  }

 private:
  std::mutex mu_;
  std::int64_t generated_ = 0;
  std::deque<std::pair<Clock::time_point, std::int64_t>> window_;
  std::map<std::string, std::int64_t> finished_;
  std::map<int, std::int64_t> rejected_;
  Histogram ttft_, itl_;
};

}  // namespace npugraph::serve
