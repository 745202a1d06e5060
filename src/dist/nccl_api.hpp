// The NCCL functions npugraph::dist calls, loaded from libnccl at run time (builds with NCCL only).
//
// Note [NCCL is loaded when first used]: libnccl is a 200 MB shared library with no static form in
// the CUDA toolkit. Linked at build time, every binary with npugraph::dist (the tests, the Python
// module, npugraph-generate) would fail to start where it is not installed, although only
// Communicator::nccl needs it; the project links cudart statically for the same reason. So nccl.h
// gives the types and the signatures, and the library is dlopen'ed once, by the first
// Communicator::nccl that got past its device check: "libnccl.so.2" on the loader's path, then the
// one CMake found (NPUGRAPH_NCCL_LIBRARY_PATH). A missing library or symbol is an UnsupportedError
// naming it and dlerror's text.
#pragma once

#if NPUGRAPH_HAVE_NCCL

#include <nccl.h>

#include <initializer_list>

namespace npugraph::dist::impl {

struct NcclApi {
  decltype(&::ncclGetUniqueId) get_unique_id;
  decltype(&::ncclCommInitRankConfig) comm_init_rank_config;
  decltype(&::ncclCommGetAsyncError) comm_get_async_error;
  decltype(&::ncclCommAbort) comm_abort;
  decltype(&::ncclGetErrorString) get_error_string;
  decltype(&::ncclGetLastError) get_last_error;
  decltype(&::ncclAllReduce) all_reduce;
  decltype(&::ncclAllGather) all_gather;
  decltype(&::ncclReduceScatter) reduce_scatter;
};

// Loads libnccl on the first call (thread-safe); throws UnsupportedError when it cannot.
const NcclApi& nccl();
// Loads the first of `paths` that dlopen accepts and binds every function (what nccl() does once).
NcclApi load_nccl(std::initializer_list<const char*> paths);

}  // namespace npugraph::dist::impl

#endif  // NPUGRAPH_HAVE_NCCL
