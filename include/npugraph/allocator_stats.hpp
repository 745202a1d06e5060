// The caching allocator's counters and segments in torch's terms (torch.cuda.memory_stats /
// memory_snapshot; npugraph.npu.memory_stats and memory_snapshot from Python).
//
// npugraph's allocator (memory.hpp) caches whole blocks keyed by (stream, rounded size) and never
// splits one: every block is its own segment (one system allocation), a live block is "active",
// and nothing is ever an inactive split. Blocks of under 1 MiB count as torch's small pool, the
// rest as its large pool. Counters cover every pool of the device, graph pools included.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "npugraph/device.hpp"

namespace npugraph {

// torch's four metrics of one statistic: its value now, its peak since the last
// reset_peak_memory_stats(), and its total increase and decrease since the last
// reset_accumulated_memory_stats().
struct StatCounter {
  std::int64_t current = 0, peak = 0, allocated = 0, freed = 0;
};

// Index into the arrays of AllocatorStats: every block, blocks of under 1 MiB, the others.
enum StatPool : int { kStatAll = 0, kStatSmallPool = 1, kStatLargePool = 2 };
inline constexpr std::size_t kSmallPoolLimit = std::size_t{1} << 20;

struct AllocatorStats {
  std::array<StatCounter, 3> allocation;       // live blocks (torch's "allocation" and "active")
  std::array<StatCounter, 3> allocated_bytes;  // their sizes, rounded ("allocated_bytes", "active_bytes")
  std::array<StatCounter, 3> requested_bytes;  // the sizes asked for
  std::array<StatCounter, 3> segment;          // system allocations held, cached ones included
  std::array<StatCounter, 3> reserved_bytes;   // their sizes
  std::int64_t num_alloc_retries = 0;     // allocations retried after freeing the cache
  std::int64_t num_ooms = 0;              // out-of-memory errors raised
  std::int64_t num_sync_all_streams = 0;  // empty_cache() calls (each synchronizes the device)
  std::int64_t num_device_alloc = 0;      // system allocations made
  std::int64_t num_device_free = 0;       // system allocations returned
};

AllocatorStats allocator_stats(Device device = Device::cpu());
// Zeroes every counter's `allocated` and `freed` and the num_* event counts.
void reset_accumulated_memory_stats(Device device = Device::cpu());

// One segment of memory_snapshot(): a system allocation and the one block it holds.
struct SegmentSnapshot {
  std::uintptr_t address = 0;
  std::size_t size = 0;            // the block's rounded size (= the segment's)
  std::size_t requested_size = 0;  // what the live tensor asked for; 0 for a cached block
  bool allocated = false;          // a live tensor's (else cached, free for reuse on its stream)
  std::uint64_t stream = 0;        // the stream it is cached under (Note [Stream-ordered reuse])
  std::uint64_t pool_id = 0;       // its pool (0: the device's default pool)
  bool private_pool = false;       // a graph's pool (graph_pool_handle())
};

// Every segment of the device's pools, in address order.
std::vector<SegmentSnapshot> memory_snapshot(Device device = Device::cpu());

}  // namespace npugraph
