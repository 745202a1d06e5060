// The NCCL side of an NCCL communicator's CommState (builds with NCCL only): the ncclComm_t, made
// nonblocking so that every wait on it can be bounded by the communicator's deadline, and the calls
// the collectives make on it (nccl_communicator.cpp; the kernel slot is nccl_kernel.cpp).
#pragma once

#if NPUGRAPH_HAVE_NCCL

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "dist/comm_state.hpp"

namespace npugraph::dist {

struct NcclState {
  ncclComm_t comm = nullptr;  // ncclConfig_t::blocking = 0: calls may return ncclInProgress
  cudaEvent_t done = nullptr;  // recorded after an eager collective, polled against the deadline
  int device = 0;

  NcclState() = default;
  NcclState(const NcclState&) = delete;
  NcclState& operator=(const NcclState&) = delete;
  ~NcclState();  // ncclCommAbort: never waits (queued and captured work keep the state alive)
};

namespace impl {

// Throws StateError naming the NCCL call, NCCL's error string and its last-error text, unless `rc`
// is ncclSuccess or ncclInProgress.
void check_nccl(ncclResult_t rc, const char* call, const CommState& s, const char* op);

// Polls ncclCommGetAsyncError until the last nonblocking call on `s` has finished (NCCL's enqueue,
// or ncclCommInitRank's connection to the other ranks). Past the deadline the NCCL communicator is
// aborted, `s` broken, and a TimeoutError names `what`.
void settle(CommState& s, const char* call, const std::string& what);

}  // namespace impl
}  // namespace npugraph::dist

#endif  // NPUGRAPH_HAVE_NCCL
