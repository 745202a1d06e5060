// The collectives' CUDA slot (KernelDef::cuda, builds with NCCL): one NCCL call on the stream the
// backend gives, so that it runs eagerly on a cuda stream and is captured into the CUDA graph when
// the backend issues a graph's node table onto its capturing stream at instantiate.
//
// Note [NCCL collectives take host arguments]: a CUDA kernel of npugraph reads its parameters from
// the device copy of its block, which is how an update reaches a captured kernel. NCCL cannot: the
// buffer addresses, the count and the communicator are host arguments of ncclAllReduce & co., baked
// into the CUDA graph when the node table is captured. So this slot reads the host block, and the
// update check (collective_kernel.cpp) refuses, on an NCCL communicator, an update that points in
// or out elsewhere (an update naming the captured tensors is accepted: it changes nothing). The
// MPI path, whose kernel reads the block each run, keeps its buffer updates.
//
// Deadline: an eager collective (the stream is not capturing) records an event after the NCCL call
// and polls it, with ncclCommGetAsyncError, against the communicator's deadline; past it the NCCL
// communicator is aborted (ncclCommAbort ends its kernels), the communicator broken, and the task
// fails with the MPI path's TimeoutError. A collective inside an instantiated CUDA graph is not
// covered: the graph runs as one cudaGraphLaunch that the host waits for as a whole.
#if NPUGRAPH_HAVE_NCCL

#include <chrono>
#include <cstring>
#include <thread>

#include "dist/collective_params.hpp"
#include "dist/comm_state.hpp"
#include "dist/nccl_api.hpp"
#include "dist/nccl_state.hpp"
#include "npugraph/error.hpp"

namespace npugraph::dist {
namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    default:
      NG_THROW(InternalError, "dist: no NCCL reduction type for ", dtype_name(t),
               " (the plan admits float32, float16 and bfloat16 only)");
  }
}

std::string what_of(const CollectiveParams& p) {
  return npugraph::detail::cat(collective_name(p.kind), " of ", p.count, " ", dtype_name(p.dtype), " elements");
}

// Waits for the eager collective just issued on `stream`, bounded by the deadline.
void wait_eager(CommState& s, cudaStream_t stream, const std::string& what) {
  NcclState& n = *s.nccl;
  if (cudaEventRecord(n.done, stream) != cudaSuccess)
    NG_THROW(StateError, "dist ", what, " on ", s.str(), ": cudaEventRecord failed: ",
             cudaGetErrorString(cudaGetLastError()));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(s.timeout_ms.load());
  for (;;) {
    const cudaError_t e = cudaEventQuery(n.done);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady)
      NG_THROW(StateError, "dist ", what, " on ", s.str(), ": cudaEventQuery failed: ", cudaGetErrorString(e));
    ncclResult_t async = ncclSuccess;
    impl::check_nccl(impl::nccl().comm_get_async_error(n.comm, &async), "ncclCommGetAsyncError", s, what.c_str());
    impl::check_nccl(async, "the NCCL collective", s, what.c_str());
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  (void)impl::nccl().comm_abort(n.comm);
  n.comm = nullptr;
  NG_THROW(TimeoutError, impl::break_on_timeout(s, what));
}

}  // namespace

void collective_cuda(const void* raw, std::size_t, const void*, void* stream_handle) {
  CollectiveParams p;
  std::memcpy(&p, raw, sizeof p);  // the host block (Note [NCCL collectives take host arguments])
  CommState& s = *p.comm;
  const char* op = collective_name(p.kind);
  NG_CHECK_STATE(s.nccl != nullptr, "dist ", op, " on ", s.str(), ": a cuda stream's collective needs an "
                 "NCCL communicator (Communicator::nccl)");
  impl::check_not_broken(s, op);
  auto stream = static_cast<cudaStream_t>(stream_handle);
  ncclComm_t c = s.nccl->comm;
  const std::string what = what_of(p);
  const auto count = static_cast<std::size_t>(p.count);
  switch (p.kind) {
    case Collective::all_reduce:
      impl::check_nccl(impl::nccl().all_reduce(p.in, p.out, count, nccl_type(p.dtype), ncclSum, c, stream),
                       "ncclAllReduce", s, op);
      impl::settle(s, "ncclAllReduce", what);
      break;
    case Collective::all_gather:
      impl::check_nccl(impl::nccl().all_gather(p.in, p.out, count * dtype_size(p.dtype), ncclUint8, c, stream),
                       "ncclAllGather", s, op);
      impl::settle(s, "ncclAllGather", what);
      break;
    case Collective::reduce_scatter:
      impl::check_nccl(impl::nccl().reduce_scatter(p.in, p.out, count, nccl_type(p.dtype), ncclSum, c, stream),
                       "ncclReduceScatter", s, op);
      impl::settle(s, "ncclReduceScatter", what);
      break;
  }
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess)
    NG_THROW(StateError, "dist ", what, " on ", s.str(), ": cudaStreamIsCapturing failed: ",
             cudaGetErrorString(cudaGetLastError()));
  if (capturing == cudaStreamCaptureStatusNone) wait_eager(s, stream, what);
}

}  // namespace npugraph::dist

#endif  // NPUGRAPH_HAVE_NCCL
