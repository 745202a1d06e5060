// The shared state behind a Stream handle.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "npugraph/device.hpp"
#include "npugraph/stream.hpp"
#include "runtime/backend.hpp"
#include "runtime/diagnostics.hpp"
#include "runtime/stream_links.hpp"

namespace npugraph::detail {

class MemPool;

enum class StreamMode : std::uint8_t { normal, capturing, updating };

// What a stream is blocked on, once a wait has passed its deadline (Note [Stalls]).
struct Stall {
  std::string what;  // "ExternalEvent 'ev' wait (graph 2, task #0)"
  std::chrono::steady_clock::time_point since;
  std::chrono::milliseconds deadline;
  std::uint64_t id = 0;                      // unique per stall, for reporting it once per stream
  std::atomic<bool>* cancel = nullptr;       // set to make the blocked wait give up
  std::condition_variable* wake = nullptr;   // notified after `cancel` is set
};

// Work a cancelled stall held up, issued on its stream before the cancel: event records among it
// carry the stall's error to the streams that wait on them (Note [Stalls]).
struct Poison {
  std::uint64_t stall_id = 0;
  std::uint64_t before_task = 0;  // tasks with a lower queue index were issued before the cancel
  std::string message;
};

struct StreamState {
  StreamState(Device device, std::uint64_t id, int num_threads, Backend& backend);
  ~StreamState();

  std::string str() const;  // "cpu stream 3"
  // A task failed while executing: keep the first message for the next synchronize.
  void report_error(const std::string& message) noexcept;
  std::optional<std::string> take_error();
  // A stall this stream's work depended on was cancelled (Note [Stalls]): the next synchronize
  // throws TimeoutError with `message`, unless this stream already reported stall `stall_id`.
  void report_timeout(std::uint64_t stall_id, const std::string& message) noexcept;
  std::optional<std::string> take_timeout();
  // Remembers that a synchronize of this stream threw for `stall_id` (reported once per stream).
  void mark_reported(std::uint64_t stall_id);

  // Blocked waits register while they are past their deadline (several may, from graph branches).
  void add_stall(std::uint64_t key, Stall stall);
  // Returns whether the stall had been cancelled (a canceller sets the flag under the same lock).
  bool remove_stall(std::uint64_t key);
  std::optional<Stall> stall() const;
  // Makes the stall's wait give up and poisons the event records queued before now; returns false
  // when the stall is gone (its wait ended meanwhile).
  bool cancel_stall(std::uint64_t stall_id, const std::string& message);
  // The error an event record running now (queue index `executing`) carries, if any; forgets the
  // poisons of tasks that all ran (the worker calls it, in queue order).
  std::optional<Poison> poison_for_current();

  // While the worker waits for another stream (an event recorded there, or its turn to replay a
  // graph running there): that stream, so that a synchronize can find a stall behind it.
  void set_blocked_on(const std::weak_ptr<StreamState>& other);
  void clear_blocked_on();
  std::shared_ptr<StreamState> blocked_on() const;

  const Device device;
  const std::uint64_t id;
  const int num_threads;
  Backend& backend;  // the device's (backend.hpp)
  std::unique_ptr<StreamQueue> queue;
  std::weak_ptr<StreamState> self;  // set at creation, for edges other streams follow
  // The queue index of the task the worker runs now (written and read by the worker only).
  std::uint64_t executing = 0;

  // Fast-path check for launch(): normal streams enqueue without taking the runtime lock.
  std::atomic<StreamMode> mode{StreamMode::normal};
  // Set when the stream is being destroyed: blocked waits give up so its worker can be joined.
  std::atomic<bool> closing{false};
  // Host threads inside a synchronize of this stream now (sync_stream). Only observed, never acted
  // on: tests check that a synchronizing call is provably waiting before they let the work finish
  // (tests/support/blocked.hpp).
  std::atomic<int> synchronizing{0};

  // Capture and update state (Note [Stream modes]), guarded by runtime_mutex(). The graph layer owns
  // the objects and the fields below.
  std::shared_ptr<CaptureLink> capture;
  std::vector<std::uint32_t> frontier;  // captured nodes the stream's next task depends on
  // Stream::capture_mark(): a value never seen before, set by every change to what the stream's
  // next captured task would follow (a task, an event record or wait, a capture begun or left).
  std::atomic<std::uint64_t> capture_mark{0};
  int open_group = -1;                   // index of the capture's open task group on this stream
  std::shared_ptr<MemPool> alloc_pool;   // while capturing: the capture's pool (memory.cpp)
  std::unique_ptr<UpdateLink> update;
  // The thread that began `update`: only it binds, ends or aborts it, and it binds without the
  // runtime lock (Note [Update binding]).
  std::atomic<std::thread::id> update_owner{};
  // The last update's state, reused by the next (no allocation); owned, exchanged atomically.
  std::atomic<UpdateLink*> spare_update{nullptr};
  std::shared_ptr<void> patches;  // the graph layer's recycled stream-ordered patches

 private:
  mutable std::mutex mu_;
  std::string error_;
  std::uint64_t errors_ = 0;
  std::optional<std::string> timeout_;
  std::vector<std::uint64_t> reported_;  // stall ids a synchronize of this stream threw for
  std::vector<std::pair<std::uint64_t, Stall>> stalls_;
  std::vector<Poison> poisons_;
  std::atomic<bool> has_poison_{false};
  std::weak_ptr<StreamState> blocked_on_;
};

// Whether this thread began the stream's update (Note [Update binding]).
inline bool owns_update(const StreamState& s) {
  return s.update_owner.load(std::memory_order_relaxed) == std::this_thread::get_id();
}

// Guards every capture / task-group / update state transition (rare, host-side, never hot).
std::mutex& runtime_mutex();

// Holds runtime_mutex(). Objects released while it is held (captures, streams, executable graphs,
// updates) are parked with defer_release() and destroyed after the unlock: their destructors may join
// worker threads or run user code, which must never happen under the lock.
class RuntimeLock {
 public:
  RuntimeLock();
  ~RuntimeLock();
  RuntimeLock(const RuntimeLock&) = delete;
  RuntimeLock& operator=(const RuntimeLock&) = delete;
  void unlock();

 private:
  friend void defer_release(std::shared_ptr<void> object);
  std::unique_lock<std::mutex> lock_;
  std::vector<std::shared_ptr<void>> graveyard_;
};
// Whether this thread holds the runtime lock (through a RuntimeLock).
bool runtime_lock_held();

// Under a RuntimeLock on this thread: parks `object` until the unlock. Otherwise drops it now.
void defer_release(std::shared_ptr<void> object);

// The stream's state; throws ArgumentError for an undefined handle.
StreamState& state_of(const Stream& stream);

// The calling thread's current stream (the default stream until one is set): the cpu's, and the
// one of `device` (current streams are kept per device kind).
std::shared_ptr<StreamState> current_state();
std::shared_ptr<StreamState> current_state(Device device);
Stream& current_slot(Device device);
const Stream& current_cpu();  // this thread's current cpu stream (the default one at first)


}  // namespace npugraph::detail
