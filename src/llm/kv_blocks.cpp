#include "llm/kv_blocks.hpp"

#include <algorithm>

#include "npugraph/error.hpp"

namespace npugraph::llm {

BlockManager::BlockManager(std::int64_t num_blocks, std::int64_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {
  NG_CHECK_ARG(num_blocks > 0 && num_blocks <= (std::int64_t{1} << 31) - 1, "KV cache: num_blocks = ",
               num_blocks, ": must be in [1, 2^31)");
  NG_CHECK_ARG(block_size > 0, "KV cache: block_size = ", block_size, ": must be positive");
  free_.reserve(static_cast<std::size_t>(num_blocks));
  for (std::int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<std::int32_t>(b));
}

bool BlockManager::reserve(std::vector<std::int32_t>& blocks, std::int64_t tokens) {
  const std::int64_t need = blocks_for(tokens) - static_cast<std::int64_t>(blocks.size());
  if (need <= 0) return true;
  if (need > free_blocks()) return false;
  for (std::int64_t i = 0; i < need; ++i) {
    blocks.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void BlockManager::release(std::vector<std::int32_t>& blocks) {
  std::sort(blocks.begin(), blocks.end(), std::greater<>());
  free_.insert(free_.end(), blocks.begin(), blocks.end());
  std::sort(free_.begin(), free_.end(), std::greater<>());
  blocks.clear();
}

}  // namespace npugraph::llm
