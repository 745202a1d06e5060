// A lock for critical sections of a few instructions (swapping a pointer, pushing to a free list),
// taken on every update and replay: one atomic exchange to lock, one store to unlock. Never hold it
// across anything that may block or allocate much.
#pragma once

#include <atomic>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npugraph::detail {

class SpinLock {
 public:
  void lock() noexcept {
    while (flag_.exchange(true, std::memory_order_acquire))
      while (flag_.load(std::memory_order_relaxed)) pause();
  }
  void unlock() noexcept { flag_.store(false, std::memory_order_release); }

 private:
  static void pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
  }
  std::atomic<bool> flag_{false};
};

}  // namespace npugraph::detail
