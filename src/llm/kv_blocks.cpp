#include "llm/kv_blocks.hpp"

#include <algorithm>

#include "npugraph/error.hpp"

namespace npugraph::llm {

BlockManager::BlockManager(std::int64_t num_blocks, std::int64_t block_size, bool prefix_cache)
    : num_blocks_(num_blocks), block_size_(block_size), caching_(prefix_cache) {
  NG_CHECK_ARG(num_blocks > 0 && num_blocks <= (std::int64_t{1} << 31) - 1, "KV cache: num_blocks = ",
               num_blocks, ": must be in [1, 2^31)");
  NG_CHECK_ARG(block_size > 0, "KV cache: block_size = ", block_size, ": must be positive");
  const auto n = static_cast<std::size_t>(num_blocks);
  free_.reserve(n);
  for (std::int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<std::int32_t>(b));
  ref_.assign(n, 0);
  if (!caching_) return;
  cached_.assign(n, 0);
  key_.assign(n, 0);
  epoch_.assign(n, 0);
  parent_epoch_.assign(n, 0);
  parent_.assign(n, -1);
  tokens_.assign(n * static_cast<std::size_t>(block_size), 0);
  lru_at_.resize(n);
}

std::int32_t BlockManager::take() {
  std::int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    b = lru_.front();
    evict(b);
    free_.pop_back();  // evict() put it there
  }
  ref_[static_cast<std::size_t>(b)] = 1;
  return b;
}

// Out of the cache and into the free stack (a cached block nobody holds).
void BlockManager::evict(std::int32_t b) {
  const auto i = static_cast<std::size_t>(b);
  lru_.erase(lru_at_[i]);
  index_.erase(key_[i]);
  cached_[i] = 0;
  free_.push_back(b);
}

bool BlockManager::reserve(std::vector<std::int32_t>& blocks, std::int64_t tokens) {
  const std::int64_t need = blocks_for(tokens) - static_cast<std::int64_t>(blocks.size());
  if (need <= 0) return true;
  if (need > free_blocks()) return false;
  for (std::int64_t i = 0; i < need; ++i) blocks.push_back(take());
  return true;
}

void BlockManager::release(std::vector<std::int32_t>& blocks) {
  bool freed = false;
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {  // the tail first (evicted first)
    const auto i = static_cast<std::size_t>(*it);
    NG_CHECK_STATE(ref_[i] > 0, "KV cache: block ", *it, " released by a sequence that does not hold it");
    if (--ref_[i] > 0) continue;
    if (caching_ && cached_[i]) {
      lru_at_[i] = lru_.insert(lru_.end(), *it);
    } else {
      free_.push_back(*it);
      freed = true;
    }
  }
  if (freed) std::sort(free_.begin(), free_.end(), std::greater<>());
  blocks.clear();
}

// FNV-1a over the parent's key and the tokens' bytes, then splitmix64's finaliser. A collision
// costs a miss, never a wrong block: lookup() and publish() compare the tokens and the parent.
std::uint64_t BlockManager::key_of(std::uint64_t parent, std::span<const std::int32_t> tokens) const {
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](std::uint64_t v) {
    for (int byte = 0; byte < 8; ++byte, v >>= 8) h = (h ^ (v & 0xff)) * 0x100000001b3ull;
  };
  mix(parent);
  for (const std::int32_t t : tokens) mix(static_cast<std::uint32_t>(t));
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

bool BlockManager::holds(std::int32_t b, std::int32_t parent, std::span<const std::int32_t> tokens) const {
  const auto i = static_cast<std::size_t>(b);
  if (!cached_[i] || parent_[i] != parent) return false;
  if (parent >= 0 && parent_epoch_[i] != epoch_[static_cast<std::size_t>(parent)]) return false;
  return std::equal(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(i * block_size_));
}

std::vector<std::int32_t> BlockManager::lookup(std::span<const std::int32_t> tokens) const {
  std::vector<std::int32_t> chain;
  if (!caching_) return chain;
  std::uint64_t key = 0;
  std::int32_t parent = -1;
  const auto bs = static_cast<std::size_t>(block_size_);
  for (std::size_t at = 0; at + bs <= tokens.size(); at += bs) {
    const auto part = tokens.subspan(at, bs);
    key = key_of(key, part);
    const auto it = index_.find(key);
    if (it == index_.end() || !holds(it->second, parent, part)) break;
    parent = it->second;
    chain.push_back(parent);
  }
  return chain;
}

void BlockManager::share(std::vector<std::int32_t>& blocks, std::span<const std::int32_t> chain, PrefixChain& into) {
  NG_CHECK_STATE(blocks.empty(), "KV cache: share() into a sequence already holding ", blocks.size(), " blocks");
  for (const std::int32_t b : chain) {
    const auto i = static_cast<std::size_t>(b);
    NG_CHECK_STATE(caching_ && cached_[i], "KV cache: share() of block ", b, ", which is not cached");
    if (ref_[i]++ == 0) lru_.erase(lru_at_[i]);
    blocks.push_back(b);
    into.key = key_[i];
    into.last = b;
  }
  into.blocks = static_cast<std::int64_t>(chain.size());
}

void BlockManager::publish(std::vector<std::int32_t>& blocks, std::span<const std::int32_t> tokens, std::int64_t upto,
                           PrefixChain& chain) {
  if (!caching_) return;
  const std::int64_t full = std::min<std::int64_t>(upto / block_size_, static_cast<std::int64_t>(blocks.size()));
  for (; chain.blocks < full && !chain.stopped; ++chain.blocks) {
    const auto at = static_cast<std::size_t>(chain.blocks);
    const auto part = tokens.subspan(at * static_cast<std::size_t>(block_size_), static_cast<std::size_t>(block_size_));
    const std::uint64_t key = key_of(chain.key, part);
    std::int32_t& own = blocks[at];
    if (const auto it = index_.find(key); it != index_.end() && it->second != own) {
      const std::int32_t other = it->second;
      const auto o = static_cast<std::size_t>(other);
      if (holds(other, chain.last, part)) {  // the same prefix: hold that block instead of ours
        if (ref_[o]++ == 0) lru_.erase(lru_at_[o]);
        std::vector<std::int32_t> mine{own};
        own = other;
        release(mine);
        chain.key = key;
        chain.last = other;
        continue;
      }
      if (ref_[o] > 0) {  // another prefix under this key, in use: publish no further
        chain.stopped = true;
        break;
      }
      evict(other);  // stale (its parent gone) or another prefix nobody holds
      std::sort(free_.begin(), free_.end(), std::greater<>());
    }
    const auto i = static_cast<std::size_t>(own);
    if (!cached_[i]) {
      cached_[i] = 1;
      key_[i] = key;
      parent_[i] = chain.last;
      parent_epoch_[i] = chain.last >= 0 ? epoch_[static_cast<std::size_t>(chain.last)] : 0;
      epoch_[i] = next_epoch_++;
      std::copy(part.begin(), part.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(i * block_size_));
      index_[key] = own;
    }
    chain.key = key;
    chain.last = own;
  }
}

}  // namespace npugraph::llm
