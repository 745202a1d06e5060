// The CUDA backend against the seam (docs/backends.md): declarations only, no implementation yet.
// It proves the seam fits a device whose memory is not the host's and whose graphs are its own:
// every pure virtual of Backend and GraphBackend has its CUDA counterpart here, and
// tests/backends/test_backend_seam.cpp checks that this class is complete (not abstract).
//
// Plan, per piece of the seam:
//   memory   cudaMalloc / cudaFree blocks under the runtime's caching MemPool (stream-ordered reuse
//            and graph-private pools come from MemPool, as on the cpu); copy = cudaMemcpy; pinned
//            host staging for parameter blocks.
//   queues   one cudaStream_t per stream; kernel tasks call KernelDef::cuda on it; fill / copy are
//            cudaMemsetAsync / cudaMemcpyAsync; host functions cudaLaunchHostFunc; ExternalEvent a
//            device flag written and waited on with stream memory operations.
//   graphs   instantiate() builds a cudaGraph from the ExecGraph's node table (one kernel node per
//            task, edges as recorded) rather than from stream capture, so each task group's kernel
//            nodes are known by construction; every grouped task reads its parameters from a
//            device-resident block. Stream-ordered update = a copy of the new block on the update
//            stream (a patch task); launch-ordered update = cudaGraphExecKernelNodeSetParams
//            (published()). Replays launch in the graph's launch order (Note [Replay order]).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "graph/graph_backend.hpp"
#include "runtime/backend.hpp"

struct CUstream_st;      // cudaStream_t
struct CUgraphExec_st;   // cudaGraphExec_t
struct CUgraphNode_st;   // cudaGraphNode_t

namespace npugraph::detail::cuda {

// A stream's queue: tasks become work on one CUDA stream, in order.
class CudaStreamQueue final : public StreamQueue {
 public:
  CudaStreamQueue(int device, const std::shared_ptr<StreamState>& owner);
  ~CudaStreamQueue() override;
  void submit(Task&& task) override;
  std::uint64_t submitted() const override;
  std::uint64_t completed() const override;
  bool wait_completed(std::uint64_t target, std::chrono::steady_clock::time_point deadline) override;
  void shutdown() noexcept override;

 private:
  CUstream_st* stream_ = nullptr;
  StreamState* owner_;
};

// The executable form of one ExecGraph on a device.
struct CudaGraph final : BackendGraph {
  CUgraphExec_st* exec = nullptr;
  std::vector<CUgraphNode_st*> kernel_nodes;  // per ExecGraph node (null for non-kernel nodes)
  std::vector<void*> param_blocks;            // per grouped task: its device-resident parameters
};

class CudaBackend final : public Backend, public GraphBackend {
 public:
  explicit CudaBackend(int device);
  std::string_view name() const noexcept override;  // "cuda"
  const BackendCaps& caps() const noexcept override;
  int default_num_threads() const noexcept override;
  void* allocate(std::size_t nbytes) noexcept override;
  void deallocate(void* p, std::size_t nbytes) noexcept override;
  void copy(void* dst, const void* src, std::size_t nbytes, CopyKind kind) override;
  void memset(void* dst, int value, std::size_t nbytes) override;
  std::unique_ptr<StreamQueue> create_queue(const std::shared_ptr<StreamState>& owner) override;
  bool has_kernel(const KernelDef& kernel) const noexcept override { return kernel.cuda != nullptr; }

  std::unique_ptr<BackendGraph> instantiate(ExecGraph& graph) override;
  void published(ExecGraph& graph, std::span<const std::uint32_t> groups) override;

 private:
  int device_;
};

}  // namespace npugraph::detail::cuda
