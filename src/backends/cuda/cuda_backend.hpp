// The CUDA backend against the seam (docs/backends.md, "The CUDA backend"). Built only with the
// toolkit (cmake/Cuda.cmake: NPUGRAPH_CUDA); this header needs no CUDA header, so the registry and
// the tests include it in every build, and tests/backends/test_backend_seam.cpp checks that the
// classes are complete (no pure virtual left).
//
// What each piece does (the Notes in the .cpp files say why):
//   devices  cuda:N is served when cudaGetDeviceCount finds N+1 devices; otherwise creating a
//            stream or a tensor on it throws UnsupportedError naming the device (cuda_backend.cpp).
//   memory   cudaMalloc blocks under the runtime's caching MemPool (stream-ordered reuse and
//            graph-private pools come from MemPool, as on the cpu); copies cudaMemcpy; pinned host
//            staging for parameter blocks (cuda_params.cpp).
//   queues   a host worker per stream issues its tasks onto one cudaStream_t and synchronizes it
//            wherever the host must observe completion (Note [Host-driven CUDA queue],
//            cuda_queue.cpp); kernel tasks call KernelDef::cuda with a device copy of their block.
//   graphs   instantiate() captures the ExecGraph's node table into a cudaGraphExec (one node per
//            task, in topological order) when every node is device work, and otherwise replays by
//            walking the table on the worker; either way every kernel reads its parameters from a
//            device-resident block, and a replay uploads the sets it pins into the blocks of its
//            groups, in stream order, before the launch (Note [CUDA replay binds sets],
//            cuda_graph.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "graph/graph_backend.hpp"
#include "runtime/backend.hpp"

struct CUstream_st;     // cudaStream_t
struct CUevent_st;      // cudaEvent_t
struct CUgraphExec_st;  // cudaGraphExec_t

namespace npugraph::detail::cuda {

// CUDA devices the driver reports (0 without a GPU or a driver); the first call asks, once.
int device_count() noexcept;
// Why there are none: cudaGetDeviceCount's error ("cudaErrorNoDevice: no CUDA-capable device is
// detected"), or empty.
const std::string& device_count_error() noexcept;

// A stream's queue: a host worker issuing the stream's tasks onto one CUDA stream, in order.
class CudaStreamQueue final : public StreamQueue {
 public:
  CudaStreamQueue(int device, const std::shared_ptr<StreamState>& owner);
  ~CudaStreamQueue() override;
  void submit(Task&& task) override;
  std::uint64_t submitted() const override;
  std::uint64_t completed() const override;
  bool wait_completed(std::uint64_t target, std::chrono::steady_clock::time_point deadline) override;
  void shutdown() noexcept override;

  struct Impl;
  Impl& impl() { return *impl_; }  // a replay on this queue's stream (CudaGraph::replay)

 private:
  std::unique_ptr<Impl> impl_;
};

// The executable form of one ExecGraph on a device (cuda_graph.cpp).
struct CudaGraph final : BackendGraph {
  explicit CudaGraph(int device_index) : device(device_index) {}
  ~CudaGraph() override;
  void replay(ExecGraph& graph, TablePin pin, LaunchTicket ticket, StreamState& stream) override;
  const int device;
  CUgraphExec_st* exec = nullptr;        // null: replays walk the node table
  void* device_blocks = nullptr;         // every kernel node's parameter block, device-resident
  void* staging = nullptr;               // pinned host mirror of device_blocks (uploads)
  std::size_t bytes = 0;
  std::vector<std::size_t> offset;       // per ExecGraph node: its block's offset (kernel nodes)
  std::vector<std::uint64_t> bound;      // per group: the stamp of the set in its blocks now
  std::vector<bool> bound_valid;
  CUevent_st* last_replay = nullptr;     // recorded after each replay: the next one waits on it
  std::mutex mu;                         // one replay at a time binds and launches
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

  int device() const { return device_; }

 private:
  int device_;
};

// The backend of cuda:`index`; throws UnsupportedError naming the device when this machine has
// no such CUDA device (cuda_backend.cpp). Defined only in builds with the CUDA backend.
CudaBackend& cuda_backend(int index);

}  // namespace npugraph::detail::cuda
