// The CUDA backend's stream queue.
//
// Note [Host-driven CUDA queue]
// A stream is a host worker thread plus one cudaStream_t (non-blocking, so it never serializes with
// the legacy default stream). The worker takes the stream's tasks in order and issues them: kernels
// through KernelDef::cuda, fill and copy as cudaMemsetAsync / cudaMemcpyAsync. Everything the host
// must observe — an Event record, an ExternalEvent record, a host function, a stream-ordered
// update's install, the end of a batch (completed(), which synchronize() waits on) — first
// synchronizes the CUDA stream. Waits (Event wait, ExternalEvent wait) block the worker, so later
// work on the stream is not issued before the wait is satisfied. The runtime's events, stalls and
// diagnostics (host-side, docs/semantics.md) thereby hold unchanged on a GPU, at the price of a
// host round trip at each such point; device-side events and stream memory operations
// (cudaStreamWaitEvent, cuStreamWaitValue32) would remove it and are the next step.
#include <chrono>
#include <cstring>
#include <functional>

#include "backends/cuda/cuda_queue.hpp"
#include "runtime/stream_state.hpp"

namespace npugraph::detail::cuda {
namespace {

// Set on a worker whose queue was destroyed by the worker itself (a task held the stream's last
// reference): it leaves without touching the queue again (as the cpu queue, Note [Worker lifetime]).
thread_local bool t_destroyed_own_queue = false;

bool uniform_bytes(std::uint64_t pattern, std::size_t elem_size) {
  const auto first = static_cast<unsigned char>(pattern & 0xff);
  for (std::size_t i = 1; i < elem_size; ++i)
    if (static_cast<unsigned char>((pattern >> (8 * i)) & 0xff) != first) return false;
  return true;
}

}  // namespace

void CudaStreamQueue::Impl::sync() {
  check(cudaStreamSynchronize(stream), device, "cudaStreamSynchronize");
  ring.used = 0;
}

void CudaStreamQueue::Impl::launch_kernel(const KernelDef& kernel, const std::byte* params, std::size_t size) {
  const std::size_t need = (size + ParamRing::kAlign - 1) / ParamRing::kAlign * ParamRing::kAlign;
  NG_CHECK_ARG(need <= ParamRing::kBytes, "launch: kernel '", kernel.name, "': parameter block of ", size,
               " bytes: the cuda backend takes blocks of at most ", ParamRing::kBytes, " bytes");
  if (ring.used + need > ParamRing::kBytes) sync();  // the ring's slots are free once the stream ran
  unsigned char* host = ring.host + ring.used;
  unsigned char* dev = ring.device + ring.used;
  ring.used += need;
  if (size) {
    std::memcpy(host, params, size);
    check(cudaMemcpyAsync(dev, host, size, cudaMemcpyHostToDevice, stream), device, "cudaMemcpyAsync");
  }
  kernel.cuda(params, size, dev, stream);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    NG_THROW(StateError, "cuda:", device, ": kernel '", kernel.name, "' failed to launch: ",
             cudaGetErrorName(err), ": ", cudaGetErrorString(err));
}

bool CudaStreamQueue::Impl::execute_builtin(TaskKind kind, const std::byte* params, void* object,
                                            std::uint64_t value, const WaitSite& site, WorkHold* hold) {
  switch (kind) {
    case TaskKind::fill: {
      FillArgs a;
      std::memcpy(&a, params, sizeof a);
      if (uniform_bytes(a.pattern, a.elem_size))
        check(cudaMemsetAsync(a.dst, static_cast<int>(a.pattern & 0xff), a.count * a.elem_size, stream),
              device, "cudaMemsetAsync");
      else
        check(fill_pattern(a.dst, a.count, a.elem_size, a.pattern, stream), device, "fill kernel");
      return true;
    }
    case TaskKind::copy: {
      CopyArgs a;
      std::memcpy(&a, params, sizeof a);
      if (a.nbytes)
        check(cudaMemcpyAsync(a.dst, a.src, a.nbytes, cudaMemcpyDefault, stream), device, "cudaMemcpyAsync");
      return true;
    }
    case TaskKind::host_fn:
      sync();
      (*static_cast<std::function<void()>*>(object))();
      return true;
    case TaskKind::event_record:
      sync();
      event_complete(*static_cast<EventState*>(object), value, *site.stream);
      return true;
    case TaskKind::event_wait: event_block(*static_cast<EventState*>(object), value, *site.stream); return true;
    case TaskKind::ext_record:
      sync();
      external_record(*static_cast<ExternalEventState*>(object));
      return true;
    case TaskKind::ext_wait: return external_wait(*static_cast<ExternalEventState*>(object), site);
    case TaskKind::ext_reset: external_reset(*static_cast<ExternalEventState*>(object)); return true;
    case TaskKind::work: {  // from a graph's node (a replay, holding nothing) or from execute()
      TaskWork& work = work_of(object);
      // A step (an update's install, with the ExternalEvent records it carries) follows the
      // stream's work; a launch (a replay) issues its own work in stream order.
      if (work.shape() == TaskWork::Shape::step) sync();
      WorkHold none;
      work.run(hold ? *hold : none, *site.stream);
      return true;
    }
    case TaskKind::kernel: break;
  }
  NG_THROW(InternalError, "cuda execute_builtin called for a kernel task");
}

void CudaStreamQueue::Impl::execute(Task& task) {
  try {
    if (task.kind == TaskKind::kernel)
      launch_kernel(*task.kernel, task.params.data(), task.params.size());
    else
      execute_builtin(task.kind, task.params.data(), task.object.get(), task.value, WaitSite{owner}, &task.hold);
  } catch (const std::exception& e) {
    owner->report_error(std::string("task '") + task_name(task) + "' failed: " + e.what());
  } catch (...) {
    owner->report_error(std::string("task '") + task_name(task) + "' failed: unknown exception");
  }
}

void CudaStreamQueue::Impl::run() {
  (void)cudaSetDevice(device);
  std::vector<Task> batch;
  std::uint64_t taken = 0;
  for (;;) {
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return stop || !pending.empty(); });
      if (pending.empty()) return;  // stopped with nothing left
      batch.swap(pending);
    }
    const std::uint64_t first = taken;
    taken += batch.size();
    const std::uint64_t done = batch.size();
    // At process exit the memory queued work reads (and the CUDA driver) may be gone: dropped.
    if (!runtime_exiting()) {
      for (std::size_t i = 0; i < batch.size(); ++i) {
        owner->executing = first + i;
        execute(batch[i]);
      }
      try {
        sync();  // completed() means done on the device
      } catch (const std::exception& e) {
        owner->report_error(std::string("stream work failed on the device: ") + e.what());
      }
    }
    batch.clear();  // may destroy the stream, and this queue, on this thread
    if (t_destroyed_own_queue) return;
    completed.fetch_add(done, std::memory_order_seq_cst);
    { std::lock_guard lock(done_mu); }
    done_cv.notify_all();
  }
}

