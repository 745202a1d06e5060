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
