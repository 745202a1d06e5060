// The worker team of one cpu graph replay: the parallel kernels of a chain run their chunks on it.
//
// Note [A replay's team]
// Without it every parallel kernel of a replay posts a job to the compute pool and retires it (two
// trips through the pool's mutex, a scan of its job list by each helper, a wake-up when the helper
// had gone back to the pool's loop): ~120-150 times in a decode step. A replay of a chain (one
// node runs at a time, on the replay's owner) instead posts its team once, at its first parallel
// kernel, and retires it once, when the replay ends. Between kernels the helpers stay in the team
// and poll one word; a kernel's run_chunks publishes its job in that word and waits for the last
// chunk with no lock at all. A helper that finds no new job for kPoolSpin goes back to the pool's
// loop (free for other streams' work) and comes back through has_work() when a job is published.
//
// The word is epoch:32 | chunks:16 | next:16. A chunk is claimed by a compare-and-swap of the whole
// word, so a claim can only take a chunk of the job its claimer read: the job's function and
// bounds are read before the swap, and the owner writes the next job's only after every chunk of
// this one was claimed and has finished (the swap of a word whose `next` < `chunks` fails after
// that). Chunk k is [k*grain, min(n, (k+1)*grain)) as in the pool (Note [Deterministic chunks]), so
// results are bitwise those of eager execution. A job of more than 65535 chunks, a run_chunks from
// a thread that is not the owner (a chunk's nested parallel_for on a helper) or from inside a job
// (nested on the owner) takes the pool's path instead.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>

#include "backends/cpu/compute_pool.hpp"
#include "npugraph/kernel.hpp"

namespace npugraph::detail {

class ReplayTeam final : public ComputePool::Job, public ChunkRunner {
 public:
  ReplayTeam() = default;
  ~ReplayTeam() override;
  ReplayTeam(const ReplayTeam&) = delete;
  ReplayTeam& operator=(const ReplayTeam&) = delete;

  // Binds the team to the calling thread (the replay's owner), `pool` and up to `max_helpers`
  // helpers. The team is posted to the pool at its first parallel job.
  void begin(ComputePool& pool, int max_helpers);
  // Withdraws the team from the pool and waits until no helper is inside (ComputePool::retire).
  void end();

  void run_chunks(std::int64_t n, std::int64_t grain, int threads, ChunkFn fn, void* obj) override;

  bool has_work() const override;
  void help() override;
  bool traces_itself() const override { return true; }

  static constexpr std::int64_t kMaxChunks = 0xffff;
  // Whether the owner sleeps waiting for a job's last chunk. Only observed, by a test that holds a
  // helper's chunk until the owner provably took the sleeping path (tests/backends/test_replay_team.cpp).
  bool owner_asleep() const { return owner_sleeping_.load(std::memory_order_seq_cst); }

 private:
  // Runs chunks of the job in `word` until none is left to claim or the job is another one.
  void drain(std::uint64_t word);
  void wait_done(std::uint32_t chunks);

  ComputePool* pool_ = nullptr;
  int max_helpers_ = 0;
  std::thread::id owner_;
  bool posted_ = false;   // owner only
  bool in_job_ = false;   // owner only
  std::uint32_t epoch_ = 0;  // owner only

  std::atomic<std::uint64_t> word_{0};  // epoch:32 | chunks:16 | next:16
  std::atomic<std::uint32_t> done_{0};  // chunks of the current job finished
  std::atomic<bool> owner_sleeping_{false};
  std::atomic<bool> dismissed_{false};
  // The current job (written by the owner before it publishes the word).
  std::atomic<ChunkFn> fn_{nullptr};
  std::atomic<void*> obj_{nullptr};
  std::atomic<std::int64_t> n_{0}, grain_{1};
  std::atomic<bool> failed_{false};  // a chunk threw: the rest are claimed but not run
  std::mutex error_mu_;
  std::exception_ptr error_;
};

}  // namespace npugraph::detail
