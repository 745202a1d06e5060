// The cpu backend's stream queue: a worker thread per stream that runs its tasks in order.
#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "backends/cpu/compute_pool.hpp"
#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/execute.hpp"
#include "backends/cpu/spin_wait.hpp"
#include "npugraph/error.hpp"
#include "runtime/spin_lock.hpp"
#include "runtime/stream_state.hpp"

namespace npugraph::detail {
namespace {

// Set on a worker thread that destroyed its own queue (a task held the stream's last reference).
thread_local bool t_destroyed_own_queue = false;

// Note [Worker lifetime]
// The worker refers to its stream by a raw pointer: the stream owns the queue, and ~StreamState joins
// the worker (after setting `closing`, which makes blocked waits give up), so the pointer outlives
// every use. The worker never holds a strong reference — a stream blocked in a wait could then never
// be destroyed. The stream's last reference may be dropped on the worker itself, by a task object it
// releases; so objects are released only after the whole batch ran, and if ~StreamState then ran on
// the worker, shutdown() detached it and run() returns without touching the queue again.
class CpuStreamQueue final : public StreamQueue {
 public:
  explicit CpuStreamQueue(const std::shared_ptr<StreamState>& owner) : owner_(owner.get()) {
    thread_ = std::thread([this] { run(); });
  }
  ~CpuStreamQueue() override { shutdown(); }

  void submit(Task&& task) override {
    bool wake;
    const bool task_is_launch = is_launch(task);
    {
      std::lock_guard lock(mu_);
      NG_CHECK_STATE(!stop_, owner_->str(), " is shut down: no more work can be issued on it");
      // A replay takes its turn in its graph's launch order (Note [Replay order]).
      if (task.kind == TaskKind::work) work_of(task.object.get()).accept(task.hold, *owner_);
      pending_.push_back(std::move(task));
      submitted_.store(submitted_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
      wake = sleeping_;
    }
    if (task_is_launch) hurry();  // Note [Batch gathering]
    if (wake) {
      { std::lock_guard lock(sleep_mu_); }
      cv_.notify_one();
    }
  }

  std::uint64_t submitted() const override { return submitted_.load(std::memory_order_acquire); }
  std::uint64_t completed() const override { return completed_.load(std::memory_order_acquire); }

  bool wait_completed(std::uint64_t target,
                      std::chrono::steady_clock::time_point deadline) override {
    if (completed_.load(std::memory_order_acquire) >= target) return true;
    hurry();
    if (spin_until([&] { return completed_.load(std::memory_order_acquire) >= target; },
                   std::min(std::chrono::steady_clock::now() + kSpin, deadline)))
      return true;
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    std::unique_lock lock(done_mu_);
    const bool ok = done_cv_.wait_until(lock, deadline, [&] {
      return completed_.load(std::memory_order_acquire) >= target;
    });
    waiters_.fetch_sub(1);
    return ok;
  }

  void shutdown() noexcept override {
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
      stop_ = true;
    }
    stopping_.store(true);
    {
      std::lock_guard lock(sleep_mu_);
    }
    cv_.notify_one();
    if (!thread_.joinable()) return;
    if (thread_.get_id() == std::this_thread::get_id()) {
      t_destroyed_own_queue = true;
      thread_.detach();
      return;
    }
    thread_.join();
  }

