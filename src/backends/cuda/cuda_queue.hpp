// The CUDA stream queue's state (cuda_queue.cpp), shared with the graph replay (cuda_graph.cpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/cuda_common.hpp"
#include "runtime/sync_objects.hpp"
#include "runtime/task.hpp"

namespace npugraph::detail::cuda {

// Eager kernels' parameter blocks on their way to the device: each launch copies its block into a
// pinned host slot and from there, on the stream, into the matching device slot, which its kernels
// read (Note [CUDA kernels read the device block]). The ring restarts after the stream has been
// synchronized (at the end of every batch, or when it is full).
struct ParamRing {
  static constexpr std::size_t kBytes = std::size_t{1} << 20;
  static constexpr std::size_t kAlign = 256;
  unsigned char* host = nullptr;    // pinned (cudaMallocHost)
  unsigned char* device = nullptr;  // cudaMalloc
  std::size_t used = 0;
};

struct CudaStreamQueue::Impl {
  Impl(int device_index, StreamState* owner_state) : device(device_index), owner(owner_state) {}

  void run();                       // the worker
  void execute(Task& task);         // issues one task (may synchronize)
  // Issues a task that is not a kernel (work runs with `hold`, else holding nothing: a replay run
  // by a graph's node); false: a cancelled ExternalEvent wait.
  bool execute_builtin(TaskKind kind, const std::byte* params, void* object, std::uint64_t value,
                       const WaitSite& site, WorkHold* hold = nullptr);
  // Issues a kernel: its block staged to the device, then the launcher.
  void launch_kernel(const KernelDef& kernel, const std::byte* params, std::size_t size);
  // Waits for everything issued on the stream; throws StateError with CUDA's error.
  void sync();

  const int device;
  StreamState* const owner;
  cudaStream_t stream = nullptr;
  ParamRing ring;

  std::mutex mu;  // guards pending, stop
  std::condition_variable cv;
  std::vector<Task> pending;
  bool stop = false;
  std::atomic<std::uint64_t> submitted{0};
  std::atomic<std::uint64_t> completed{0};
  std::mutex done_mu;
  std::condition_variable done_cv;
  std::thread thread;
};

// Runs one replay of `graph` on the queue's stream (CudaGraph::replay, cuda_graph.cpp); pin and
// ticket as for the cpu (empty for a graph launched by a graph's node).
void run_cuda_graph(ExecGraph& graph, TablePin pin, LaunchTicket ticket, CudaStreamQueue::Impl& q);

}  // namespace npugraph::detail::cuda
