// The cpu backend (docs/backends.md): the runtime's Backend and the graph layer's GraphBackend.
#pragma once

#include "graph/graph_backend.hpp"
#include "runtime/backend.hpp"

namespace npugraph::detail {

class CpuBackend final : public Backend, public GraphBackend {
 public:
  std::string_view name() const noexcept override;
  const BackendCaps& caps() const noexcept override;
  int default_num_threads() const noexcept override;
  void* allocate(std::size_t nbytes) noexcept override;
  void deallocate(void* p, std::size_t nbytes) noexcept override;
  void copy(void* dst, const void* src, std::size_t nbytes, CopyKind kind) override;
  void memset(void* dst, int value, std::size_t nbytes) override;
  std::unique_ptr<StreamQueue> create_queue(const std::shared_ptr<StreamState>& owner) override;
  bool has_kernel(const KernelDef& kernel) const noexcept override;

  std::unique_ptr<BackendGraph> instantiate(ExecGraph& graph) override;
  void published(ExecGraph& graph, std::span<const std::uint32_t> groups) override;
};

CpuBackend& cpu_backend();

// The stream queue (cpu_queue.cpp).
std::unique_ptr<StreamQueue> make_cpu_queue(const std::shared_ptr<StreamState>& owner);

}  // namespace npugraph::detail
