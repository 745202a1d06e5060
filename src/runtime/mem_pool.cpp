#include "runtime/mem_pool.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "npugraph/error.hpp"
#include "runtime/backend.hpp"

namespace npugraph::detail {
namespace {

struct Totals {
  std::atomic<std::size_t> reserved{0}, allocated{0}, segments{0}, pools{0};
  std::atomic<std::size_t> peak_allocated{0}, peak_reserved{0};
  std::atomic<std::uint64_t> next_id{1};  // 0 names the default pools in memory_snapshot()
};
Totals& totals() {
  static Totals t;
  return t;
}

void raise_peak(std::atomic<std::size_t>& peak, std::size_t value) {
  std::size_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

// Adds `size` to a total and raises its peak (the totals are shared by every pool).
void add_total(std::atomic<std::size_t>& total, std::atomic<std::size_t>& peak, std::size_t size) {
  raise_peak(peak, total.fetch_add(size) + size);
}

// torch's counters (allocator_stats.hpp) over every pool: one mutex, taken after a pool's.
struct TorchStats {
  std::mutex mu;
  AllocatorStats s;
};
TorchStats& torch_stats() {
  static auto* t = new TorchStats;  // leaked: blocks may be freed during static destruction
  return *t;
}

void stat_up(StatCounter& c, std::int64_t n) {
  c.current += n;
  c.allocated += n;
  c.peak = std::max(c.peak, c.current);
}
void stat_down(StatCounter& c, std::int64_t n) {
  c.current -= n;
  c.freed += n;
}
// Applies `op` to the "all" counter and to the one of the block's pool type.
template <class Op>
void both(std::array<StatCounter, 3>& counters, std::size_t block_size, std::int64_t n, Op op) {
  op(counters[kStatAll], n);
  op(counters[block_size < kSmallPoolLimit ? kStatSmallPool : kStatLargePool], n);
}

void count_block(std::size_t size, std::size_t requested, bool up) noexcept {
  auto& t = torch_stats();
  std::lock_guard lock(t.mu);
  auto op = up ? &stat_up : &stat_down;
  both(t.s.allocation, size, 1, op);
  both(t.s.allocated_bytes, size, static_cast<std::int64_t>(size), op);
  both(t.s.requested_bytes, size, static_cast<std::int64_t>(requested), op);
}

void count_segments(std::size_t size, std::int64_t n, bool up) noexcept {
  auto& t = torch_stats();
  std::lock_guard lock(t.mu);
  auto op = up ? &stat_up : &stat_down;
  both(t.s.segment, size, n, op);
  both(t.s.reserved_bytes, size, static_cast<std::int64_t>(size) * n, op);
  (up ? t.s.num_device_alloc : t.s.num_device_free) += n;
}

// Every live pool, for memory_snapshot(): registered by the constructor, removed by the destructor.
struct PoolRegistry {
  std::mutex mu;
  std::vector<const MemPool*> pools;
};
PoolRegistry& registry() {
  static auto* r = new PoolRegistry;
  return *r;
}

}  // namespace

MemPool::MemPool(Device device, bool is_private)
    : device_(device), is_private_(is_private), id_(totals().next_id.fetch_add(1)),
      backend_(&backend_for(device)) {
  totals().pools.fetch_add(1);
  std::lock_guard lock(registry().mu);
  registry().pools.push_back(this);
}

MemPool::~MemPool() {
  {
    std::lock_guard lock(registry().mu);
    auto& v = registry().pools;
    v.erase(std::remove(v.begin(), v.end(), this), v.end());
  }
  release_cached();
  totals().pools.fetch_sub(1);
}

std::size_t MemPool::round_size(std::size_t nbytes) {
  constexpr std::size_t kSmall = 512, kLarge = 64 * 1024, kLargeFrom = 1 << 20;
  if (nbytes == 0) return kSmall;
  const std::size_t unit = nbytes < kLargeFrom ? kSmall : kLarge;
  return (nbytes + unit - 1) / unit * unit;
}

void* MemPool::allocate(std::size_t nbytes, std::uint64_t stream_id) {
  const std::size_t size = round_size(nbytes);
  {
    std::lock_guard lock(mu_);
    auto it = free_.find(Key{stream_id, size});
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      live_.emplace(p, Live{size, nbytes, stream_id});  // may throw: before anything changes
      it->second.pop_back();
      allocated_ += size;
      peak_allocated_ = std::max(peak_allocated_, allocated_);
      add_total(totals().allocated, totals().peak_allocated, size);
      count_block(size, nbytes, true);
      return p;
    }
  }
  void* p = backend_->allocate(size);
  // "would exceed allowed memory" is the text torch_npu's tests match (its asynchronous allocator's).
  NG_CHECK_AS(ResourceError, p != nullptr, "out of memory: allocating ", nbytes, " bytes on ",
              device_.str(), " would exceed allowed memory: the system refused it (", reserved_,
              " bytes reserved by this pool)");
  std::lock_guard lock(mu_);
  try {
    live_.emplace(p, Live{size, nbytes, stream_id});
  } catch (...) {
    backend_->deallocate(p, size);
    throw;
  }
  reserved_ += size;
  allocated_ += size;
  ++segments_;
  count_segments(size, 1, true);
  count_block(size, nbytes, true);
  peak_allocated_ = std::max(peak_allocated_, allocated_);
  peak_reserved_ = std::max(peak_reserved_, reserved_);
  add_total(totals().reserved, totals().peak_reserved, size);
  add_total(totals().allocated, totals().peak_allocated, size);
  totals().segments += 1;
  return p;
}

void MemPool::deallocate(void* p, std::size_t nbytes, std::uint64_t stream_id) noexcept {
  const std::size_t size = round_size(nbytes);
  std::lock_guard lock(mu_);
  live_.erase(p);
  allocated_ -= size;
  totals().allocated -= size;
  count_block(size, nbytes, false);
  try {
    free_[Key{stream_id, size}].push_back(p);
  } catch (...) {  // cannot cache it: give it back
    backend_->deallocate(p, size);
    reserved_ -= size;
    --segments_;
    totals().reserved -= size;
    totals().segments -= 1;
    count_segments(size, 1, false);
  }
}

void MemPool::release_cached() noexcept {
  std::lock_guard lock(mu_);
  for (auto& [key, blocks] : free_) {
    for (void* p : blocks) backend_->deallocate(p, key.size);
    reserved_ -= key.size * blocks.size();
    segments_ -= blocks.size();
    totals().reserved -= key.size * blocks.size();
    totals().segments -= blocks.size();
    count_segments(key.size, static_cast<std::int64_t>(blocks.size()), false);
  }
  free_.clear();
}

void MemPool::snapshot(std::vector<SegmentSnapshot>& out) const {
  std::lock_guard lock(mu_);
  const std::uint64_t pool = is_private_ ? id_ : 0;
  for (const auto& [p, live] : live_)
    out.push_back({reinterpret_cast<std::uintptr_t>(p), live.size, live.requested, true, live.stream,
                   pool, is_private_});
  for (const auto& [key, blocks] : free_)
    for (void* p : blocks)
      out.push_back({reinterpret_cast<std::uintptr_t>(p), key.size, 0, false, key.stream, pool, is_private_});
}

MemoryStats MemPool::stats() const {
  std::lock_guard lock(mu_);
  return {reserved_, allocated_, segments_, 1, peak_allocated_, peak_reserved_};
}

void MemPool::reset_peaks() {
  std::lock_guard lock(mu_);
  peak_allocated_ = allocated_;
  peak_reserved_ = reserved_;
}

MemoryStats memory_totals() {
  auto& t = totals();
  return {t.reserved.load(), t.allocated.load(), t.segments.load(), t.pools.load(),
          t.peak_allocated.load(), t.peak_reserved.load()};
}

void reset_total_peaks() {
  auto& t = totals();
  t.peak_allocated.store(t.allocated.load());
  t.peak_reserved.store(t.reserved.load());
  auto& ts = torch_stats();
  std::lock_guard lock(ts.mu);
  for (auto* counters : {&ts.s.allocation, &ts.s.allocated_bytes, &ts.s.requested_bytes, &ts.s.segment,
                         &ts.s.reserved_bytes})
    for (StatCounter& c : *counters) c.peak = c.current;
}

AllocatorStats allocator_totals() {
  auto& ts = torch_stats();
  std::lock_guard lock(ts.mu);
  return ts.s;
}

void reset_accumulated_totals() {
  auto& ts = torch_stats();
  std::lock_guard lock(ts.mu);
  for (auto* counters : {&ts.s.allocation, &ts.s.allocated_bytes, &ts.s.requested_bytes, &ts.s.segment,
                         &ts.s.reserved_bytes})
    for (StatCounter& c : *counters) c.allocated = c.freed = 0;
  ts.s.num_alloc_retries = ts.s.num_ooms = ts.s.num_sync_all_streams = 0;
  ts.s.num_device_alloc = ts.s.num_device_free = 0;
}

void note_alloc_retry() noexcept {
  auto& ts = torch_stats();
  std::lock_guard lock(ts.mu);
  ++ts.s.num_alloc_retries;
}

void note_oom() noexcept {
  auto& ts = torch_stats();
  std::lock_guard lock(ts.mu);
  ++ts.s.num_ooms;
}

void note_sync_all_streams() noexcept {
  auto& ts = torch_stats();
  std::lock_guard lock(ts.mu);
  ++ts.s.num_sync_all_streams;
}

std::vector<SegmentSnapshot> snapshot_all_pools(Device device) {
  std::vector<SegmentSnapshot> out;
  {
    std::lock_guard lock(registry().mu);
    for (const MemPool* pool : registry().pools)
      if (pool->device() == device) pool->snapshot(out);
  }
  std::sort(out.begin(), out.end(),
            [](const SegmentSnapshot& a, const SegmentSnapshot& b) { return a.address < b.address; });
  return out;
}

}  // namespace npugraph::detail
