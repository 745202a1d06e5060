// The collectives' parameter block (one layout for all_reduce, all_gather, reduce_scatter) and the
// kernel functions that read it (collective_kernel.cpp): docs/adding_an_op.md's four pieces, with
// the plan in collectives.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "npugraph/dtype.hpp"
#include "npugraph/kernel.hpp"

namespace npugraph::dist {

struct CommState;

enum class Collective : std::uint8_t { all_reduce, all_gather, reduce_scatter };

// An update may point in and out at other memory of the same extent; the communicator, the kind,
// the dtype and the count are fixed at capture. The launch passes the communicator as a use, so
// `comm` stays valid as long as the block may run (docs/semantics.md §10).
struct CollectiveParams {
  CommState* comm;
  const void* in;
  void* out;
  // all_reduce: elements of in and out; all_gather: elements of in (out: size times that);
  // reduce_scatter: elements of out (in: size times that).
  std::int64_t count;
  DType dtype;
  Collective kind;
};
static_assert(std::is_trivially_copyable_v<CollectiveParams>);

const char* collective_name(Collective kind);
void collective_cpu(const void* params, std::size_t size, const ExecContext& ctx);
#if NPUGRAPH_HAVE_NCCL
// The CUDA slot: NCCL on the backend's stream (nccl_kernel.cpp).
void collective_cuda(const void* params, std::size_t size, const void* device_params, void* stream);
#endif
std::string check_collective_update(std::span<const std::byte> captured,
                                    std::span<const std::byte> updated);
std::string describe_collective(std::span<const std::byte> params, std::span<const std::byte> captured);

}  // namespace npugraph::dist
