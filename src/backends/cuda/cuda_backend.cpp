// The CUDA backend: devices, memory and capabilities (docs/backends.md, "The CUDA backend").
#include "backends/cuda/cuda_backend.hpp"

#include <array>
#include <mutex>

#include "backends/cuda/cuda_common.hpp"
#include "npugraph/error.hpp"

namespace npugraph::detail::cuda {
namespace {

struct DeviceCount {
  int count = 0;
  std::string error;
};

// Note [No CUDA device is an error, not a crash]
// Every build with the backend registers "cuda", GPU or not. cudaGetDeviceCount is asked once; on
// a machine without a GPU (or without a driver: cudaErrorInsufficientDriver, cudaErrorNoDevice) it
// fails, we remember why, and backend_for(cuda:N) throws UnsupportedError naming the device and the
// reason, before anything touches CUDA again. Nothing in the cpu backend ever calls CUDA.
const DeviceCount& counted() noexcept {
  static const DeviceCount c = [] {
    DeviceCount d;
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      d.error = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
      n = 0;
    }
    d.count = n;
    return d;
  }();
  return c;
}

constexpr int kMaxDevices = 64;

}  // namespace

int device_count() noexcept { return counted().count; }
const std::string& device_count_error() noexcept { return counted().error; }

CudaBackend& cuda_backend(int index) {
  const DeviceCount& c = counted();
  if (c.count == 0)
    NG_THROW(UnsupportedError, "device = cuda:", index, ": no CUDA device is present (cudaGetDeviceCount: ",
             c.error.empty() ? std::string("0 devices") : c.error,
             "); this build has the cuda backend, but the machine has no usable GPU");
  NG_CHECK_AS(UnsupportedError, index >= 0 && index < c.count && index < kMaxDevices, "device = cuda:",
              index, ": no such CUDA device (this machine has ", c.count, ": cuda:0 to cuda:", c.count - 1, ")");
  static std::array<std::unique_ptr<CudaBackend>, kMaxDevices> backends;
  static std::mutex mu;
  std::lock_guard lock(mu);
  auto& b = backends[static_cast<std::size_t>(index)];
  if (!b) b = std::make_unique<CudaBackend>(index);
  return *b;
}

CudaBackend::CudaBackend(int device) : device_(device) {}

std::string_view CudaBackend::name() const noexcept { return "cuda"; }

// Note [CUDA capabilities]
// Everything the runtime asks for is served: graphs and task update by cuda_graph.cpp; Event timing
// and ExternalEvent by the host-driven queue (Note [Host-driven CUDA queue]): a record completes on
// the host after the stream's prior work finished on the device, so elapsed_time measures device
// work plus one synchronize, and an ExternalEvent wait holds the stream's later work back on the
// host. Device-side flags with stream memory operations (cuStreamWaitValue32) are not used yet.
const BackendCaps& CudaBackend::caps() const noexcept {
  static constexpr BackendCaps caps{.graphs = true, .task_update = true, .external_events = true,
                                    .event_timing = true};
  return caps;
}

// Kernels do not run on host threads: a stream's "threads" are only what ExecContext would report.
int CudaBackend::default_num_threads() const noexcept { return 1; }

// cudaMalloc aligns to 256 bytes (the seam asks for 64). Freed blocks return to cudaFree only when
// the caching MemPool releases them (empty_cache, a graph pool's end): cudaFree synchronizes the
// device, so it must stay off the hot path.
void* CudaBackend::allocate(std::size_t nbytes) noexcept {
  DeviceGuard guard(device_);
  void* p = nullptr;
  if (cudaMalloc(&p, nbytes ? nbytes : 1) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return p;
}

void CudaBackend::deallocate(void* p, std::size_t) noexcept {
  if (!p) return;
  DeviceGuard guard(device_);
  (void)cudaFree(p);  // at process exit the driver may be gone already: nothing to do then
  (void)cudaGetLastError();
}

// Synchronous by contract: cudaMemcpy with cudaMemcpyDefault (unified addressing tells host from
// device memory), and a memset followed by a device synchronize (cudaMemset may return early).
void CudaBackend::copy(void* dst, const void* src, std::size_t nbytes, CopyKind) {
  if (!nbytes) return;
  DeviceGuard guard(device_);
  check(cudaMemcpy(dst, src, nbytes, cudaMemcpyDefault), device_, "cudaMemcpy");
}

void CudaBackend::memset(void* dst, int value, std::size_t nbytes) {
  if (!nbytes) return;
  DeviceGuard guard(device_);
  check(cudaMemset(dst, value, nbytes), device_, "cudaMemset");
  check(cudaDeviceSynchronize(), device_, "cudaDeviceSynchronize");
}

std::unique_ptr<StreamQueue> CudaBackend::create_queue(const std::shared_ptr<StreamState>& owner) {
  return std::make_unique<CudaStreamQueue>(device_, owner);
}

}  // namespace npugraph::detail::cuda
