// The state behind a dist::Communicator, and the calls every collective kernel makes on it: the MPI
// lock of the thread level, the in-flight check, the deadline-bounded wait (communicator.cpp).
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "npugraph/dist.hpp"

namespace npugraph::dist {

struct CommState {
  MPI_Comm comm = MPI_COMM_NULL;  // the duplicate, MPI_ERRORS_RETURN
  int rank = 0;
  int size = 1;
  std::atomic<std::int64_t> timeout_ms{60000};
  std::atomic<bool> in_flight{false};
  std::atomic<bool> is_broken{false};
  std::mutex mu;                       // broken_reason, abandoned
  std::string broken_reason;           // "all_reduce of 4 float32 elements timed out after 1 s"
  std::vector<MPI_Request> abandoned;  // requests of timed-out collectives (MPI cannot cancel them)
  // float32 staging of the 16-bit reductions; only the collective in flight touches them.
  std::vector<float> stage_in, stage_out;

  CommState() = default;
  CommState(const CommState&) = delete;
  CommState& operator=(const CommState&) = delete;
  ~CommState();

  std::string str() const;  // "communicator (rank 0 of 2)"
};

namespace impl {

// Holds the process-wide MPI lock when MPI gives MPI_THREAD_SERIALIZED (nothing with MULTIPLE).
class MpiLock {
 public:
  MpiLock();
  ~MpiLock();
  MpiLock(const MpiLock&) = delete;
  MpiLock& operator=(const MpiLock&) = delete;

 private:
  bool held_;
};

// Throws StateError unless an MPI call's return code is MPI_SUCCESS (the MPI error string named).
void check_mpi(int rc, const char* call, const CommState& s, const char* op);

// Marks `s` in flight for one collective `op` (StateError when it is broken, or when another
// collective on it is in flight in this process: docs/dist.md, "Ordering"); clears it on exit.
class InFlight {
 public:
  InFlight(CommState& s, const char* op);
  ~InFlight();
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  CommState& s_;
};

// Polls `req` with MPI_Test until it completes or the communicator's deadline passes: then the
// request is abandoned, the communicator broken, and a TimeoutError names `what` (the collective,
// its element count and dtype), the rank, the size and the deadline.
void wait_for(CommState& s, MPI_Request& req, const std::string& what);

}  // namespace impl
}  // namespace npugraph::dist
