// The cpu backend: host memory, a worker thread per stream, kernels on the shared compute pool,
// graphs walked by the stream's worker (docs/backends.md).
#include "backends/cpu/cpu_backend.hpp"

#include <cstdlib>
#include <cstring>

#include <sys/mman.h>

#include "backends/cpu/compute_pool.hpp"
#include "backends/cpu/run_state.hpp"
#include "graph/exec_graph.hpp"

namespace npugraph::detail {
namespace {

constexpr std::size_t kAlignment = 64;
// Blocks of 2 MiB and more are 2 MiB-aligned and asked to be backed by transparent huge pages:
// attention streams KV caches of tens of MiB, and with 4 KiB pages every page boundary costs a TLB
// miss and stops the hardware prefetchers (the kernel may still decline; nothing depends on it).
constexpr std::size_t kHugePage = std::size_t{2} << 20;

}  // namespace

std::string_view CpuBackend::name() const noexcept { return "cpu"; }

const BackendCaps& CpuBackend::caps() const noexcept {
  static constexpr BackendCaps caps{.graphs = true, .task_update = true, .external_events = true,
                                    .event_timing = true};
  return caps;
}

int CpuBackend::default_num_threads() const noexcept { return hardware_threads(); }

void* CpuBackend::allocate(std::size_t size) noexcept {
  if (size < kHugePage) return std::aligned_alloc(kAlignment, (size + kAlignment - 1) / kAlignment * kAlignment);
  void* p = nullptr;
  if (posix_memalign(&p, kHugePage, size) != 0) return nullptr;
#ifdef MADV_HUGEPAGE
  madvise(p, size / kHugePage * kHugePage, MADV_HUGEPAGE);  // whole huge pages only
#endif
  return p;
}

void CpuBackend::deallocate(void* p, std::size_t) noexcept { std::free(p); }

void CpuBackend::copy(void* dst, const void* src, std::size_t nbytes, CopyKind) {
  if (nbytes) std::memmove(dst, src, nbytes);
}

void CpuBackend::memset(void* dst, int value, std::size_t nbytes) {
  if (nbytes) std::memset(dst, value, nbytes);
}

std::unique_ptr<StreamQueue> CpuBackend::create_queue(const std::shared_ptr<StreamState>& owner) {
  return make_cpu_queue(owner);
}

bool CpuBackend::has_kernel(const KernelDef& kernel) const noexcept { return kernel.cpu != nullptr; }

std::unique_ptr<BackendGraph> CpuBackend::instantiate(ExecGraph& graph) {
  return std::make_unique<CpuGraph>(graph);
}

void CpuBackend::published(ExecGraph&, std::span<const std::uint32_t>) {}

CpuBackend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace npugraph::detail
