#include "backends/cpu/compute_pool.hpp"

#include <algorithm>

#include "backends/cpu/spin_wait.hpp"
#include "npugraph/kernel.hpp"
#include "runtime/trace.hpp"

namespace npugraph::detail {

int hardware_threads() {
  static const int n = std::max(1u, std::thread::hardware_concurrency());
  return n;
}

ComputePool& compute_pool() {
  // Leaked on purpose: streams may still run work during static destruction.
  static ComputePool* pool = new ComputePool(hardware_threads() - 1);
  return *pool;
}

ComputePool::ComputePool(int helpers) {
  threads_.reserve(static_cast<std::size_t>(std::max(0, helpers)));
  for (int i = 0; i < helpers; ++i) threads_.emplace_back([this, i] { helper_loop(i); });
}

ComputePool::~ComputePool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  stopping_.store(true);
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ComputePool::post(Job* job, int max_helpers) {
  if (threads_.empty() || max_helpers <= 0) return;
  {
    std::unique_lock lock(mu_, std::defer_lock);
    lock_spinning(lock);
    job->max_helpers_ = max_helpers;
    jobs_.push_back(job);
  }
  signals_.fetch_add(1, std::memory_order_seq_cst);
  if (idle_.load(std::memory_order_seq_cst) > 0) work_cv_.notify_all();
}

void ComputePool::poke() {
  if (spinning_.load(std::memory_order_seq_cst) > 0) signals_.fetch_add(1, std::memory_order_seq_cst);
  if (idle_.load(std::memory_order_seq_cst) == 0) return;
  { std::lock_guard lock(mu_); }
  work_cv_.notify_all();
}

// Note [Retiring a job without sleeping]
// The owner reaches retire() as soon as nothing is left to claim, usually while a helper is still
// in its last chunk (a few microseconds). Blocking on retire_cv_ there put the owner to sleep in
// the kernel once per parallel kernel, and the futex wake-up that followed cost tens of
// microseconds on a VM: the decode step's GEMVs (~120 per token) ran at one core's speed in the
// median. So retire() polls `active_` first, like every other wait of the backend (spin_wait.hpp),
// and sleeps only after kSpin. A helper lowers `active_` as its last touch of the job, then
// notifies only when an owner sleeps (`retiring_`, raised before that owner's last check of
// `active_`; both sides seq_cst, so one of them sees the other). The pool's mutex is taken with
// lock_spinning() on these paths: glibc's mutex sleeps at once when contended.
void ComputePool::retire(Job* job) {
  if (tracing_on()) {  // the join as an event of its own (Note [Pool events in the trace])
    const std::int64_t start = trace_now_ns();
    retire_untraced(job);
    trace_event({.name = "join", .category = "join", .start_ns = start, .duration_ns = trace_now_ns() - start,
                 .stream = t_trace_lane});
    return;
  }
  retire_untraced(job);
}

void ComputePool::retire_untraced(Job* job) {
  {
    std::unique_lock lock(mu_, std::defer_lock);
    lock_spinning(lock);
    auto it = std::find(jobs_.begin(), jobs_.end(), job);
    if (it != jobs_.end()) jobs_.erase(it);
  }
  // No helper joins from here on; wait for those inside.
  const auto done = [&] { return job->active_.load(std::memory_order_seq_cst) == 0; };
  if (spin_until(done, std::chrono::steady_clock::now() + kSpin)) return;
  std::unique_lock lock(mu_);
  retiring_.fetch_add(1, std::memory_order_seq_cst);
  retire_cv_.wait(lock, done);
  retiring_.fetch_sub(1, std::memory_order_relaxed);
}

void ComputePool::helper_loop(int index) {
  t_pool_helper = index;
  std::unique_lock lock(mu_);
  for (;;) {
    Job* job = nullptr;
    for (Job* j : jobs_)
      if (j->active_ < j->max_helpers_ && j->has_work()) { job = j; break; }
    if (job == nullptr) {
      if (stop_) return;
      // Spin a little first (spin_wait.hpp): back-to-back kernels then find the helper awake.
      const std::uint64_t seen = signals_.load(std::memory_order_seq_cst);
      spinning_.fetch_add(1, std::memory_order_seq_cst);
      lock.unlock();
      const bool signalled = spin_until(
          [&] { return signals_.load(std::memory_order_acquire) != seen || stopping_.load(); },
          std::chrono::steady_clock::now() + kPoolSpin);
      lock_spinning(lock);
      spinning_.fetch_sub(1, std::memory_order_seq_cst);
      if (signalled) continue;
      idle_.fetch_add(1, std::memory_order_seq_cst);
      // Re-check after announcing idleness: poke() skips the notify when nobody is idle.
      bool found = false;
      for (Job* j : jobs_)
        if (j->active_ < j->max_helpers_ && j->has_work()) { found = true; break; }
      // stop_ is set under the lock before the destructor notifies: checked here, no lost wake-up.
      if (!found && !stop_) work_cv_.wait(lock);
      idle_.fetch_sub(1, std::memory_order_acq_rel);
      continue;
    }
    job->active_.fetch_add(1, std::memory_order_relaxed);
    lock.unlock();
    if (tracing_on() && !job->traces_itself()) {  // Note [Pool events in the trace]
      const std::int64_t start = trace_now_ns();
      job->help();
      trace_event({.name = "help", .category = "helper", .start_ns = start, .duration_ns = trace_now_ns() - start,
                   .stream = kHelperLane + static_cast<std::uint64_t>(index)});
    } else {
      job->help();
    }
    // The last touch of `job`: its owner may return from retire() and free it right after.
    if (job->active_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
        retiring_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard wake(mu_);
      retire_cv_.notify_all();
    }
    lock_spinning(lock);
  }
}

namespace {

// Note [Deterministic chunks]: chunk k is always [k*grain, min(n, (k+1)*grain)), whoever runs it.
class ChunkJob final : public ComputePool::Job {
 public:
  ChunkJob(std::int64_t n, std::int64_t grain, void (*fn)(void*, std::int64_t, std::int64_t),
           void* obj)
      : n_(n), grain_(grain), chunks_((n + grain - 1) / grain), fn_(fn), obj_(obj) {}

  bool has_work() const override { return next_.load(std::memory_order_relaxed) < chunks_; }
  void help() override {
    for (;;) {
      const std::int64_t k = next_.fetch_add(1, std::memory_order_relaxed);
      if (k >= chunks_) return;
      try {
        fn_(obj_, k * grain_, std::min(n_, (k + 1) * grain_));
      } catch (...) {
        std::lock_guard lock(error_mu_);
        if (!error_) error_ = std::current_exception();
        next_.store(chunks_, std::memory_order_relaxed);  // skip the rest
      }
    }
  }
  void rethrow() {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  const std::int64_t n_, grain_, chunks_;
  void (*fn_)(void*, std::int64_t, std::int64_t);
  void* obj_;
  std::atomic<std::int64_t> next_{0};
  std::mutex error_mu_;
  std::exception_ptr error_;
};

}  // namespace

void ComputePool::run_chunks(std::int64_t n, std::int64_t grain, int threads, ChunkFn fn, void* obj) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  if (n <= grain || threads <= 1 || threads_.empty()) {
    for (std::int64_t b = 0; b < n; b += grain) fn(obj, b, std::min(n, b + grain));
    return;
  }
  ChunkJob job(n, grain, fn, obj);
  const std::int64_t chunks = (n + grain - 1) / grain;
  post(&job, static_cast<int>(std::min<std::int64_t>(threads - 1, chunks - 1)));
  job.help();
  retire(&job);
  job.rethrow();
}

}  // namespace npugraph::detail

