// Waiting in tests without timing (issue 44, item 7).
//
// Note [Tests without time]
// A test never sleeps and then asserts that something did not happen, and never asserts how long
// something took: on a loaded 2-core CI machine any interval is too short or too long. Instead it
// either holds a Gate that provably keeps the work from running while it asserts, then opens it; or
// waits for a condition with a deadline (kDeadline) that a correct run never comes near, so that a
// broken runtime fails the wait instead of hanging the test. Lower bounds that state a rule ("fails
// no earlier than its deadline") may stay.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace ngtest {

inline constexpr std::chrono::milliseconds kDeadline{30000};

// Polls `condition` until it holds or `deadline` passes; returns whether it holds. For states that
// nothing notifies (a stream blocked in a wait, a counter a worker moves). Yields between polls.
template <class Condition>
bool eventually(Condition&& condition, std::chrono::milliseconds deadline = kDeadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= until) return condition();
    std::this_thread::yield();
  }
  return true;
}

// A one-shot gate: tasks wait() on it, the test open()s it at the point where the work may go on.
// Copies share one gate, so a task that captures it by value never outlives it.
class Gate {
 public:
  void open() const {
    std::lock_guard lock(state_->mu);
    state_->open = true;
    state_->cv.notify_all();
  }
  bool is_open() const {
    std::lock_guard lock(state_->mu);
    return state_->open;
  }
  // Blocks until the gate is open; false when `deadline` passed first.
  bool wait_for(std::chrono::milliseconds deadline = kDeadline) const {
    std::unique_lock lock(state_->mu);
    return state_->cv.wait_for(lock, deadline, [&] { return state_->open; });
  }
  // For a task: blocks until the gate is open, or throws at the deadline (the stream's next
  // synchronize reports it as the task's error).
  void wait() const {
    if (!wait_for()) throw std::runtime_error("ngtest::Gate: not opened within the test deadline");
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace ngtest
