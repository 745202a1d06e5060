// The engine's prefix cache: which of a prompt's tokens it takes from cached KV blocks, and which
// blocks a sequence publishes for later ones (the blocks themselves: BlockManager in kv_blocks.hpp).
//
// Note [Prefix cache]
// EngineOptions::prefix_cache. A full KV block is keyed by a hash chain — its parent block's key
// and its own tokens — and kept in an index after its sequence ends; a later prompt whose first
// blocks have the same tokens takes a hold on those blocks (reference counts) and prefills only
// the rest. A cached block that no sequence holds is free: it counts as free in EngineLoad (apart,
// as kv_blocks_cached), and reserve() evicts such blocks, least recently released first (a
// sequence's tail before its head), only when no empty block is left; a block a sequence holds is
// never evicted. A hit is checked against the stored tokens and the parent block (and the
// parent's epoch, which changes when a block is published anew), never trusted to the hash.
// What it guarantees: a request served from cached blocks gets bitwise the logits, tokens and
// logprobs it gets with the cache off (graph and eager alike; Note [Batch invariance] then holds
// as before). That fixes what may be cached and what may be taken:
//   - A block's KV is the same bits wherever it is computed only if the same operations computed
//     it: a prefill chunk is [k * prefill_chunk, (k + 1) * prefill_chunk) of the prompt, cut short
//     at the prompt's end, and a chunk's row count picks its kernels (up to 16 rows: the q8 GEMV;
//     FIA's paths depend on the query length). So a sequence publishes only the blocks wholly
//     inside its prompt's *full* chunks — tokens [0, floor(prompt / prefill_chunk) *
//     prefill_chunk) — as those chunks are done: any prompt longer than such a chunk's end
//     computes exactly that chunk, with the same shapes, on the same earlier KV.
//   - Blocks that decode steps wrote (a reply) are not published: decode computes a token's K and
//     V with other kernels (one row per request) than a prompt's prefill does, so the next chat
//     turn, whose prompt holds that reply, would get other bits than cold. Nor are the blocks of a
//     prompt's last, partial chunk. (vLLM and SGLang cache both, trading bitwise results for hits.)
//   - A hit is taken in steps of lcm(block_size, prefill_chunk) tokens, so that the chunks after
//     it are the cold prompt's own chunks, and stops before the prompt's last token, whose logits
//     give the first token. (The defaults, 128 and 256: steps of 256 tokens. A prefill_chunk
//     whose lcm with block_size exceeds max_context never hits.)
//   - A request asking for prompt logprobs needs every prompt row's logits: it looks nothing up
//     (and counts no query), but publishes its blocks.
// Two sequences that prefill the same prefix side by side each compute it; the second to publish
// a block finds the first's in the index and holds that one instead of its own copy (the same
// bits, by the above), so a shared prefix takes its blocks once.
// Sliding-window layers (Note [Sliding window]) read a cached block as any other: a sequence keeps
// every block of its context, the window is a view of them, so a hit serves windowed and global
// layers alike, with the same bits.
// The cache is the stepping thread's: step() looks prompts up as it admits them and publishes
// after each prefill chunk; EngineLoad carries the gauges and the counts (prefix_cache_queries:
// prompt tokens looked up; prefix_cache_hits: of them, taken from the cache — vLLM's names).
// Measured (bench/README.md, Note [Prefix cache TTFT]): a chat's second turn over a ~1,000-token
// history on SmolLM2 starts in 0.09 of the first turn's time when the first prompt ends just past
// a chunk boundary, 0.31 when it ends just short of one (the default chunk of 256), 0.19 with
// prefill_chunk 128. Caching the blocks of a partial chunk, or hits inside a chunk, would need the
// prefill kernels shown to compute a row the same whatever the chunk's other rows (the GEMM does,
// Note [Linear kernels]; FIA's prefill units are anchored at the chunk's end) and chunks of the same
// kernel class (more than 16 rows) on both sides; not done.
// Tested: tests/llm/test_kv_blocks.cpp (the block manager), test_engine_prefix_cache.cpp (hits by
// hand, bitwise against cold in graph and eager mode, sliding window, prompt logprobs, SmolLM2,
// cancellation, eviction under pressure).
#pragma once

#include <cstdint>

#include "llm/kv_blocks.hpp"
#include "llm/runner.hpp"

namespace npugraph::llm {

struct PrefixPolicy {
  std::int64_t block_size = 0, prefill_chunk = 0;
  // A hit is a multiple of this.
  std::int64_t step() const;
  // The tokens a prompt of `total` may take of `found` cached ones.
  std::int64_t usable(std::int64_t found, std::int64_t total) const;
  // The tokens whose KV a sequence prefilled to `cached` of a prompt of `total` may publish.
  std::int64_t publishable(std::int64_t cached, std::int64_t total) const;
};

// At admission: takes the longest usable cached prefix of `seq`'s prompt (seq.cached then stands
// after it) and returns its tokens. `seq` must hold no blocks and have prefilled nothing.
std::int64_t take_cached_prefix(BlockManager& blocks, Sequence& seq, const PrefixPolicy& policy);
// After a prefill chunk: publishes what `seq` may (its prompt being `prompt` tokens long).
void publish_prefix(BlockManager& blocks, Sequence& seq, std::int64_t prompt, const PrefixPolicy& policy);

}  // namespace npugraph::llm
