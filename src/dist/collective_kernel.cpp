// The collectives' CPU kernel (collective_params.hpp): one nonblocking MPI call on the block's
// communicator, completed by the deadline-bounded wait (comm_state.hpp). The 16-bit reductions are
// staged in float32: converted, summed by MPI in float32, rounded once.
#include <cstring>

#include "dist/collective_params.hpp"
#include "dist/comm_state.hpp"
#include "npugraph/error.hpp"

namespace npugraph::dist {
namespace {

CollectiveParams read(std::span<const std::byte> b) {
  CollectiveParams p;
  std::memcpy(&p, b.data(), sizeof p);
  return p;
}

template <class T>
void widen(const void* src, float* dst, std::int64_t n) {
  const T* s = static_cast<const T*>(src);
  for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
}
template <class T>
void narrow(const float* src, void* dst, std::int64_t n) {
  T* d = static_cast<T*>(dst);
  for (std::int64_t i = 0; i < n; ++i) d[i] = T(src[i]);
}
void to_f32(DType t, const void* src, float* dst, std::int64_t n) {
  if (t == DType::f16) widen<half>(src, dst, n);
  else widen<bfloat16>(src, dst, n);
}
void from_f32(DType t, const float* src, void* dst, std::int64_t n) {
  if (t == DType::f16) narrow<half>(src, dst, n);
  else narrow<bfloat16>(src, dst, n);
}

std::string what_of(const CollectiveParams& p) {
  return npugraph::detail::cat(collective_name(p.kind), " of ", p.count, " ", dtype_name(p.dtype),
                               " elements");
}

void start(const CollectiveParams& p, CommState& s, const void* in, void* out, MPI_Request* req) {
  const int n = static_cast<int>(p.count);  // the plan checked the byte counts fit an int
  impl::MpiLock lock;
  const char* op = collective_name(p.kind);
  switch (p.kind) {
    case Collective::all_reduce:
      impl::check_mpi(MPI_Iallreduce(in == out ? MPI_IN_PLACE : in, out, n, MPI_FLOAT, MPI_SUM,
                                     s.comm, req), "MPI_Iallreduce", s, op);
      return;
    case Collective::reduce_scatter:
      impl::check_mpi(MPI_Ireduce_scatter_block(in, out, n, MPI_FLOAT, MPI_SUM, s.comm, req),
                      "MPI_Ireduce_scatter_block", s, op);
      return;
    case Collective::all_gather: {
      const int bytes = static_cast<int>(p.count * static_cast<std::int64_t>(dtype_size(p.dtype)));
      const void* own = static_cast<const std::byte*>(out) + static_cast<std::int64_t>(bytes) * s.rank;
      impl::check_mpi(MPI_Iallgather(in == own ? MPI_IN_PLACE : in, bytes, MPI_BYTE, out, bytes,
                                     MPI_BYTE, s.comm, req), "MPI_Iallgather", s, op);
      return;
    }
  }
}

}  // namespace

const char* collective_name(Collective kind) {
  switch (kind) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
  }
  return "collective";
}

void collective_cpu(const void* raw, std::size_t, const ExecContext&) {
  CollectiveParams p;
  std::memcpy(&p, raw, sizeof p);
  CommState& s = *p.comm;
  NG_CHECK_STATE(!s.nccl, "dist ", collective_name(p.kind), " on ", s.str(), ": an NCCL communicator's "
                 "collectives run on its cuda device's streams, not on the cpu");
  const impl::InFlight flight(s, collective_name(p.kind));
  MPI_Request req = MPI_REQUEST_NULL;
  const bool staged = p.kind != Collective::all_gather && p.dtype != DType::f32;
  if (!staged) {
    start(p, s, p.in, p.out, &req);
    impl::wait_for(s, req, what_of(p));
    return;
  }
  // reduce_scatter reads size * count elements and writes count; all_reduce count and count.
  const std::int64_t in_n = p.kind == Collective::reduce_scatter ? p.count * s.size : p.count;
  s.stage_in.resize(static_cast<std::size_t>(in_n));
  s.stage_out.resize(static_cast<std::size_t>(p.count));
  to_f32(p.dtype, p.in, s.stage_in.data(), in_n);
  float* result = p.kind == Collective::all_reduce ? s.stage_in.data() : s.stage_out.data();
  start(p, s, s.stage_in.data(), result, &req);
  impl::wait_for(s, req, what_of(p));
  from_f32(p.dtype, result, p.out, p.count);
}

std::string check_collective_update(std::span<const std::byte> captured,
                                    std::span<const std::byte> updated) {
  if (captured.size() != updated.size()) return "parameter block size changed";
  const CollectiveParams a = read(captured), b = read(updated);
  const char* op = collective_name(a.kind);
  if (a.kind != b.kind)
    return npugraph::detail::cat("the collective is not updatable (captured ", op, ", updated ",
                                 collective_name(b.kind), ")");
  if (a.comm != b.comm)
    return npugraph::detail::cat(op, ": the communicator is not updatable (captured with ",
                                 a.comm->str(), ", updated with another ", b.comm->str(), ")");
  if (a.dtype != b.dtype)
    return npugraph::detail::cat(op, ": dtype is not updatable (captured with ", dtype_name(a.dtype),
                                 ", updated with ", dtype_name(b.dtype), ")");
  if (a.count != b.count)
    return npugraph::detail::cat(op, ": the element count is not updatable (captured with ", a.count,
                                 ", updated with ", b.count, ")");
  // Note [NCCL collectives take host arguments] (nccl_kernel.cpp).
  if (a.comm->nccl && (a.in != b.in || a.out != b.out))
    return npugraph::detail::cat(op, " on ", a.comm->str(), ": in and out are not updatable on NCCL (NCCL "
                                 "takes buffer addresses as host arguments, baked into the CUDA graph at "
                                 "instantiate; captured in ", a.in, " out ", a.out, ", updated in ", b.in,
                                 " out ", b.out, "): update with the captured tensors and copy new data "
                                 "into them");
  return {};
}

std::string describe_collective(std::span<const std::byte> params, std::span<const std::byte>) {
  const CollectiveParams p = read(params);
  return npugraph::detail::cat(what_of(p), " on ", p.comm->str());
}

}  // namespace npugraph::dist
