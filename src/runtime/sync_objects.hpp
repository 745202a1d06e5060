// The state behind Event and ExternalEvent, and the task bodies that act on them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace npugraph::detail {

struct StreamState;
class CaptureLink;

struct EventState {
  explicit EventState(bool enable_timing) : timing(enable_timing) {}
  const bool timing;

  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t recorded = 0;   // sequence number of the most recent eager record
  std::uint64_t completed = 0;  // highest record sequence that has run
  std::chrono::steady_clock::time_point completed_at{};
  std::weak_ptr<StreamState> recorder;  // the stream of the most recent eager record
  // The stream of every eager record that has not run yet, by sequence: a waiter is blocked on the
  // stream of the record it waits for, not on the latest recorder (Note [Stalls]: a re-record on
  // another stream must not point a synchronize's search away from the stalled one).
  std::vector<std::pair<std::uint64_t, std::weak_ptr<StreamState>>> pending;
  // Set when the most recent record happened in a capture: the nodes it marks.
  std::weak_ptr<CaptureLink> capture;
  std::vector<std::uint32_t> captured_nodes;
  bool captured = false;
  // Records that ran after a cancelled stall on their stream (Note [Stalls]): (seq, stall, message).
  struct Poisoned {
    std::uint64_t seq, stall_id;
    std::string message;
  };
  std::vector<Poisoned> poisoned;  // the last few only
};

// A record task ran on `stream`.
void event_complete(EventState& event, std::uint64_t seq, StreamState& stream);
// A wait task: blocks until the record `seq` has run (blocked on the recording stream meanwhile).
void event_block(EventState& event, std::uint64_t seq, StreamState& stream);

struct ExternalEventState {
  explicit ExternalEventState(std::string name);
  const std::string name;
  std::mutex mu;
  std::condition_variable cv;
  bool signal = false;
  std::uint64_t collapsed = 0;
  std::int64_t deadline_ms = -1;  // -1: the process default
  // Waits blocked on the signal now (external_wait, from the moment it finds the signal clear until
  // it returns). Only observed, never acted on: tests check that a stream is provably held in a wait
  // instead of sleeping and hoping it got there (tests/support/blocked.hpp).
  int blocked = 0;
};

// Where a blocking wait runs, for stall reports: the stream and, in a replay, the graph task.
struct WaitSite {
  StreamState* stream;
  std::uint64_t graph_id = 0;  // 0: not in a graph
  std::uint32_t node = 0;
};

void external_record(ExternalEventState& event);
// Blocks until the signal is set and consumes it (true), or gives up without consuming one (false):
// cancelled by a synchronize that reported the stall (Note [Stalls]), or the stream is going away.
bool external_wait(ExternalEventState& event, const WaitSite& site);
void external_reset(ExternalEventState& event);

// True once the process is exiting: blocked waits give up so worker threads can be joined.
bool runtime_exiting();

}  // namespace npugraph::detail
