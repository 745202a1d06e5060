// The state behind a dist::Communicator, and the calls every collective kernel makes on it: the MPI
// lock of the thread level, the in-flight check, the deadline-bounded wait (communicator.cpp).
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "npugraph/dist.hpp"

namespace npugraph::dist {

struct NcclState;  // src/dist/nccl_state.hpp: the ncclComm_t, in builds with NCCL

struct CommState {
  MPI_Comm comm = MPI_COMM_NULL;  // the duplicate, MPI_ERRORS_RETURN; null for an NCCL communicator
  Device device;                  // cpu (MPI) or the NCCL communicator's cuda device
  std::shared_ptr<NcclState> nccl;  // set for an NCCL communicator
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

  std::string str() const;  // "communicator (rank 0 of 2)", "NCCL communicator (rank 0 of 2 on cuda:0)"
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

// Marks `s` broken because `what` timed out and returns the TimeoutError message every collective
// kind reports ("... timed out after 1 s on <communicator> waiting for the other ranks (...)").
std::string break_on_timeout(CommState& s, const std::string& what);
// StateError when `s` is broken (naming why), for the collectives that do not pass InFlight.
void check_not_broken(CommState& s, const char* op);

}  // namespace impl
}  // namespace npugraph::dist
