// Stalled waits: registration, the search a synchronize makes for a stall it depends on, and the
// cancellation that lets the runtime recover (Note [Stalls] in runtime/stall.hpp).
#include "runtime/stall.hpp"

#include <algorithm>

#include "npugraph/error.hpp"
#include "runtime/stream_state.hpp"

namespace npugraph::detail {

namespace {
std::atomic<std::uint64_t> g_next_stall{1};
constexpr std::size_t kReportedKept = 64;
}  // namespace

std::uint64_t next_stall_id() { return g_next_stall.fetch_add(1, std::memory_order_relaxed); }

void StreamState::add_stall(std::uint64_t key, Stall stall) {
  std::lock_guard lock(mu_);
  stalls_.emplace_back(key, std::move(stall));
}

bool StreamState::remove_stall(std::uint64_t key) {
  std::lock_guard lock(mu_);
  bool cancelled = false;
  std::erase_if(stalls_, [&](const auto& e) {
    if (e.first != key) return false;
    cancelled = e.second.cancel && e.second.cancel->load();
    return true;
  });
  return cancelled;
}

std::optional<Stall> StreamState::stall() const {
  std::lock_guard lock(mu_);
  if (stalls_.empty()) return std::nullopt;
  return stalls_.front().second;
}

bool StreamState::cancel_stall(std::uint64_t stall_id, const std::string& message) {
  std::lock_guard lock(mu_);
  auto it = std::find_if(stalls_.begin(), stalls_.end(),
                         [&](const auto& e) { return e.second.id == stall_id; });
  if (it == stalls_.end()) return false;
  // The wait removes its entry under mu_ before it returns, so `cancel` and `wake` are alive here.
  it->second.cancel->store(true, std::memory_order_seq_cst);
  it->second.wake->notify_all();
  poisons_.push_back(Poison{stall_id, queue->submitted(), message});
  has_poison_.store(true, std::memory_order_release);
  return true;
}

std::optional<Poison> StreamState::poison_for_current() {
  if (!has_poison_.load(std::memory_order_acquire)) return std::nullopt;
  std::lock_guard lock(mu_);
  // The worker runs tasks in queue order: a poison whose tasks all ran never applies again.
  std::erase_if(poisons_, [&](const Poison& p) { return executing >= p.before_task; });
  has_poison_.store(!poisons_.empty(), std::memory_order_release);
  for (const Poison& p : poisons_)
    if (executing < p.before_task) return p;
  return std::nullopt;
}

void StreamState::report_timeout(std::uint64_t stall_id, const std::string& message) noexcept {
  std::lock_guard lock(mu_);
  if (std::find(reported_.begin(), reported_.end(), stall_id) != reported_.end()) return;
  try {
    if (reported_.size() >= kReportedKept) reported_.erase(reported_.begin());
    reported_.push_back(stall_id);
    if (!timeout_) timeout_ = message;
  } catch (...) {
  }
}

std::optional<std::string> StreamState::take_timeout() {
  std::lock_guard lock(mu_);
  return std::exchange(timeout_, std::nullopt);
}

void StreamState::mark_reported(std::uint64_t stall_id) {
  std::lock_guard lock(mu_);
  if (std::find(reported_.begin(), reported_.end(), stall_id) != reported_.end()) return;
  if (reported_.size() >= kReportedKept) reported_.erase(reported_.begin());
  reported_.push_back(stall_id);
}

void StreamState::set_blocked_on(const std::weak_ptr<StreamState>& other) {
  std::lock_guard lock(mu_);
  blocked_on_ = other;
}

void StreamState::clear_blocked_on() {
  std::lock_guard lock(mu_);
  blocked_on_.reset();
}

std::shared_ptr<StreamState> StreamState::blocked_on() const {
  std::lock_guard lock(mu_);
  return blocked_on_.lock();
}

void raise_if_stalled(StreamState& start, StreamState* reporter, const std::string& who) {
  using clock = std::chrono::steady_clock;
  std::shared_ptr<StreamState> hold;  // keeps the stream being looked at alive
  StreamState* cur = &start;
  // A chain of blocked_on edges is short; the bound only guards against a cycle (a deadlock whose
  // streams are all waiting on each other, which has no stall to report).
  for (int depth = 0; depth < 32 && cur != nullptr; ++depth) {
    if (auto st = cur->stall()) {
      const auto blocked = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - st->since);
      const std::string where =
          cur == reporter ? std::string("the stream is") : cur->str() + " is";
      const std::string via =
          cur == reporter || depth == 0 ? std::string()
                                        : cat(" (", reporter ? reporter->str() : std::string("it"),
                                              " waits on it through events or a graph's launch order)");
      const std::string stalled = cat(where, " blocked in ", st->what, " for ", blocked.count(),
                                      " ms, past its ", st->deadline.count(), " ms deadline", via,
                                      " (is a record missing, or did two records collapse into one?)");
      const std::string tail =
          "; the wait is cancelled: it gives up without consuming a signal, the rest of its replay "
          "is skipped (the graph and its parameters are unchanged) and the stream goes on";
      const std::string message = cat(who, " gave up: ", stalled, tail);
      // Marked before the cancel: once cancelled, the stalled stream's next event record carries
      // the poison at once, and a waiter of it that is `reporter` must find the stall already
      // reported (seen under TSan: the poison reached the reporter between cancel and mark). A mark
      // left by a cancel that finds the wait gone is harmless: no poison follows it.
      if (reporter) reporter->mark_reported(st->id);
      if (!cur->cancel_stall(st->id, cat("it depended on work of ", cur->str(), " that was cancelled: ",
                                         cur->str(), " was blocked in ", st->what, " past its ",
                                         st->deadline.count(), " ms deadline")))
        return;  // the wait ended meanwhile: nothing is stalled any more
      if (cur != reporter)
        cur->report_timeout(st->id, cat(cur->str(), ": a synchronize of ",
                                        reporter ? reporter->str() : std::string("an event"),
                                        " cancelled a stall of this stream: ", st->what, " was blocked ",
                                        "past its ", st->deadline.count(), " ms deadline", tail));
      throw TimeoutError(message);
    }
    hold = cur->blocked_on();
    if (hold.get() == &start) return;
    cur = hold.get();
  }
}

}  // namespace npugraph::detail
