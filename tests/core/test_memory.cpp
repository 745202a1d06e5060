// The caching allocator, graph-private pools and their sharing (docs/semantics.md §3), proven by statistics.
#include <gtest/gtest.h>

#include "npugraph/npugraph.hpp"
#include "support/host_tensors.hpp"

using namespace npugraph;

TEST(Memory, FreedBlocksAreCachedAndReusedOnTheSameStream) {
  device_synchronize();
  empty_cache();
  void* first;
  {
    Tensor t = empty({1000}, f32);
    first = t.data();
  }
  const MemoryStats cached = memory_stats();
  Tensor again = empty({1000}, f32);
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(memory_stats().reserved_bytes, cached.reserved_bytes);  // no new system allocation
}

TEST(Memory, BlocksAreNotReusedAcrossStreams) {
  Stream other = Stream::create();
  void* first;
  {
    Tensor t = empty({4096}, f32);
    first = t.data();
  }
  StreamGuard guard(other);
  Tensor t2 = empty({4096}, f32);
  EXPECT_NE(t2.data(), first);
}

TEST(Memory, CaptureAllocatesFromThePrivatePoolAndTensorsSurviveReplays) {
  Tensor src = ngtest::f32_tensor({1, 2, 3, 4});
  Graph g;
  Tensor out;
  {
    CaptureScope capture(g);
    out = empty({4}, f32);               // from the graph's pool
    ops::scale_out(src, 2.0, out);
  }
  ASSERT_TRUE(g.pool().defined());
  EXPECT_GE(g.pool().stats().allocated_bytes, 16u);
  for (int i = 0; i < 3; ++i) {
    std::fill_n(out.data_ptr<float>(), 4, 0.0f);
    g.replay();
    device_synchronize();
    EXPECT_EQ(ngtest::values_of(out), (std::vector<float>{2, 4, 6, 8}));
  }
}

TEST(Memory, TwoGraphsShareAPoolAndResetReleasesIt) {
  device_synchronize();
  const std::size_t base = memory_stats().reserved_bytes;
  PoolHandle pool = graph_pool_handle();
  Tensor src = ngtest::f32_tensor(std::vector<float>(1 << 16, 1.0f));  // 256 KiB
  const std::size_t with_src = memory_stats().reserved_bytes;
  Graph g1, g2;
  Tensor o1, o2;
  {
    CaptureScope c(g1, {.pool = pool});
    o1 = empty({1 << 16}, f32);
    ops::scale_out(src, 2.0, o1);
  }
  {
    CaptureScope c(g2, {.pool = pool});
    o2 = empty({1 << 16}, f32);
    ops::scale_out(o1, 3.0, o2);
  }
  EXPECT_EQ(g1.pool(), pool);
  EXPECT_EQ(g2.pool(), pool);
  EXPECT_EQ(pool.stats().allocated_bytes, 2u * (1 << 18));
  g1.replay();
  g2.replay();
  device_synchronize();
  EXPECT_EQ(o2.data_ptr<float>()[123], 6.0f);

  // The pool lives while a graph, the handle or a tensor holds it.
  o1 = Tensor();
  o2 = Tensor();
  g1.reset();
  EXPECT_EQ(pool.stats().reserved_bytes, 2u * (1 << 18));  // g2 and the handle still hold it
  g2.reset();
  EXPECT_GT(memory_stats().reserved_bytes, with_src);
  pool = PoolHandle();
  EXPECT_EQ(memory_stats().reserved_bytes, with_src);      // every pool byte went back
  src = Tensor();
  empty_cache();
  EXPECT_LE(memory_stats().reserved_bytes, base);
}

