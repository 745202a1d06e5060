// The CPU backend's shared compute pool.
//
// Note [One pool, never more busy threads than cores]
// All parallel work — a kernel's parallel_for chunks and the concurrent branches of a graph replay —
// runs on one process-wide pool of (cores - 1) helper threads. The thread that owns the work (a
// stream's worker) always works on it too, and only waits for helpers once nothing is left to claim,
// so a job finishes even when every helper is busy elsewhere, and nested jobs cannot deadlock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "npugraph/kernel.hpp"

namespace npugraph::detail {

class ComputePool final : public ChunkRunner {
 public:
  // Work helpers may join. help() runs until it finds nothing to claim, then returns.
  class Job {
   public:
    virtual ~Job() = default;
    virtual bool has_work() const = 0;
    virtual void help() = 0;
    // Whether help() records its own "help" events while tracing (Note [A replay's team]).
    virtual bool traces_itself() const { return false; }

   private:
    friend class ComputePool;
    // Helpers inside help(): raised under the pool's mutex, lowered without it (the helper's last
    // touch of the job), so retire() can poll it (Note [Retiring a job without sleeping]).
    std::atomic<int> active_{0};
    int max_helpers_ = 0;  // guarded by the pool's mutex
  };

  explicit ComputePool(int helpers);
  ~ComputePool();
  ComputePool(const ComputePool&) = delete;
  ComputePool& operator=(const ComputePool&) = delete;

  int helpers() const { return static_cast<int>(threads_.size()); }
  // Owners asleep in retire() now. Only observed, never acted on: a test holds a helper's chunk
  // until the owner provably took the sleeping path (tests/backends/test_compute_pool.cpp).
  int retiring() const { return retiring_.load(std::memory_order_seq_cst); }

  // Makes `job` visible to at most `max_helpers` helpers at once.
  void post(Job* job, int max_helpers);
  // Tells idle helpers that a posted job has new work.
  void poke();
  // Withdraws `job` and waits until no helper is inside it (while tracing, the wait is a "join"
  // event: Note [Pool events in the trace] in src/runtime/trace.hpp).
  void retire(Job* job);

  // Runs fn(obj, begin, end) over chunks of `grain`, the caller included, on up to `threads` threads.
  void run_chunks(std::int64_t n, std::int64_t grain, int threads, ChunkFn fn, void* obj) override;

 private:
  void helper_loop(int index);
  void retire_untraced(Job* job);

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable retire_cv_;
  std::vector<Job*> jobs_;
  std::atomic<int> idle_{0};
  std::atomic<int> spinning_{0};              // helpers polling `signals_` before they sleep
  std::atomic<int> retiring_{0};              // owners asleep in retire() (on retire_cv_)
  std::atomic<std::uint64_t> signals_{0};     // bumped by post(), and by poke() while one spins
  std::atomic<bool> stopping_{false};
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// The index of the pool helper running on this thread; -1 on other threads.
inline thread_local int t_pool_helper = -1;

// The process-wide pool: hardware_concurrency() - 1 helpers.
ComputePool& compute_pool();
int hardware_threads();

}  // namespace npugraph::detail
