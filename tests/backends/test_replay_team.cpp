// A cpu replay's worker team (src/backends/cpu/replay_team.hpp, Note [A replay's team]) on its own:
// every chunk runs exactly once with the pool's chunk bounds across thousands of jobs in a row,
// helpers take part, the owner waits for a long last chunk (polling and asleep), a chunk's exception
// reaches the owner and the team stays usable, and the paths that leave the team (nested jobs, other
// threads, more than kMaxChunks chunks) still cover every index. The TSan build runs these too.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backends/cpu/compute_pool.hpp"
#include "backends/cpu/replay_team.hpp"
#include "support/chunk_coverage.hpp"
#include "support/wait.hpp"

namespace {

namespace nd = npugraph::detail;

using Coverage = ngtest::ChunkCoverage;

TEST(ReplayTeam, EveryChunkRunsOnceWithThePoolsBoundsAcrossThousandsOfJobs) {
  nd::ComputePool pool(3);
  nd::ReplayTeam team;
  team.begin(pool, 3);
  for (int rep = 0; rep < 3000; ++rep) {
    const std::int64_t n = 1 + rep % 300, grain = 1 + rep % 7;
    Coverage c(n, grain);
    team.run_chunks(n, grain, 4, &Coverage::run, &c);
    ASSERT_EQ(c.bad(), 0) << "rep " << rep << ": n " << n << ", grain " << grain;
  }
  team.end();
}

// Two chunks that each wait until both have started: they finish only if two threads run them.
struct Rendezvous {
  std::atomic<int> started{0};
  std::atomic<int> met{0};
  static void run(void* self, std::int64_t, std::int64_t) {
    auto* r = static_cast<Rendezvous*>(self);
    r->started.fetch_add(1);
    if (ngtest::eventually([&] { return r->started.load() == 2; })) r->met.fetch_add(1);
  }
};

TEST(ReplayTeam, HelpersTakeChunksOfEveryJob) {
  nd::ComputePool pool(1);
  nd::ReplayTeam team;
  team.begin(pool, 1);
  for (int rep = 0; rep < 50; ++rep) {  // posted once, then helpers polling the word or back in the pool
    Rendezvous r;
    team.run_chunks(2, 1, 2, &Rendezvous::run, &r);
    ASSERT_EQ(r.met.load(), 2) << "rep " << rep;
  }
  team.end();
  // After end() the next replay's team posts itself again.
  Rendezvous r;
  team.begin(pool, 1);
  team.run_chunks(2, 1, 2, &Rendezvous::run, &r);
  EXPECT_EQ(r.met.load(), 2);
  team.end();
}

// Two chunks: the one a helper runs lasts until the owner is asleep waiting for it; the owner's
// waits until a helper has started the other (helpers poll the word, so either may take chunk 0).
// run_chunks must not return before the helper's chunk has finished.
struct SlowHelperChunk {
  const nd::ReplayTeam* team = nullptr;
  std::thread::id owner;
  std::atomic<bool> helper_started{false}, helper_done{false}, owner_slept{false};
  static void run(void* self, std::int64_t, std::int64_t) {
    auto* s = static_cast<SlowHelperChunk*>(self);
    if (std::this_thread::get_id() == s->owner) {
      (void)ngtest::eventually([&] { return s->helper_started.load(); });
      return;
    }
    s->helper_started.store(true);
    s->owner_slept.store(ngtest::eventually([&] { return s->team->owner_asleep(); }));
    s->helper_done.store(true);
  }
};

TEST(ReplayTeam, TheOwnerWaitsForALongLastChunkAsleep) {
  nd::ComputePool pool(1);
  nd::ReplayTeam team;
  team.begin(pool, 1);
  for (int rep = 0; rep < 20; ++rep) {
    SlowHelperChunk s;
    s.team = &team;
    s.owner = std::this_thread::get_id();
    team.run_chunks(2, 1, 2, &SlowHelperChunk::run, &s);
    ASSERT_TRUE(s.helper_started.load()) << "no helper took a chunk, rep " << rep;
    ASSERT_TRUE(s.helper_done.load()) << "run_chunks returned before the helper's chunk finished, rep " << rep;
    EXPECT_TRUE(s.owner_slept.load()) << "the owner never slept, rep " << rep;
  }
  team.end();
}

TEST(ReplayTeam, AChunkThatThrowsReachesTheOwnerAndTheTeamStaysUsable) {
  nd::ComputePool pool(1);
  nd::ReplayTeam team;
  team.begin(pool, 1);
  const auto thrower = [](void*, std::int64_t b, std::int64_t) {
    if (b == 5) throw std::runtime_error("chunk 5 failed");
  };
  for (int rep = 0; rep < 50; ++rep) {
    try {
      team.run_chunks(16, 1, 2, thrower, nullptr);
      FAIL() << "no exception, rep " << rep;
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "chunk 5 failed");
    }
    Coverage c(100, 3);
    team.run_chunks(100, 3, 2, &Coverage::run, &c);
    ASSERT_EQ(c.bad(), 0) << "rep " << rep;
  }
  team.end();
}

