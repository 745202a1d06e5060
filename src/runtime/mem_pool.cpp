#include "core/mem_pool.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

#include <sys/mman.h>

#include "npugraph/error.hpp"

namespace npugraph::detail {
namespace {

constexpr std::size_t kAlignment = 64;

struct Totals {
  std::atomic<std::size_t> reserved{0}, allocated{0}, segments{0}, pools{0};
  std::atomic<std::uint64_t> next_id{0};
};
Totals& totals() {
  static Totals t;
  return t;
}

}  // namespace

MemPool::MemPool(Device device, bool is_private)
    : device_(device), is_private_(is_private), id_(totals().next_id.fetch_add(1)) {
  NG_CHECK_AS(UnsupportedError, device.is_cpu(), "memory pool: device = ", device.str(),
              ": this build has no backend for it (only cpu)");
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

namespace {

// Blocks of 2 MiB and more are 2 MiB-aligned and asked to be backed by transparent huge pages:
// attention streams KV caches of tens of MiB, and with 4 KiB pages every page boundary costs a TLB
// miss and stops the hardware prefetchers (the kernel may still decline; nothing depends on it).
constexpr std::size_t kHugePage = std::size_t{2} << 20;

void* allocate_block(std::size_t size) {
  if (size < kHugePage) return std::aligned_alloc(kAlignment, size);
  void* p = nullptr;
  if (posix_memalign(&p, kHugePage, size) != 0) return nullptr;
#ifdef MADV_HUGEPAGE
  madvise(p, size / kHugePage * kHugePage, MADV_HUGEPAGE);  // whole huge pages only
#endif
  return p;
}

}  // namespace

void* MemPool::allocate(std::size_t nbytes, std::uint64_t stream_id) {
  const std::size_t size = round_size(nbytes);
  {
    std::lock_guard lock(mu_);
    auto it = free_.find(Key{stream_id, size});
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      allocated_ += size;
      totals().allocated += size;
      return p;
    }
  }
  void* p = allocate_block(size);
  NG_CHECK_AS(ResourceError, p != nullptr, "out of memory: allocating ", nbytes, " bytes on ",
              device_.str(), " failed (", reserved_, " bytes reserved by this pool)");
  std::lock_guard lock(mu_);
  reserved_ += size;
  allocated_ += size;
  ++segments_;
  totals().reserved += size;
  totals().allocated += size;
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
    std::free(p);
    reserved_ -= size;
    --segments_;
    totals().reserved -= size;
    totals().segments -= 1;
  }
}

void MemPool::release_cached() noexcept {
  std::lock_guard lock(mu_);
  for (auto& [key, blocks] : free_) {
    for (void* p : blocks) std::free(p);
    reserved_ -= key.size * blocks.size();
    segments_ -= blocks.size();
    totals().reserved -= key.size * blocks.size();
    totals().segments -= blocks.size();
  }
  free_.clear();
}

MemoryStats MemPool::stats() const {
  std::lock_guard lock(mu_);
  return {reserved_, allocated_, segments_, 1};
}

MemPool& default_pool(Device device) {
  NG_CHECK_AS(UnsupportedError, device.is_cpu(), "device = ", device.str(),
              ": this build has no backend for it (only cpu)");
  // Leaked on purpose: tensors may be destroyed during static destruction.
  static MemPool* pool = new MemPool(Device::cpu(), false);
  return *pool;
}

}  // namespace npugraph::detail

namespace npugraph {

std::uint64_t PoolHandle::id() const {
  NG_CHECK_ARG(pool_ != nullptr, "pool handle: undefined (create one with graph_pool_handle())");
  return pool_->id();
}

MemoryStats PoolHandle::stats() const {
  NG_CHECK_ARG(pool_ != nullptr, "pool handle: undefined (create one with graph_pool_handle())");
  return pool_->stats();
}

PoolHandle graph_pool_handle(Device device) {
  return PoolHandle(std::make_shared<detail::MemPool>(device, true));
}

MemoryStats memory_stats(Device device) {
  NG_CHECK_AS(UnsupportedError, device.is_cpu(), "device = ", device.str(),
              ": this build has no backend for it (only cpu)");
  auto& t = detail::totals();
  return {t.reserved.load(), t.allocated.load(), t.segments.load(), t.pools.load()};
}

}  // namespace npugraph
