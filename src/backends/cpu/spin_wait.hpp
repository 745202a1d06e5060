// Spinning before sleeping, for the CPU backend's waits (stream workers, synchronize, compute-pool
// helpers): a wake-up through the kernel costs tens of microseconds on a VM, more than most kernels.
#pragma once

#include <chrono>
#include <mutex>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NG_PAUSE() _mm_pause()
#else
#define NG_PAUSE() ((void)0)
#endif

namespace npugraph::detail {

// How long an idle thread spins before it sleeps: long enough to keep back-to-back launches and
// launch + synchronize off the futex path, short enough not to burn a core for nothing. After
// kSpinAlone it yields the core between polls: when the thread it waits for shares its core (more
// runnable threads than cores), spinning alone would only delay that thread by a whole time slice.
inline constexpr auto kSpin = std::chrono::microseconds(50);
// Compute-pool helpers only bridge the gaps between the kernels of one replay or one eager sequence.
inline constexpr auto kPoolSpin = std::chrono::microseconds(20);
inline constexpr auto kSpinAlone = std::chrono::microseconds(4);

// Polls `done` until it holds or `until` passes, yielding after kSpinAlone; returns `done()`.
template <class Done>
bool spin_until(Done done, std::chrono::steady_clock::time_point until) {
  const auto start = std::chrono::steady_clock::now();
  const auto alone_until = start + kSpinAlone < until ? start + kSpinAlone : until;
  for (auto now = start; now < until; now = std::chrono::steady_clock::now()) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      NG_PAUSE();
    }
    if (now >= alone_until) std::this_thread::yield();
  }
  return done();
}

// Locks `lock`'s mutex, polling try_lock() for up to kSpinAlone before blocking: the mutexes
// of the hot paths are held for a few instructions, and a blocked lock() sleeps in the kernel.
inline void lock_spinning(std::unique_lock<std::mutex>& lock) {
  if (!spin_until([&] { return lock.try_lock(); }, std::chrono::steady_clock::now() + kSpinAlone))
    lock.lock();
}

}  // namespace npugraph::detail
