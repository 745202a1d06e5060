// The collectives' entry points (npugraph/dist.hpp): the plan (every check the shapes, dtypes and
// communicator decide, once per call), the block, and one launch with every tensor it uses plus the
// communicator, so queued and captured work keeps both alive (docs/adding_an_op.md).
#include <climits>

#include "dist/collective_params.hpp"
#include "dist/comm_state.hpp"
#include "npugraph/dtype.hpp"
#include "npugraph/error.hpp"
#include "npugraph/memory.hpp"
#include "npugraph/stream.hpp"

namespace npugraph::dist {
namespace {

// The CUDA slot runs the collective on NCCL (Note [NCCL collectives take host arguments]).
#if NPUGRAPH_HAVE_NCCL
constexpr CudaLaunchFn kCudaSlot = &collective_cuda;
#else
constexpr CudaLaunchFn kCudaSlot = nullptr;
#endif

const KernelDef kAllReduce{.name = "all_reduce", .cpu = &collective_cpu, .cuda = kCudaSlot,
                           .check_update = &check_collective_update, .describe = &describe_collective};
const KernelDef kAllGather{.name = "all_gather", .cpu = &collective_cpu, .cuda = kCudaSlot,
                           .check_update = &check_collective_update, .describe = &describe_collective};
const KernelDef kReduceScatter{.name = "reduce_scatter", .cpu = &collective_cpu, .cuda = kCudaSlot,
                               .check_update = &check_collective_update, .describe = &describe_collective};

const KernelDef& kernel_of(Collective kind) {
  switch (kind) {
    case Collective::all_reduce: return kAllReduce;
    case Collective::all_gather: return kAllGather;
    case Collective::reduce_scatter: return kReduceScatter;
  }
  return kAllReduce;
}

// Note [Collectives run on the communicator's device]: an MPI communicator takes cpu tensors, an
// NCCL one tensors of its cuda device; a collective issues on that device's current stream. A
// tensor elsewhere is refused here, naming its device and the communicator's (never copied).
void check_tensor(const Communicator& comm, const char* op, const Tensor& t, const char* name,
                  bool reduction) {
  NG_CHECK_ARG(t.defined(), "dist::", op, ": ", name, " is undefined");
  NG_CHECK_ARG(t.device() == comm.device(), "dist::", op, ": ", name, " = ", t.str(), " on ",
               t.device().str(), ": must be on the communicator's device, ", comm.device().str(), " (",
               comm.str(), "; ",
               comm.is_nccl() ? "an NCCL communicator takes tensors of its cuda device; use an MPI one "
                                "for cpu tensors"
                              : "an MPI communicator takes cpu tensors; Communicator::nccl makes one for "
                                "cuda tensors",
               ")");
  NG_CHECK_ARG(t.is_contiguous(), "dist::", op, ": ", name, " = ", t.str(), ": must be contiguous");
  if (reduction)
    NG_CHECK_ARG(is_floating(t.dtype()), "dist::", op, ": ", name, " dtype = ", dtype_name(t.dtype()),
                 ": must be float32, float16 or bfloat16 (",
                 comm.is_nccl() ? "summed by NCCL in that dtype" : "summed in float32", ")");
}

void check_fits(const Communicator& comm, const char* op, const Tensor& t, const char* name,
                std::int64_t elements) {
  if (comm.is_nccl()) return;  // NCCL counts are size_t
  // MPI counts are int: every count npugraph passes (float32 staging included) must fit one.
  const auto bytes = elements * static_cast<std::int64_t>(std::max<std::size_t>(4, dtype_size(t.dtype())));
  NG_CHECK_ARG(bytes <= INT_MAX, "dist::", op, ": ", name, " = ", t.str(), ": ", bytes,
               " bytes per rank is more than MPI's int count allows (", INT_MAX, ")");
}

Shape gathered_shape(const Shape& in, int size) {
  Shape s = in;
  s[0] = in[0] * size;
  return s;
}

void issue(const Communicator& comm, Collective kind, const Tensor& in, const Tensor& out,
           std::int64_t count) {
  const Stream stream = current_stream(comm.device());
  const std::shared_ptr<CommState>& s = comm.state();
  const CollectiveParams p{s.get(), in.data(), out.data(), count, in.dtype(), kind};
  // The communicator travels as a use: a one-byte view of its state that owns a reference to it.
  const Tensor anchor = Tensor::from_blob(s.get(), {1}, DType::u8, s);
  const Tensor* uses[] = {&in, &out, &anchor};
  launch(stream, kernel_of(kind), p, uses);
}

void check_not_updating(const Communicator& comm, const char* op) {
  const Stream stream = current_stream(comm.device());
  NG_CHECK_STATE(!stream.is_updating(), "dist::", op, " on ", stream.str(), ": the allocating form cannot "
                 "be bound in a task update (its output would be freed while replays still write it); "
                 "use dist::", op, "_out");
}

}  // namespace

const KernelDef& all_reduce_kernel() { return kAllReduce; }
const KernelDef& all_gather_kernel() { return kAllGather; }
const KernelDef& reduce_scatter_kernel() { return kReduceScatter; }

void all_reduce(const Communicator& comm, const Tensor& x) { all_reduce_out(comm, x, x); }

void all_reduce_out(const Communicator& comm, const Tensor& in, const Tensor& out) {
  const UpdateErrorGuard guard(current_stream(comm.device()));
  check_tensor(comm, "all_reduce", in, "in", true);
  check_tensor(comm, "all_reduce", out, "out", true);
  NG_CHECK_ARG(in.dtype() == out.dtype() && in.shape() == out.shape(), "dist::all_reduce: out = ",
               out.str(), ": must have the dtype and shape of in = ", in.str());
  check_fits(comm, "all_reduce", in, "in", in.numel());
  issue(comm, Collective::all_reduce, in, out, in.numel());
}

void all_gather_out(const Communicator& comm, const Tensor& in, const Tensor& out) {
  const UpdateErrorGuard guard(current_stream(comm.device()));
  check_tensor(comm, "all_gather", in, "in", false);
  check_tensor(comm, "all_gather", out, "out", false);
  NG_CHECK_ARG(in.dim() >= 1, "dist::all_gather: in = ", in.str(), ": must have at least one dim");
  const Shape want = gathered_shape(in.shape(), comm.size());
  NG_CHECK_ARG(out.dtype() == in.dtype() && out.shape() == want, "dist::all_gather: out = ", out.str(),
               ": must be ", dtype_name(in.dtype()), want.str(), " (in = ", in.str(), " from each of ",
               comm.size(), " ranks along dim 0)");
  check_fits(comm, "all_gather", in, "in", in.numel());
  issue(comm, Collective::all_gather, in, out, in.numel());
}

Tensor all_gather(const Communicator& comm, const Tensor& in) {
  const UpdateErrorGuard guard(current_stream(comm.device()));
  check_tensor(comm, "all_gather", in, "in", false);
  check_not_updating(comm, "all_gather");
  NG_CHECK_ARG(in.dim() >= 1, "dist::all_gather: in = ", in.str(), ": must have at least one dim");
  Tensor out = empty(gathered_shape(in.shape(), comm.size()), in.dtype(), in.device());
  all_gather_out(comm, in, out);
  return out;
}

void reduce_scatter_out(const Communicator& comm, const Tensor& in, const Tensor& out) {
  const UpdateErrorGuard guard(current_stream(comm.device()));
  check_tensor(comm, "reduce_scatter", in, "in", true);
  check_tensor(comm, "reduce_scatter", out, "out", true);
  NG_CHECK_ARG(in.dim() >= 1 && in.size(0) % comm.size() == 0, "dist::reduce_scatter: in = ", in.str(),
               ": dim 0 must be a multiple of the communicator size ", comm.size());
  Shape want = in.shape();
  want[0] = in.size(0) / comm.size();
  NG_CHECK_ARG(out.dtype() == in.dtype() && out.shape() == want, "dist::reduce_scatter: out = ",
               out.str(), ": must be ", dtype_name(in.dtype()), want.str(), " (in = ", in.str(),
               " split along dim 0 over ", comm.size(), " ranks)");
  check_fits(comm, "reduce_scatter", in, "in", in.numel());
  issue(comm, Collective::reduce_scatter, in, out, out.numel());
}

Tensor reduce_scatter(const Communicator& comm, const Tensor& in) {
  const UpdateErrorGuard guard(current_stream(comm.device()));
  check_tensor(comm, "reduce_scatter", in, "in", true);
  check_not_updating(comm, "reduce_scatter");
  NG_CHECK_ARG(in.dim() >= 1 && in.size(0) % comm.size() == 0, "dist::reduce_scatter: in = ", in.str(),
               ": dim 0 must be a multiple of the communicator size ", comm.size());
  Shape want = in.shape();
  want[0] = in.size(0) / comm.size();
  Tensor out = empty(want, in.dtype(), in.device());
  reduce_scatter_out(comm, in, out);
  return out;
}

}  // namespace npugraph::dist
