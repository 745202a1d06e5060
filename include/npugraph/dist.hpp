// npugraph::dist: collectives on MPI (Open MPI) as kernel launches, so that they run eagerly on a
// stream, are captured into graphs like any other op, sit in task groups and take task updates
// (docs/dist.md). Built when CMake finds MPI (NPUGRAPH_MPI=AUTO|ON|OFF); link npugraph::dist.
//
//   npugraph::dist::init(&argc, &argv);              // MPI_Init_thread(MPI_THREAD_MULTIPLE)
//   auto comm = npugraph::dist::Communicator::world(); // a duplicate of MPI_COMM_WORLD
//   npugraph::dist::all_reduce(comm, x);             // x = sum of every rank's x, on the stream
//
// Ordering (docs/dist.md, "Ordering"): every rank must issue the collectives of one communicator
// in the same order. A graph replays its tasks in recorded order per stream, so replaying the same
// graphs in the same order on every rank keeps it; collectives of one communicator on parallel
// branches of a graph, or graphs replayed in different orders on different ranks, break it.
//
// Deadline: a collective that is not complete after the communicator's timeout (default
// NPUGRAPH_DIST_TIMEOUT_S, else 60 s) fails its task with a TimeoutError naming the collective, the
// rank, the size and the deadline; the communicator is then broken (MPI cannot cancel a collective).
//
// On NCCL (docs/dist.md, "On NCCL"): Communicator::nccl(mpi, Device::cuda(i)) makes a communicator of
// the same ranks on one CUDA device each; the same collectives on tensors of that device then run as
// ncclAllReduce / ncclAllGather / ncclReduceScatter on the stream, captured into CUDA graphs. Built
// when the CUDA backend, MPI and NCCL are all found (NPUGRAPH_NCCL=AUTO|ON|OFF). Compiled and tested
// without a GPU only: not yet run on one.
#pragma once

#include <mpi.h>

#include <chrono>
#include <memory>

#include "npugraph/device.hpp"
#include "npugraph/kernel.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph::dist {

// MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE) when MPI is not initialized yet (stream workers
// call MPI: docs/dist.md, "Threads"). Throws StateError when MPI provides less than
// MPI_THREAD_SERIALIZED. Returns the thread level MPI provides.
int init(int* argc = nullptr, char*** argv = nullptr);
// MPI_Finalize, when init() initialized MPI and it is not finalized yet. Synchronize the streams
// first; communicators destroyed afterwards skip MPI_Comm_free.
void finalize();
bool is_initialized();

// The deadline a new communicator takes: NPUGRAPH_DIST_TIMEOUT_S (seconds, > 0, may be fractional)
// when set, else 60 s. Throws ArgumentError for a malformed value.
std::chrono::milliseconds default_timeout();

struct CommState;

// A handle (copies share one communicator) over a duplicate of an MPI communicator: npugraph's
// collectives never match the caller's own MPI calls on the original. Queued and captured work keeps
// the communicator alive (docs/semantics.md §10).
class Communicator {
 public:
  // MPI_Comm_dup(comm) (collective over comm). MPI must be initialized with at least
  // MPI_THREAD_SERIALIZED (StateError otherwise).
  explicit Communicator(MPI_Comm comm);
  static Communicator world();
  // An NCCL communicator of `mpi`'s ranks (collective over `mpi`), rank r on `device` (a cuda
  // device; one device per rank, as NCCL requires). Rank 0's ncclUniqueId is broadcast over `mpi`,
  // then ncclCommInitRank runs on the device, both bounded by `mpi`'s deadline. It takes `mpi`'s
  // timeout. Throws UnsupportedError in a build without NCCL, and when the device is not usable
  // (no CUDA device present: the runtime's message); every rank throws when one rank cannot.
  static Communicator nccl(const Communicator& mpi, Device device);
  // Whether this build has NCCL (Communicator::nccl can succeed on a machine with GPUs).
  static bool nccl_built();

  int rank() const;
  int size() const;
  MPI_Comm mpi_comm() const;  // the duplicate; MPI_COMM_NULL for an NCCL communicator
  // Where its collectives run: cpu for MPI, the cuda device of an NCCL communicator. Collectives
  // take tensors of this device only, and issue on its current stream.
  Device device() const;
  bool is_nccl() const;
  // How long a collective may wait for the other ranks before its task fails (> 0).
  std::chrono::milliseconds timeout() const;
  void set_timeout(std::chrono::milliseconds timeout);
  // Set once a collective on it has timed out: every later collective fails at once.
  bool broken() const;
  std::string str() const;  // "communicator (rank 0 of 2)", "NCCL communicator (rank 0 of 2 on cuda:0)"

  const std::shared_ptr<CommState>& state() const { return state_; }

 private:
  explicit Communicator(std::shared_ptr<CommState> state);
  std::shared_ptr<CommState> state_;
};

// Sum over the ranks, in place: x on every rank becomes the sum of every rank's x. float32, float16,
// bfloat16 (the 16-bit dtypes are summed in float32 and rounded once). Contiguous.
void all_reduce(const Communicator& comm, const Tensor& x);
// out = sum over the ranks of in (same dtype and shape; out may be in).
void all_reduce_out(const Communicator& comm, const Tensor& in, const Tensor& out);

// out = the ranks' inputs concatenated along dim 0 in rank order: in [m, ...] -> out [size*m, ...].
// Any dtype (bytes are gathered).
void all_gather_out(const Communicator& comm, const Tensor& in, const Tensor& out);
Tensor all_gather(const Communicator& comm, const Tensor& in);

// The sum over the ranks of in [size*m, ...], rank r keeping rows [r*m, (r+1)*m): out [m, ...].
// float32, float16, bfloat16, as all_reduce.
void reduce_scatter_out(const Communicator& comm, const Tensor& in, const Tensor& out);
Tensor reduce_scatter(const Communicator& comm, const Tensor& in);

// The kernel identities (one KernelDef per collective).
const KernelDef& all_reduce_kernel();
const KernelDef& all_gather_kernel();
const KernelDef& reduce_scatter_kernel();

}  // namespace npugraph::dist
