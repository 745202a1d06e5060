// The paged KV cache's block manager: which cache blocks belong to which sequence.
#pragma once

#include <cstdint>
#include <vector>

namespace npugraph::llm {

class BlockManager {
 public:
  BlockManager(std::int64_t num_blocks, std::int64_t block_size);

  std::int64_t block_size() const { return block_size_; }
  std::int64_t num_blocks() const { return num_blocks_; }
  std::int64_t free_blocks() const { return static_cast<std::int64_t>(free_.size()); }
  // Blocks needed to hold `tokens` tokens.
  std::int64_t blocks_for(std::int64_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }

  // Grows `blocks` to hold `tokens` tokens; false (and `blocks` unchanged) when too few are free.
  bool reserve(std::vector<std::int32_t>& blocks, std::int64_t tokens);
  // Returns a sequence's blocks (lowest ids are handed out first again).
  void release(std::vector<std::int32_t>& blocks);

 private:
  std::int64_t num_blocks_, block_size_;
  std::vector<std::int32_t> free_;  // a stack: back() is the next block handed out
};

}  // namespace npugraph::llm
