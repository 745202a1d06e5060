#include "llm/prefix_cache.hpp"

#include <algorithm>
#include <numeric>
#include <span>

#include "npugraph/error.hpp"

namespace npugraph::llm {

std::int64_t PrefixPolicy::step() const { return std::lcm(block_size, prefill_chunk); }

std::int64_t PrefixPolicy::usable(std::int64_t found, std::int64_t total) const {
  const std::int64_t s = step();
  return std::min(found, total - 1) / s * s;  // the last prompt token is always computed
}

std::int64_t PrefixPolicy::publishable(std::int64_t cached, std::int64_t total) const {
  return std::min(cached, total / prefill_chunk * prefill_chunk);  // the full chunks done
}

std::int64_t take_cached_prefix(BlockManager& blocks, Sequence& seq, const PrefixPolicy& policy) {
  NG_CHECK_STATE(seq.blocks.empty() && seq.cached == 0, "prefix cache: a sequence holding ", seq.blocks.size(),
                 " blocks, ", seq.cached, " tokens cached, looked up again");
  const std::vector<std::int32_t> found = blocks.lookup(seq.tokens);
  const auto total = static_cast<std::int64_t>(seq.tokens.size());
  const std::int64_t hit = policy.usable(static_cast<std::int64_t>(found.size()) * policy.block_size, total);
  if (hit == 0) return 0;
  blocks.share(seq.blocks, std::span(found).first(static_cast<std::size_t>(hit / policy.block_size)), seq.prefix);
  seq.cached = hit;
  return hit;
}

void publish_prefix(BlockManager& blocks, Sequence& seq, std::int64_t prompt, const PrefixPolicy& policy) {
  blocks.publish(seq.blocks, seq.tokens, policy.publishable(seq.cached, prompt), seq.prefix);
}

}  // namespace npugraph::llm
