#include "backends/cpu/replay_team.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "backends/cpu/spin_wait.hpp"
#include "runtime/trace.hpp"

namespace npugraph::detail {
namespace {

constexpr std::uint32_t epoch_of(std::uint64_t w) { return static_cast<std::uint32_t>(w >> 32); }
constexpr std::uint32_t chunks_of(std::uint64_t w) { return static_cast<std::uint32_t>(w >> 16) & 0xffffu; }
constexpr std::uint32_t next_of(std::uint64_t w) { return static_cast<std::uint32_t>(w) & 0xffffu; }
constexpr bool claimable(std::uint64_t w) { return next_of(w) < chunks_of(w); }

}  // namespace

ReplayTeam::~ReplayTeam() { end(); }

void ReplayTeam::begin(ComputePool& pool, int max_helpers) {
  pool_ = &pool;
  max_helpers_ = std::min(max_helpers, pool.helpers());
  owner_ = std::this_thread::get_id();
}

void ReplayTeam::end() {
  if (!posted_) return;
  dismissed_.store(true, std::memory_order_seq_cst);
  pool_->retire(this);
  dismissed_.store(false, std::memory_order_relaxed);
  posted_ = false;
}

bool ReplayTeam::has_work() const {
  return !dismissed_.load(std::memory_order_relaxed) && claimable(word_.load(std::memory_order_relaxed));
}

void ReplayTeam::run_chunks(std::int64_t n, std::int64_t grain, int threads, ChunkFn fn, void* obj) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  const std::int64_t chunks = (n + grain - 1) / grain;
  if (chunks == 1 || threads <= 1 || max_helpers_ <= 0) {
    for (std::int64_t b = 0; b < n; b += grain) fn(obj, b, std::min(n, b + grain));
    return;
  }
  // The owner's thread first: in_job_ is the owner's alone.
  if (std::this_thread::get_id() != owner_ || in_job_ || chunks > kMaxChunks)
    return pool_->run_chunks(n, grain, threads, fn, obj);
  in_job_ = true;
  // Every chunk of the last job has finished (wait_done), so no helper reads these now.
  fn_.store(fn, std::memory_order_relaxed);
  obj_.store(obj, std::memory_order_relaxed);
  n_.store(n, std::memory_order_relaxed);
  grain_.store(grain, std::memory_order_relaxed);
  failed_.store(false, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  const std::uint64_t word = (std::uint64_t{++epoch_} << 32) | (static_cast<std::uint64_t>(chunks) << 16);
  word_.store(word, std::memory_order_seq_cst);  // publishes the job (release)
  if (!posted_) {
    pool_->post(this, max_helpers_);
    posted_ = true;
  } else {
    pool_->poke();  // helpers back in the pool's loop come back through has_work()
  }
  drain(word);
  wait_done(static_cast<std::uint32_t>(chunks));
  in_job_ = false;
  std::exception_ptr error;
  {
    std::lock_guard lock(error_mu_);
    error = std::exchange(error_, nullptr);
  }
  if (error) std::rethrow_exception(error);
}

void ReplayTeam::drain(std::uint64_t w) {
  const std::uint32_t epoch = epoch_of(w);
  while (epoch_of(w) == epoch && claimable(w)) {
    // Read before the claim; the claim succeeds only if they are this job's (Note [A replay's team]).
    const ChunkFn fn = fn_.load(std::memory_order_relaxed);
    void* const obj = obj_.load(std::memory_order_relaxed);
    const std::int64_t n = n_.load(std::memory_order_relaxed);
    const std::int64_t grain = grain_.load(std::memory_order_relaxed);
    if (!word_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    const std::int64_t b = static_cast<std::int64_t>(next_of(w)) * grain;
    if (!failed_.load(std::memory_order_relaxed)) {
      try {
        fn(obj, b, std::min(n, b + grain));
      } catch (...) {
        std::lock_guard lock(error_mu_);
        if (!error_) error_ = std::current_exception();
        failed_.store(true, std::memory_order_relaxed);
      }
    }
    // The owner may write the next job once the last chunk is counted: count after the last read.
    done_.fetch_add(1, std::memory_order_seq_cst);
    if (owner_sleeping_.load(std::memory_order_seq_cst)) done_.notify_all();
    w = word_.load(std::memory_order_acquire);
  }
}

void ReplayTeam::wait_done(std::uint32_t chunks) {
  const auto finished = [&] { return done_.load(std::memory_order_acquire) == chunks; };
  if (finished()) return;
  const bool traced = tracing_on();
  const std::int64_t start = traced ? trace_now_ns() : 0;
  if (!spin_until(finished, std::chrono::steady_clock::now() + kSpin)) {
    // A long last chunk: sleep until the helper that finishes a chunk sees us asleep and wakes us.
    for (;;) {
      owner_sleeping_.store(true, std::memory_order_seq_cst);
      const std::uint32_t d = done_.load(std::memory_order_seq_cst);
      if (d == chunks) break;
      done_.wait(d, std::memory_order_acquire);
    }
    owner_sleeping_.store(false, std::memory_order_relaxed);
  }
  if (traced)  // the join, as the pool's retire() records it (Note [Pool events in the trace])
    trace_event({.name = "join", .category = "join", .start_ns = start, .duration_ns = trace_now_ns() - start,
                 .stream = t_trace_lane});
}

void ReplayTeam::help() {
  const auto job_or_dismissed = [&] {
    return dismissed_.load(std::memory_order_relaxed) || claimable(word_.load(std::memory_order_relaxed));
  };
  for (;;) {
    // Between kernels: poll for the next job, and leave for the pool's loop after kPoolSpin.
    if (!spin_until(job_or_dismissed, std::chrono::steady_clock::now() + kPoolSpin)) return;
    if (dismissed_.load(std::memory_order_relaxed)) return;
    const std::uint64_t w = word_.load(std::memory_order_acquire);
    if (!tracing_on()) {
      drain(w);
      continue;
    }
    // Each stretch of chunks is one "help" event (Note [Pool events in the trace]), not the polling.
    const std::int64_t start = trace_now_ns();
    drain(w);
    trace_event({.name = "help", .category = "helper", .start_ns = start, .duration_ns = trace_now_ns() - start,
                 .stream = kHelperLane + static_cast<std::uint64_t>(std::max(0, t_pool_helper))});
  }
}

}  // namespace npugraph::detail
