// libnccl loaded at run time (Note [NCCL is loaded when first used], nccl_api.hpp).
#if NPUGRAPH_HAVE_NCCL

#include "dist/nccl_api.hpp"

#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <string>

#include "npugraph/error.hpp"

namespace npugraph::dist::impl {
namespace {

template <class Fn>
void bind(void* lib, const char* path, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn) {
    const char* err = dlerror();
    NG_THROW(UnsupportedError, "dist: NCCL library ", path, " has no ", name, " (", err ? err : "dlsym failed",
             "): npugraph::dist was built against NCCL ", NCCL_MAJOR, ".", NCCL_MINOR, "; install that or newer");
  }
}

}  // namespace

NcclApi load_nccl(std::initializer_list<const char*> tried) {
  void* lib = nullptr;
  std::string errors;
  const char* path = nullptr;
  for (const char* p : tried) {
    lib = dlopen(p, RTLD_NOW | RTLD_GLOBAL);
    if (lib) {
      path = p;
      break;
    }
    const char* err = dlerror();
    errors += npugraph::detail::cat(errors.empty() ? "" : "; ", p, ": ", err ? err : "not loadable");
  }
  if (!lib)
    NG_THROW(UnsupportedError, "dist: the NCCL library could not be loaded (", errors, "): install NCCL ",
             NCCL_MAJOR, ".", NCCL_MINOR, " or newer, or put libnccl.so.2 on LD_LIBRARY_PATH");
  NcclApi api{};
  bind(lib, path, "ncclGetUniqueId", api.get_unique_id);
  bind(lib, path, "ncclCommInitRankConfig", api.comm_init_rank_config);
  bind(lib, path, "ncclCommGetAsyncError", api.comm_get_async_error);
  bind(lib, path, "ncclCommAbort", api.comm_abort);
  bind(lib, path, "ncclGetErrorString", api.get_error_string);
  bind(lib, path, "ncclGetLastError", api.get_last_error);
  bind(lib, path, "ncclAllReduce", api.all_reduce);
  bind(lib, path, "ncclAllGather", api.all_gather);
  bind(lib, path, "ncclReduceScatter", api.reduce_scatter);
  return api;  // the library stays loaded for the process's life
}

const NcclApi& nccl() {
  static std::atomic<const NcclApi*> ready{nullptr};
  if (const NcclApi* p = ready.load(std::memory_order_acquire)) [[likely]] return *p;
  static std::mutex mu;
  static NcclApi api{};
  std::lock_guard lock(mu);
  if (!ready.load(std::memory_order_relaxed)) {  // a failed load is tried again (and says why again)
    api = load_nccl({"libnccl.so.2", NPUGRAPH_NCCL_LIBRARY_PATH});
    ready.store(&api, std::memory_order_release);
  }
  return api;
}

}  // namespace npugraph::dist::impl

#endif  // NPUGRAPH_HAVE_NCCL
