// The cpu backend's compute pool (src/backends/cpu/compute_pool.hpp) on its own: every chunk runs
// exactly once whoever claims it, run_chunks returns only after the last helper left the job — on
// the polling path and on the sleeping one (Note [Retiring a job without sleeping]) — and owners on
// several threads share one pool, and a pool's destructor joins its helpers. The TSan build runs these too (make test-tsan).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backends/cpu/compute_pool.hpp"
#include "support/chunk_coverage.hpp"
#include "support/wait.hpp"

namespace {

namespace nd = npugraph::detail;

using Coverage = ngtest::ChunkCoverage;

TEST(ComputePool, EveryChunkRunsOnceAcrossBackToBackJobs) {
  nd::ComputePool pool(3);
  for (int rep = 0; rep < 2000; ++rep) {
    const std::int64_t grain = 1 + rep % 7;
    Coverage c(257, grain);
    pool.run_chunks(257, grain, 4, &Coverage::run, &c);
    ASSERT_EQ(c.bad(), 0) << "rep " << rep;
  }
}

// The owner's chunk 0 waits until a helper has started chunk 1, which then lasts until the owner is
// asleep in retire() (its polling, kSpin, ran out; nothing else is left to claim): the owner must
// take the sleeping path and be woken by that helper, and run_chunks must not return before chunk 1
// has finished. No chunk waits for a guessed while (Note [Tests without time], support/wait.hpp).
struct SlowLastChunk {
  const nd::ComputePool* pool = nullptr;
  std::thread::id owner;
  std::atomic<bool> helper_started{false};
  std::atomic<bool> helper_done{false};
  std::atomic<bool> helper_ran{false};
  std::atomic<bool> owner_slept{false};
  static void run(void* self, std::int64_t b, std::int64_t) {
    auto* s = static_cast<SlowLastChunk*>(self);
    if (b == 0) {
      (void)ngtest::eventually([&] { return s->helper_started.load(); });
      return;
    }
    const bool on_helper = std::this_thread::get_id() != s->owner;
    s->helper_ran.store(on_helper);
    s->helper_started.store(true);
    if (on_helper) s->owner_slept.store(ngtest::eventually([&] { return s->pool->retiring() > 0; }));
    s->helper_done.store(true);
  }
};

TEST(ComputePool, RetireWaitsForAHelperInALongLastChunk) {
  nd::ComputePool pool(1);
  int on_helper = 0;
  for (int rep = 0; rep < 20; ++rep) {
    SlowLastChunk s;
    s.pool = &pool;
    s.owner = std::this_thread::get_id();
    pool.run_chunks(2, 1, 2, &SlowLastChunk::run, &s);
    ASSERT_TRUE(s.helper_done.load()) << "run_chunks returned before chunk 1 finished, rep " << rep;
    if (s.helper_ran.load()) {
      EXPECT_TRUE(s.owner_slept.load()) << "the owner never slept in retire(), rep " << rep;
    }
    on_helper += s.helper_ran.load();
  }
  // The helper, not the owner, ran chunk 1 in (nearly) every repetition (the owner claims chunk 0
  // first unless it is descheduled between post() and help()): the sleeping path was taken.
  EXPECT_GE(on_helper, 15);
}

TEST(ComputePool, OwnersOnSeveralThreadsShareOnePool) {
  nd::ComputePool pool(2);
  std::atomic<int> failures{0};
  std::vector<std::thread> owners;
  for (int t = 0; t < 3; ++t)
    owners.emplace_back([&, t] {
      for (int rep = 0; rep < 300; ++rep) {
        Coverage c(64 + t, 3);
        pool.run_chunks(64 + t, 3, 3, &Coverage::run, &c);
        if (c.bad() != 0) failures.fetch_add(1);
      }
    });
  for (auto& o : owners) o.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ComputePool, AChunkThatThrowsReachesTheOwnerAndThePoolStaysUsable) {
  nd::ComputePool pool(1);
  const auto thrower = [](void*, std::int64_t b, std::int64_t) {
    if (b == 5) throw std::runtime_error("chunk 5 failed");
  };
  for (int rep = 0; rep < 50; ++rep) {
    try {
      pool.run_chunks(16, 1, 2, thrower, nullptr);
      FAIL() << "no exception, rep " << rep;
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "chunk 5 failed");
    }
  }
  Coverage c(100, 4);
  pool.run_chunks(100, 4, 2, &Coverage::run, &c);
  EXPECT_EQ(c.bad(), 0);
}

// A helper whose spin ran out just as the destructor set stop_ used to wait on work_cv_ after the
// notify (a hang in join()); destroying pools whose helpers are at every stage of going idle.
TEST(ComputePool, DestroyingAPoolJoinsItsHelpersAtAnyStage) {
  for (int rep = 0; rep < 300; ++rep) {
    nd::ComputePool pool(2);
    if (rep % 2) {
      Coverage c(32, 1);
      pool.run_chunks(32, 1, 3, &Coverage::run, &c);
      ASSERT_EQ(c.bad(), 0);
    }
    // Jitter, not a wait (Note [Tests without time]): 0-39 us spreads the helpers over spinning
    // (kPoolSpin, 20 us), going idle and asleep when the destructor comes; nothing is asserted
    // about where they were, only that join() returns.
    std::this_thread::sleep_for(std::chrono::microseconds(rep % 40));
  }
}

}  // namespace
