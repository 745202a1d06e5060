// Routes the calling thread's allocations to a pool of its choosing (torch.cuda.use_mem_pool).
#pragma once

#include <memory>

#include "npugraph/memory.hpp"

namespace npugraph {

// While a UsePool lives, memory that npugraph allocates on this thread for `pool`'s device comes
// from `pool` (a PoolHandle from graph_pool_handle()) instead of the device's default pool — except
// while the thread's current stream captures, when the capture's pool is used as always. Scopes
// nest; each restores the previous choice. The pool's memory stays reserved while the pool lives
// (a graph, a PoolHandle or a live block refers to it).
class UsePool {
 public:
  explicit UsePool(const PoolHandle& pool);
  ~UsePool();
  UsePool(const UsePool&) = delete;
  UsePool& operator=(const UsePool&) = delete;

 private:
  std::shared_ptr<detail::MemPool> previous_;
};

}  // namespace npugraph
