// The paged KV cache's block manager: which cache blocks belong to which sequence, reference
// counted, and the prefix cache of full blocks keyed by their token prefix (Note [Prefix cache]
// in src/llm/prefix_cache.hpp says when the engine looks a prompt up and what it publishes).
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace npugraph::llm {

// Where a sequence's publishing stands: its first `blocks` full blocks are in the cache (or were
// found there), the last of them is `last` (-1: none yet), and `key` is the hash chain's value
// up to there.
struct PrefixChain {
  std::int64_t blocks = 0;
  std::uint64_t key = 0;
  std::int32_t last = -1;
  bool stopped = false;  // a hash collision with another prefix: nothing more is published
};

class BlockManager {
 public:
  // `prefix_cache`: keep full blocks published by sequences after they are released, for
  // lookup(); without it a released block is simply free again.
  BlockManager(std::int64_t num_blocks, std::int64_t block_size, bool prefix_cache = false);

  std::int64_t block_size() const { return block_size_; }
  std::int64_t num_blocks() const { return num_blocks_; }
  bool caching() const { return caching_; }
  // Blocks a reserve() can take: empty ones, and cached ones no sequence holds (evicted first
  // come, least recently released first).
  std::int64_t free_blocks() const { return static_cast<std::int64_t>(free_.size() + lru_.size()); }
  // Held by at least one sequence.
  std::int64_t used_blocks() const { return num_blocks_ - free_blocks(); }
  // In the cache and held by no sequence: free, but kept for a later lookup() until evicted.
  std::int64_t cached_free_blocks() const { return static_cast<std::int64_t>(lru_.size()); }
  // Blocks needed to hold `tokens` tokens.
  std::int64_t blocks_for(std::int64_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }
  // Sequences holding block `b` (0: free or cached only).
  std::int32_t holders(std::int32_t b) const { return ref_.at(static_cast<std::size_t>(b)); }
  bool cached(std::int32_t b) const { return cached_.at(static_cast<std::size_t>(b)) != 0; }

  // Grows `blocks` to hold `tokens` tokens, taking empty blocks first, then evicting the least
  // recently released cached ones; false (and `blocks` unchanged) when too few are free.
  bool reserve(std::vector<std::int32_t>& blocks, std::int64_t tokens);
  // Drops a sequence's hold on each of its blocks: one no sequence holds any more is free again
  // (lowest ids handed out first), or, when cached, joins the eviction order — a sequence's last
  // block first, so a prefix's tail is evicted before its head. Clears `blocks`.
  void release(std::vector<std::int32_t>& blocks);

  // The cached blocks holding the full blocks at the start of `tokens`, in order (the longest
  // prefix found: each block's key from its parent's and its tokens, then its tokens and its
  // parent compared, never the hash alone). Changes nothing.
  std::vector<std::int32_t> lookup(std::span<const std::int32_t> tokens) const;
  // Takes a hold on each of `chain` (from lookup(), unchanged since) and appends them to `blocks`,
  // which must be empty; `into` then stands after them.
  void share(std::vector<std::int32_t>& blocks, std::span<const std::int32_t> chain, PrefixChain& into);
  // Publishes the full blocks of a sequence holding `blocks` whose tokens [0, upto) are final
  // (upto rounded down to whole blocks): each not yet in the cache is added under its prefix's
  // key. Where another block already holds the same prefix (two sequences prefilled it side by
  // side), the sequence takes a hold on that one instead of its own copy (the same values:
  // Note [Prefix cache]), which is released. A cached block nobody holds under the same key but
  // another prefix (its parent evicted) leaves the cache for the new one.
  void publish(std::vector<std::int32_t>& blocks, std::span<const std::int32_t> tokens, std::int64_t upto,
               PrefixChain& chain);

 private:
  std::uint64_t key_of(std::uint64_t parent, std::span<const std::int32_t> tokens) const;
  bool holds(std::int32_t b, std::int32_t parent, std::span<const std::int32_t> tokens) const;
  std::int32_t take();  // an empty block, else the least recently released cached one (evicted)
  void evict(std::int32_t b);

  std::int64_t num_blocks_, block_size_;
  bool caching_;
  std::vector<std::int32_t> free_;  // empty, held by nobody: a stack, back() handed out next
  std::vector<std::int32_t> ref_;   // holders per block
  // The prefix cache (Note [Prefix cache]): per block whether it is cached, its key, its parent
  // block and that parent's epoch when it was published (a block's epoch changes whenever it is
  // published anew, so a parent evicted and reused for another prefix no longer matches), and
  // its tokens; the index from key to block; the cached blocks nobody holds, least recently
  // released first, and each one's place there.
  std::vector<std::uint8_t> cached_;
  std::vector<std::uint64_t> key_, epoch_, parent_epoch_;
  std::vector<std::int32_t> parent_, tokens_;
  std::uint64_t next_epoch_ = 1;
  std::unordered_map<std::uint64_t, std::int32_t> index_;
  std::list<std::int32_t> lru_;
  std::vector<std::list<std::int32_t>::iterator> lru_at_;
};

}  // namespace npugraph::llm
