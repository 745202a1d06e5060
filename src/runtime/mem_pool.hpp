// The caching host allocator's pools (see memory.hpp for the user-facing contract).
//
// Note [Stream-ordered reuse]
// A freed block is cached under the stream that was current when it was allocated and is reused
// only by allocations made while that same stream is current. Work already queued on the stream may
// still read the old tensor, but any later work that writes the new one runs after it in stream
// order, so reuse is safe without synchronising — the rule of CUDA's caching allocator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "npugraph/allocator_stats.hpp"
#include "npugraph/device.hpp"
#include "npugraph/memory.hpp"

namespace npugraph::detail {

class Backend;

class MemPool {
 public:
  MemPool(Device device, bool is_private);
  ~MemPool();
  MemPool(const MemPool&) = delete;
  MemPool& operator=(const MemPool&) = delete;

  void* allocate(std::size_t nbytes, std::uint64_t stream_id);
  void deallocate(void* p, std::size_t nbytes, std::uint64_t stream_id) noexcept;
  // Returns cached free blocks to the system.
  void release_cached() noexcept;
  MemoryStats stats() const;
  // Appends this pool's segments (live and cached blocks) to `out`.
  void snapshot(std::vector<SegmentSnapshot>& out) const;
  // Restarts this pool's peaks from its current values.
  void reset_peaks();
  std::uint64_t id() const { return id_; }
  bool is_private() const { return is_private_; }
  Device device() const { return device_; }

  static std::size_t round_size(std::size_t nbytes);

 private:
  struct Key {
    std::uint64_t stream;
    std::size_t size;
    friend bool operator==(const Key&, const Key&) = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept {
      return std::hash<std::uint64_t>()(k.stream * 0x9e3779b97f4a7c15ull ^ k.size);
    }
  };

  Device device_;
  bool is_private_;
  std::uint64_t id_;
  mutable std::mutex mu_;
  std::unordered_map<Key, std::vector<void*>, KeyHash> free_;
  struct Live {
    std::size_t size, requested;
    std::uint64_t stream;
  };
  std::unordered_map<void*, Live> live_;  // blocks handed out (memory_snapshot)
  Backend* backend_;  // where blocks come from
  std::size_t reserved_ = 0;
  std::size_t allocated_ = 0;
  std::size_t segments_ = 0;
  std::size_t peak_allocated_ = 0;
  std::size_t peak_reserved_ = 0;
};

// The device's default (non-graph) pool.
MemPool& default_pool(Device device);
// Totals over every pool, and the restart of their peaks.
MemoryStats memory_totals();
void reset_total_peaks();
// torch's counters (allocator_stats.hpp), kept by the pools; events counted by memory.cpp.
AllocatorStats allocator_totals();
void reset_accumulated_totals();
void note_alloc_retry() noexcept;
void note_oom() noexcept;
void note_sync_all_streams() noexcept;
std::vector<SegmentSnapshot> snapshot_all_pools(Device device);  // its pools, by address

}  // namespace npugraph::detail
