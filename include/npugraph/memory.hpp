// Memory: a caching allocator per device, graph-private pools, statistics.
//
// Memory allocated while the calling thread's current stream is capturing comes from the capture's
// private pool (docs/semantics.md §3); it stays reserved while the pool lives, so replays may keep writing it
// after the tensors that named it are gone. A pool lives while a graph, a PoolHandle or a live block
// still refers to it; then its memory goes back to the system.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "npugraph/device.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph {

namespace detail { class MemPool; }

struct MemoryStats {
  std::size_t reserved_bytes = 0;   // obtained from the system and not yet returned
  std::size_t allocated_bytes = 0;  // handed out to live tensors
  std::size_t segments = 0;         // system allocations held
  std::size_t pools = 0;            // live pools (the default pool included)
  std::size_t peak_allocated_bytes = 0;  // highest allocated_bytes since the last reset_peak_memory_stats
  std::size_t peak_reserved_bytes = 0;   // highest reserved_bytes since then
};

// Shares one private pool between graphs captured one after another (graph_pool_handle()).
class PoolHandle {
 public:
  PoolHandle() = default;
  explicit PoolHandle(std::shared_ptr<detail::MemPool> pool) : pool_(std::move(pool)) {}
  bool defined() const { return pool_ != nullptr; }
  std::uint64_t id() const;
  MemoryStats stats() const;
  const std::shared_ptr<detail::MemPool>& impl() const { return pool_; }
  friend bool operator==(const PoolHandle& a, const PoolHandle& b) { return a.pool_ == b.pool_; }

 private:
  std::shared_ptr<detail::MemPool> pool_;
};

// Uninitialised memory from the caching allocator (from the capture's private pool while the
// current stream captures). `device` defaults to the cpu.
Tensor empty(Shape shape, DType dtype, Device device = Device::cpu());

PoolHandle graph_pool_handle(Device device = Device::cpu());
// Totals over every pool of the device.
MemoryStats memory_stats(Device device = Device::cpu());
// Restarts the peaks of memory_stats() and of the default pool from the current values (a graph
// pool's peaks, in its PoolHandle::stats(), run from its creation).
void reset_peak_memory_stats(Device device = Device::cpu());
// Returns the default pool's cached free blocks to the system. A synchronizing call (§3.3 modes).
void empty_cache(Device device = Device::cpu());

}  // namespace npugraph