// torch's counters (allocator_stats.hpp): a block under 1 MiB counts in the small pool, rounded to
// 512 bytes; one above in the large pool, rounded to 64 KiB; requested_bytes keeps the asked size.
TEST(Memory, AllocatorStatsCountBlocksByPoolType) {
  const AllocatorStats before = allocator_stats();
  const std::size_t small_request = 1001 * 4, large_request = (std::size_t{1} << 20) * 3 + 4;
  {
    Tensor s = empty({1001}, f32);
    Tensor l = empty({static_cast<std::int64_t>(large_request / 4)}, f32);
    const AllocatorStats mid = allocator_stats();
    auto grew = [&](const std::array<StatCounter, 3>& a, const std::array<StatCounter, 3>& b, int pool) {
      return a[static_cast<std::size_t>(pool)].current - b[static_cast<std::size_t>(pool)].current;
    };
    EXPECT_EQ(grew(mid.allocation, before.allocation, kStatAll), 2);
    EXPECT_EQ(grew(mid.allocation, before.allocation, kStatSmallPool), 1);
    EXPECT_EQ(grew(mid.allocation, before.allocation, kStatLargePool), 1);
    EXPECT_EQ(grew(mid.allocated_bytes, before.allocated_bytes, kStatSmallPool), 4096);
    EXPECT_EQ(grew(mid.allocated_bytes, before.allocated_bytes, kStatLargePool), 3 * (1 << 20) + 64 * 1024);
    EXPECT_EQ(grew(mid.requested_bytes, before.requested_bytes, kStatAll),
              static_cast<std::int64_t>(small_request + large_request));
    EXPECT_EQ(mid.segment[kStatAll].allocated - before.segment[kStatAll].allocated,
              mid.num_device_alloc - before.num_device_alloc);
  }
  const AllocatorStats after = allocator_stats();
  EXPECT_EQ(after.allocation[kStatAll].current, before.allocation[kStatAll].current);
  EXPECT_EQ(after.allocation[kStatAll].freed - before.allocation[kStatAll].freed, 2);
}

TEST(Memory, SnapshotListsLiveAndCachedBlocks) {
  void* data;
  {
    Tensor t = empty({777}, f32);
    data = t.data();
    bool found = false;
    for (const SegmentSnapshot& s : memory_snapshot())
      if (s.address == reinterpret_cast<std::uintptr_t>(data)) {
        found = true;
        EXPECT_TRUE(s.allocated);
        EXPECT_EQ(s.size, 3584u);  // 3108 bytes rounded up to 512
        EXPECT_EQ(s.requested_size, 3108u);
        EXPECT_EQ(s.pool_id, 0u);
      }
    EXPECT_TRUE(found);
  }
  bool cached = false;
  for (const SegmentSnapshot& s : memory_snapshot())
    if (s.address == reinterpret_cast<std::uintptr_t>(data)) cached = !s.allocated && s.requested_size == 0;
  EXPECT_TRUE(cached);
}

TEST(Memory, UsePoolRoutesThisThreadsAllocationsAndNests) {
  PoolHandle a = graph_pool_handle(), b = graph_pool_handle();
  Tensor in_a, in_b, after_b, outside;
  {
    UsePool use_a(a);
    in_a = empty({64}, f32);
    {
      UsePool use_b(b);
      in_b = empty({64}, f32);
    }
    after_b = empty({64}, f32);
  }
  outside = empty({64}, f32);
  auto pool_of = [](const Tensor& t) -> std::int64_t {
    for (const SegmentSnapshot& s : memory_snapshot())
      if (s.address == reinterpret_cast<std::uintptr_t>(t.data())) return static_cast<std::int64_t>(s.pool_id);
    return -1;
  };
  EXPECT_EQ(pool_of(in_a), static_cast<std::int64_t>(a.id()));
  EXPECT_EQ(pool_of(in_b), static_cast<std::int64_t>(b.id()));
  EXPECT_EQ(pool_of(after_b), static_cast<std::int64_t>(a.id()));
  EXPECT_EQ(pool_of(outside), 0);
  EXPECT_THROW(UsePool(PoolHandle{}), ArgumentError);
}
