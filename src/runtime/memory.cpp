// Allocation: which pool a new tensor's memory comes from, and the memory API (memory.hpp).
#include "npugraph/memory.hpp"

#include "npugraph/allocator_stats.hpp"
#include "npugraph/use_pool.hpp"

#include <mutex>
#include <utility>
#include <vector>

#include "npugraph/error.hpp"
#include "npugraph/stream.hpp"
#include "npugraph/tensor.hpp"
#include "runtime/backend.hpp"
#include "runtime/mem_pool.hpp"
#include "runtime/stream_state.hpp"

namespace npugraph::detail {

void check_shape(const Shape& shape, const char* what);  // core/tensor.cpp

MemPool& default_pool(Device device) {
  backend_for(device);  // throws UnsupportedError for a device this build has no backend for
  // Leaked on purpose: tensors may be destroyed during static destruction.
  if (device.is_cpu()) {
    static MemPool* pool = new MemPool(Device::cpu(), false);
    return *pool;
  }
  static std::mutex mu;
  static auto* pools = new std::vector<MemPool*>;  // per CUDA device index, made on first use
  std::lock_guard lock(mu);
  const auto i = static_cast<std::size_t>(device.index());
  if (pools->size() <= i) pools->resize(i + 1, nullptr);
  if (!(*pools)[i]) (*pools)[i] = new MemPool(device, false);
  return *(*pools)[i];
}

namespace {

// The pool an allocation made now on this thread uses: the current stream's capture pool while it
// captures (docs/semantics.md §3: memory allocated during capture comes from the graph's private pool), else the
// device's default pool. `hold` keeps a capture pool alive (null for the default pool).
struct PoolChoice {
  std::shared_ptr<MemPool> hold;
  MemPool* pool;
  std::uint64_t stream_id;
};

// The pool a UsePool scope chose for this thread (null: the default pool).
std::shared_ptr<MemPool>& thread_pool() {
  thread_local std::shared_ptr<MemPool> pool;
  return pool;
}

PoolChoice choose_pool(Device device) {
  auto s = current_state(device);
  if (s->mode.load(std::memory_order_acquire) == StreamMode::capturing) {
    RuntimeLock lock;
    if (s->alloc_pool) return {s->alloc_pool, s->alloc_pool.get(), s->id};
  }
  if (const auto& chosen = thread_pool(); chosen && chosen->device() == device)
    return {chosen, chosen.get(), s->id};
  return {nullptr, &default_pool(device), s->id};
}

void release_block(void* pool, std::uint64_t stream_id, void* data, std::size_t nbytes) noexcept {
  static_cast<MemPool*>(pool)->deallocate(data, nbytes, stream_id);
}

}  // namespace
}  // namespace npugraph::detail

namespace npugraph {

Tensor empty(Shape shape, DType dtype, Device device) {
  detail::check_shape(shape, "empty");
  constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 48;
  std::uint64_t bytes = dtype_size(dtype);
  for (int i = 0; i < shape.size(); ++i) {
    const auto d = static_cast<std::uint64_t>(shape[i]);
    NG_CHECK_ARG(d == 0 || bytes <= kMaxBytes / d, "empty: shape = ", shape.str(), " of ",
                 dtype_name(dtype), ": more than 2^48 bytes");
    bytes *= d;
  }
  const std::size_t nbytes = static_cast<std::size_t>(bytes);
  detail::PoolChoice choice = detail::choose_pool(device);
  void* p;
  try {
    p = choice.pool->allocate(nbytes, choice.stream_id);
  } catch (const ResourceError&) {
    // Out of memory: return the default pool's cached blocks once queued work no longer needs them
    // (empty_cache synchronizes first), then retry. Not possible while capturing.
    if (current_stream(device).is_capturing()) {
      detail::note_oom();
      throw;
    }
    detail::note_alloc_retry();
    empty_cache(device);
    try {
      p = choice.pool->allocate(nbytes, choice.stream_id);
    } catch (const ResourceError&) {
      detail::note_oom();
      throw;
    }
  }
  auto storage = std::make_shared<Storage>(p, nbytes, device, std::move(choice.hold),
                                           &detail::release_block, choice.pool, choice.stream_id);
  return Tensor(std::move(storage), 0, shape, contiguous_strides(shape), dtype);
}

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
  detail::backend_for(device);
  return detail::memory_totals();
}

void reset_peak_memory_stats(Device device) {
  detail::backend_for(device);
  detail::reset_total_peaks();
  detail::default_pool(device).reset_peaks();
}

void empty_cache(Device device) {
  detail::check_sync_call("empty_cache", nullptr);
  // Queued work may still read cached blocks (Note [Stream-ordered reuse]): let it finish first.
  device_synchronize(device);
  detail::note_sync_all_streams();
  detail::default_pool(device).release_cached();
}

UsePool::UsePool(const PoolHandle& pool) {
  NG_CHECK_ARG(pool.defined(), "use_mem_pool: pool: undefined (create one with graph_pool_handle())");
  previous_ = std::exchange(detail::thread_pool(), pool.impl());
}

UsePool::~UsePool() { detail::thread_pool() = std::move(previous_); }

AllocatorStats allocator_stats(Device device) {
  detail::backend_for(device);
  return detail::allocator_totals();
}

void reset_accumulated_memory_stats(Device device) {
  detail::backend_for(device);
  detail::reset_accumulated_totals();
}

std::vector<SegmentSnapshot> memory_snapshot(Device device) {
  detail::backend_for(device);
  return detail::snapshot_all_pools(device);
}

}  // namespace npugraph
