#include "runtime/mem_pool.hpp"

#include <algorithm>
#include <atomic>

#include "npugraph/error.hpp"
#include "runtime/backend.hpp"

namespace npugraph::detail {
namespace {

struct Totals {
  std::atomic<std::size_t> reserved{0}, allocated{0}, segments{0}, pools{0};
  std::atomic<std::size_t> peak_allocated{0}, peak_reserved{0};
  std::atomic<std::uint64_t> next_id{0};
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

}  // namespace

MemPool::MemPool(Device device, bool is_private)
    : device_(device), is_private_(is_private), id_(totals().next_id.fetch_add(1)),
      backend_(&backend_for(device)) {
  totals().pools.fetch_add(1);
}

MemPool::~MemPool() {
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
      it->second.pop_back();
      allocated_ += size;
      peak_allocated_ = std::max(peak_allocated_, allocated_);
      add_total(totals().allocated, totals().peak_allocated, size);
      return p;
    }
  }
  void* p = backend_->allocate(size);
  // "would exceed allowed memory" is the text torch_npu's tests match (its asynchronous allocator's).
  NG_CHECK_AS(ResourceError, p != nullptr, "out of memory: allocating ", nbytes, " bytes on ",
              device_.str(), " would exceed allowed memory: the system refused it (", reserved_,
              " bytes reserved by this pool)");
  std::lock_guard lock(mu_);
  reserved_ += size;
  allocated_ += size;
  ++segments_;
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
  allocated_ -= size;
  totals().allocated -= size;
  try {
    free_[Key{stream_id, size}].push_back(p);
  } catch (...) {  // cannot cache it: give it back
    backend_->deallocate(p, size);
    reserved_ -= size;
    --segments_;
    totals().reserved -= size;
    totals().segments -= 1;
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
  }
  free_.clear();
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
}

}  // namespace npugraph::detail