// A chunk that runs a job of its own through the same team, on the owner (nested: in_job_) and on
// a helper (not the owner's thread): both take the pool's path, and every index is covered.
struct Nested {
  nd::ReplayTeam* team = nullptr;
  std::vector<Coverage*> inner;
  std::atomic<int> bad{0};
  static void run(void* self, std::int64_t b, std::int64_t e) {
    auto* s = static_cast<Nested*>(self);
    for (std::int64_t i = b; i < e; ++i)
      s->team->run_chunks(40, 3, 2, &Coverage::run, s->inner[static_cast<std::size_t>(i)]);
  }
};

TEST(ReplayTeam, NestedJobsAndOtherThreadsTakeThePoolsPath) {
  nd::ComputePool pool(2);
  nd::ReplayTeam team;
  team.begin(pool, 2);
  for (int rep = 0; rep < 30; ++rep) {
    std::vector<std::unique_ptr<Coverage>> inner;
    Nested s;
    s.team = &team;
    for (int i = 0; i < 8; ++i) inner.push_back(std::make_unique<Coverage>(40, 3));
    for (auto& c : inner) s.inner.push_back(c.get());
    team.run_chunks(8, 1, 3, &Nested::run, &s);
    for (const auto& c : inner) ASSERT_EQ(c->bad(), 0) << "rep " << rep;
  }
  // Another thread's job while the owner runs its own.
  std::thread other([&] {
    for (int rep = 0; rep < 100; ++rep) {
      Coverage c(77, 5);
      team.run_chunks(77, 5, 3, &Coverage::run, &c);
      EXPECT_EQ(c.bad(), 0);
    }
  });
  for (int rep = 0; rep < 100; ++rep) {
    Coverage c(91, 2);
    team.run_chunks(91, 2, 3, &Coverage::run, &c);
    ASSERT_EQ(c.bad(), 0);
  }
  other.join();
  team.end();
}

TEST(ReplayTeam, MoreChunksThanTheWordHoldsTakeThePoolsPath) {
  nd::ComputePool pool(1);
  nd::ReplayTeam team;
  team.begin(pool, 1);
  const std::int64_t n = nd::ReplayTeam::kMaxChunks + 2;
  Coverage c(n, 1);
  team.run_chunks(n, 1, 2, &Coverage::run, &c);
  EXPECT_EQ(c.bad(), 0);
  Coverage d(nd::ReplayTeam::kMaxChunks, 1);  // the largest job the word holds
  team.run_chunks(nd::ReplayTeam::kMaxChunks, 1, 2, &Coverage::run, &d);
  EXPECT_EQ(d.bad(), 0);
  team.end();
}

}  // namespace