 private:
  void run() {
    std::vector<Task> batch;
    std::uint64_t taken = 0;
    bool quick = false;          // the last batch ran in less than kGather (Note [Batch gathering])
    std::uint32_t hurried = 0;   // hurry_ when the last batch was taken
    for (;;) {
      // Spin briefly for more work before sleeping (see kSpin).
      if (submitted_.load(std::memory_order_acquire) == taken)
        spin_until([&] { return submitted_.load(std::memory_order_acquire) != taken; },
                   std::chrono::steady_clock::now() + kSpin);
      else if (quick)
        gather(hurried);
      hurried = hurry_.load(std::memory_order_relaxed);  // read before the batch is taken
      {
        std::unique_lock lock(mu_);
        if (pending_.empty()) {
          if (stop_) return;
          sleeping_ = true;  // submit() sees it under mu_ and then notifies under sleep_mu_
          lock.unlock();
          {
            std::unique_lock sleep(sleep_mu_);
            cv_.wait(sleep, [&] {
              return stopping_.load() || submitted_.load(std::memory_order_acquire) != taken;
            });
          }
          lock.lock();
          sleeping_ = false;
          if (pending_.empty()) return;  // stopped with nothing left
        }
        batch.swap(pending_);
      }
      const std::uint64_t first = taken;
      taken += batch.size();
      const std::uint64_t done = batch.size();
      // A batch with a graph launch is not quick; only a short one of other tasks is timed.
      quick = batch.size() < kGatherCount &&
              std::none_of(batch.begin(), batch.end(),
                           [](const Task& t) { return is_launch(t); });
      const auto began = quick ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
      // At process exit the memory queued work reads may be gone already: it is dropped, not run.
      if (!runtime_exiting())
        for (std::size_t i = 0; i < batch.size(); ++i) {
          owner_->executing = first + i;
          execute_task(batch[i], *owner_, compute_pool());
        }
      quick = quick && std::chrono::steady_clock::now() - began < kGather;
      // Release the task objects (graphs, events, pools) before the batch counts as completed, so
      // that after synchronize() nothing the work held is still alive. This may run ~StreamState
      // (Note [Worker lifetime]); then nobody can be waiting on us, and we leave without a touch.
      batch.clear();
      if (t_destroyed_own_queue) return;
      completed_.fetch_add(done, std::memory_order_seq_cst);
      if (waiters_.load(std::memory_order_seq_cst) > 0) {
        { std::lock_guard lock(done_mu_); }
        done_cv_.notify_all();
      }
    }
  }

  // Note [Batch gathering]
  // When the worker keeps up with a thread that launches cheap kernels back to back, it takes one or
  // two tasks per batch: each submit() then finds the lock, the queue and submitted_ in the worker's
  // cache, and its lock's exchange waits for them (on a 2-core Xeon VM an eager enqueue cost
  // ~200 ns, against ~50 ns with the worker asleep; ~110 ns with gathering). So after a quick, small batch, when more work is already
  // waiting, the worker leaves the queue alone for kGather and then takes everything at once; it
  // reads only `hurry_` meanwhile, a counter that Stream::synchronize (every wait_completed) and a
  // graph launch bump to end the gathering at once (a counter, not a flag the worker clears:
  // clearing it would pull the line back on every batch). The first task after an idle spell is
  // taken at once (a launch + synchronize pays nothing), and a worker running real kernels finds its
  // next batch already long and never gathers. The price: work queued behind a run of cheap
  // launches may start up to kGather later when what waits for it is not this queue's
  // wait_completed (Event::synchronize, an event or ExternalEvent wait on another stream, a
  // stream query loop). Reading submitted_ during the window instead (to
  // stop at a count) gave back most of the gain: every read pulls the line the producer writes.
  static constexpr std::size_t kGatherCount = 64;
  static constexpr auto kGather = std::chrono::microseconds(2);

  void gather(std::uint32_t hurried) const {
    const auto calm = [&] { return hurry_.load(std::memory_order_relaxed) == hurried; };
    const auto until = std::chrono::steady_clock::now() + kGather;
    while (calm() && std::chrono::steady_clock::now() < until)
      for (int i = 0; i < 4 && calm(); ++i) NG_PAUSE();
  }
  // Any change will do: racing bumps may collapse into one.
  void hurry() { hurry_.store(hurry_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }

  // Three cache lines: what submit() writes, what the idle worker polls, what synchronize polls
  // (sharing one line would make every enqueue wait for the line the worker keeps reading).
  // mu_ (a spin lock: held for a push or a swap; a blocking mutex made every contended enqueue a
  // futex call) guards pending_, sleeping_ and stop_; the worker sleeps on cv_ with sleep_mu_.
  StreamState* owner_;
  alignas(64) SpinLock mu_;
  std::vector<Task> pending_;
  bool sleeping_ = false;
  bool stop_ = false;
  std::atomic<bool> stopping_{false};
  std::mutex sleep_mu_;
  std::condition_variable cv_;
  alignas(64) std::atomic<std::uint64_t> submitted_{0};
  alignas(64) std::atomic<std::uint64_t> completed_{0};
  alignas(64) std::atomic<std::uint32_t> hurry_{0};  // Note [Batch gathering]
  alignas(64) std::atomic<int> waiters_{0};
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<StreamQueue> make_cpu_queue(const std::shared_ptr<StreamState>& owner) {
  return std::make_unique<CpuStreamQueue>(owner);
}

}  // namespace npugraph::detail
