// The KV block manager and its prefix cache (Note [Prefix cache] in src/llm/prefix_cache.hpp), by
// hand on blocks of 4 tokens: lookup follows the hash chain and compares tokens and parents;
// holders are counted; a cached block nobody holds is free, and evicted least recently released
// first (a prefix's tail before its head) only when no empty block is left, never while a sequence
// holds it; a child whose parent was evicted and published anew is never found; two copies of a
// prefix published side by side end as one.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "llm/kv_blocks.hpp"
#include "llm/prefix_cache.hpp"
#include "npugraph/error.hpp"

namespace {

namespace llm = npugraph::llm;
using Blocks = std::vector<std::int32_t>;

// `n` tokens counting up from `from`.
std::vector<std::int32_t> tokens(std::int32_t from, std::size_t n) {
  std::vector<std::int32_t> t(n);
  std::iota(t.begin(), t.end(), from);
  return t;
}

// A sequence of `t` reserved and published whole (every block of it final).
struct Seq {
  std::vector<std::int32_t> t;
  Blocks blocks;
  llm::PrefixChain chain;
};
Seq published(llm::BlockManager& m, std::vector<std::int32_t> t) {
  Seq s{.t = std::move(t)};
  EXPECT_TRUE(m.reserve(s.blocks, static_cast<std::int64_t>(s.t.size())));
  m.publish(s.blocks, s.t, static_cast<std::int64_t>(s.t.size()), s.chain);
  return s;
}

TEST(LlmKvBlocks, LookupFollowsTheChainOfFullBlocksAndComparesTheirTokens) {
  llm::BlockManager m(8, 4, /*prefix_cache=*/true);
  Seq a = published(m, tokens(100, 14));  // 3 full blocks and a half one
  EXPECT_EQ(a.chain.blocks, 3);
  const Blocks first3(a.blocks.begin(), a.blocks.begin() + 3);
  EXPECT_EQ(m.lookup(tokens(100, 14)), first3);
  EXPECT_EQ(m.lookup(tokens(100, 12)), first3);
  EXPECT_EQ(m.lookup(tokens(100, 11)), Blocks(a.blocks.begin(), a.blocks.begin() + 2));  // whole blocks only
  EXPECT_EQ(m.lookup(tokens(100, 40)), first3);  // the half block is not cached
  std::vector<std::int32_t> changed = tokens(100, 12);
  changed[5] = 7;  // the second block differs: the chain stops after the first
  EXPECT_EQ(m.lookup(changed), Blocks{a.blocks[0]});
  changed[0] = 7;  // and the first
  EXPECT_TRUE(m.lookup(changed).empty());
  // The same tokens at another place in the prompt are another prefix.
  std::vector<std::int32_t> shifted = tokens(0, 4);
  const std::vector<std::int32_t> rest = tokens(100, 8);
  shifted.insert(shifted.end(), rest.begin(), rest.end());
  EXPECT_TRUE(m.lookup(shifted).empty());
}

TEST(LlmKvBlocks, HoldersAreCountedAndACachedBlockNobodyHoldsIsFree) {
  llm::BlockManager m(8, 4, true);
  Seq a = published(m, tokens(0, 10));
  EXPECT_EQ(m.used_blocks(), 3);
  Blocks b;
  llm::PrefixChain chain;
  m.share(b, m.lookup(tokens(0, 10)), chain);
  ASSERT_EQ(b, Blocks(a.blocks.begin(), a.blocks.begin() + 2));
  EXPECT_EQ(chain.blocks, 2);
  EXPECT_EQ(m.holders(a.blocks[0]), 2);
  EXPECT_EQ(m.holders(a.blocks[2]), 1);  // the half block is a's own
  EXPECT_EQ(m.used_blocks(), 3);
  m.release(a.blocks);
  EXPECT_EQ(m.holders(b[0]), 1);
  EXPECT_EQ(m.used_blocks(), 2);
  EXPECT_EQ(m.cached_free_blocks(), 0);
  m.release(b);
  EXPECT_EQ(m.used_blocks(), 0);  // idle: nothing used ...
  EXPECT_EQ(m.cached_free_blocks(), 2);  // ... two blocks kept for a later prompt
  EXPECT_EQ(m.free_blocks(), 8);
  EXPECT_THROW(m.release(b = {0}), npugraph::StateError);  // a block nobody holds
}

TEST(LlmKvBlocks, EmptyBlocksGoFirstThenCachedOnesLeastRecentlyReleasedTailFirst) {
  llm::BlockManager m(6, 4, true);
  Seq a = published(m, tokens(0, 12));    // blocks 0 1 2
  Seq b = published(m, tokens(500, 8));  // blocks 3 4
  ASSERT_EQ(a.blocks, (Blocks{0, 1, 2}));
  ASSERT_EQ(b.blocks, (Blocks{3, 4}));
  m.release(a.blocks);  // a first: its blocks are the least recently released
  m.release(b.blocks);
  EXPECT_EQ(m.cached_free_blocks(), 5);
  Blocks c;
  ASSERT_TRUE(m.reserve(c, 4));
  EXPECT_EQ(c, Blocks{5});  // the empty block, while one is left
  EXPECT_EQ(m.lookup(tokens(0, 12)).size(), 3u);
  // Then a's tail, a's head, b's tail, b's head.
  for (const Blocks& want : {Blocks{5, 2}, Blocks{5, 2, 1}, Blocks{5, 2, 1, 0}, Blocks{5, 2, 1, 0, 4}}) {
    ASSERT_TRUE(m.reserve(c, 4 * static_cast<std::int64_t>(want.size())));
    EXPECT_EQ(c, want);
  }
  EXPECT_TRUE(m.lookup(tokens(0, 12)).empty());  // a's head was evicted: nothing of a is found
  EXPECT_EQ(m.lookup(tokens(500, 8)), Blocks{3});
  EXPECT_EQ(m.cached_free_blocks(), 1);
}

TEST(LlmKvBlocks, EvictionNeverTakesABlockASequenceHolds) {
  llm::BlockManager m(4, 4, true);
  Seq a = published(m, tokens(0, 8));  // blocks 0 1, held by a
  Blocks shared;
  llm::PrefixChain chain;
  Seq b = published(m, tokens(900, 8));  // blocks 2 3
  m.release(b.blocks);                   // cached, free
  m.share(shared, m.lookup(tokens(900, 4)), chain);  // block 2 held again
  ASSERT_EQ(shared, Blocks{2});
  Blocks c;
  ASSERT_TRUE(m.reserve(c, 4));  // the only block nobody holds
  EXPECT_EQ(c, Blocks{3});
  Blocks d;
  EXPECT_FALSE(m.reserve(d, 4));  // every block is held: none is evicted
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(m.lookup(tokens(0, 8)), a.blocks);
  EXPECT_EQ(m.holders(0), 1);
  EXPECT_EQ(m.holders(2), 1);
}

TEST(LlmKvBlocks, AChildWhoseParentWasEvictedIsNeverFoundEvenWhenTheParentIsPublishedAgain) {
  llm::BlockManager m(3, 4, true);
  Seq a = published(m, tokens(0, 8));  // parent 0, child 1
  Blocks child;
  llm::PrefixChain chain;
  m.release(a.blocks);
  m.share(child, Blocks{1}, chain);  // hold the child alone
  Blocks c;
  ASSERT_TRUE(m.reserve(c, 8));  // the empty block 2, then the parent (evicted)
  ASSERT_EQ(c, (Blocks{2, 0}));
  m.release(c);
  EXPECT_TRUE(m.lookup(tokens(0, 8)).empty());
  // The parent's tokens published anew, in another block: the old child does not follow it.
  Seq again = published(m, tokens(0, 4));
  EXPECT_EQ(m.lookup(tokens(0, 8)), again.blocks);
}

TEST(LlmKvBlocks, ThePrefixPublishedTwiceSideBySideEndsAsOneCopy) {
  llm::BlockManager m(8, 4, true);
  Seq a = published(m, tokens(0, 10));
  Seq b;
  b.t = tokens(0, 10);
  ASSERT_TRUE(m.reserve(b.blocks, 10));  // its own copy, prefilled before a published
  const std::int32_t b_tail = b.blocks[2];
  m.publish(b.blocks, b.t, 10, b.chain);
  EXPECT_EQ(b.blocks, (Blocks{a.blocks[0], a.blocks[1], b_tail}));  // a's blocks, b's half block
  EXPECT_EQ(m.holders(a.blocks[0]), 2);
  EXPECT_EQ(m.used_blocks(), 4);  // b's copies of the full blocks are free again
  m.release(a.blocks);
  m.release(b.blocks);
  EXPECT_EQ(m.cached_free_blocks(), 2);
}

TEST(LlmKvBlocks, WithoutTheCacheAReleasedBlockIsSimplyFree) {
  llm::BlockManager m(4, 4);
  Seq a = published(m, tokens(0, 8));
  EXPECT_TRUE(m.lookup(tokens(0, 8)).empty());
  m.release(a.blocks);
  EXPECT_EQ(m.free_blocks(), 4);
  EXPECT_EQ(m.cached_free_blocks(), 0);
}

TEST(LlmPrefixPolicy, HitsComeInStepsOfTheBlockAndChunkLcmAndLeaveTheLastTokenToCompute) {
  const llm::PrefixPolicy p{.block_size = 128, .prefill_chunk = 256};
  EXPECT_EQ(p.step(), 256);
  EXPECT_EQ(p.usable(3 * 128, 448), 256);   // 3 blocks found: the chunk grid allows 2
  EXPECT_EQ(p.usable(4 * 128, 512), 256);   // the whole prompt: its last token is computed
  EXPECT_EQ(p.usable(4 * 128, 513), 512);
  EXPECT_EQ(p.publishable(448, 448), 256);  // the last chunk [256, 448) is not full
  EXPECT_EQ(p.publishable(200, 600), 200);  // what is prefilled so far
  const llm::PrefixPolicy small{.block_size = 128, .prefill_chunk = 16};
  EXPECT_EQ(small.usable(3 * 128, 448), 384);
  EXPECT_EQ(small.publishable(448, 448), 448);
  EXPECT_EQ((llm::PrefixPolicy{.block_size = 128, .prefill_chunk = 100}.step()), 3200);
}

}  // namespace