CudaStreamQueue::CudaStreamQueue(int device, const std::shared_ptr<StreamState>& owner)
    : impl_(std::make_unique<Impl>(device, owner.get())) {
  DeviceGuard guard(device);
  Impl& q = *impl_;
  check(cudaStreamCreateWithFlags(&q.stream, cudaStreamNonBlocking), device, "cudaStreamCreateWithFlags");
  void* host = nullptr;
  void* dev = nullptr;
  cudaError_t err = cudaMallocHost(&host, ParamRing::kBytes);
  if (err == cudaSuccess) err = cudaMalloc(&dev, ParamRing::kBytes);
  if (err != cudaSuccess) {
    if (host) (void)cudaFreeHost(host);
    (void)cudaStreamDestroy(q.stream);
    check(err, device, "allocating a stream's parameter staging");
  }
  q.ring.host = static_cast<unsigned char*>(host);
  q.ring.device = static_cast<unsigned char*>(dev);
  q.thread = std::thread([&q] { q.run(); });
}

CudaStreamQueue::~CudaStreamQueue() {
  shutdown();
  if (t_destroyed_own_queue) return;  // leaked on purpose: the worker is still on its way out
  if (!runtime_exiting()) {
    DeviceGuard guard(impl_->device);
    (void)cudaFreeHost(impl_->ring.host);
    (void)cudaFree(impl_->ring.device);
    (void)cudaStreamDestroy(impl_->stream);
  }
}

void CudaStreamQueue::submit(Task&& task) {
  Impl& q = *impl_;
  {
    std::lock_guard lock(q.mu);
    NG_CHECK_STATE(!q.stop, q.owner->str(), " is shut down: no more work can be issued on it");
    // A replay takes its turn in its graph's launch order (Note [Replay order]).
    if (task.kind == TaskKind::work) work_of(task.object.get()).accept(task.hold, *q.owner);
    q.pending.push_back(std::move(task));
    q.submitted.fetch_add(1, std::memory_order_release);
  }
  q.cv.notify_one();
}

std::uint64_t CudaStreamQueue::submitted() const { return impl_->submitted.load(std::memory_order_acquire); }
std::uint64_t CudaStreamQueue::completed() const { return impl_->completed.load(std::memory_order_acquire); }

bool CudaStreamQueue::wait_completed(std::uint64_t target, std::chrono::steady_clock::time_point deadline) {
  Impl& q = *impl_;
  std::unique_lock lock(q.done_mu);
  return q.done_cv.wait_until(lock, deadline, [&] { return q.completed.load() >= target; });
}

void CudaStreamQueue::shutdown() noexcept {
  if (!impl_) return;  // released by the worker that destroyed its own stream
  Impl& q = *impl_;
  {
    std::lock_guard lock(q.mu);
    if (q.stop) return;
    q.stop = true;
  }
  q.cv.notify_one();
  if (!q.thread.joinable()) return;
  if (q.thread.get_id() == std::this_thread::get_id()) {
    t_destroyed_own_queue = true;
    q.thread.detach();
    (void)impl_.release();  // the worker still runs on it; it returns without another touch
    return;
  }
  q.thread.join();
}

}  // namespace npugraph::detail::cuda
