// Which backend serves a device (docs/backends.md). The one place that knows every backend.
#include "backends/cpu/cpu_backend.hpp"
#include "npugraph/device.hpp"
#include "npugraph/error.hpp"
#if NPUGRAPH_HAVE_CUDA
#include "backends/cuda/cuda_backend.hpp"
#endif

namespace npugraph::detail {
namespace {

#if NPUGRAPH_HAVE_CUDA
constexpr std::string_view kCompiled[] = {"cpu", "cuda"};
#else
constexpr std::string_view kCompiled[] = {"cpu"};
#endif

#if !NPUGRAPH_HAVE_CUDA
[[noreturn]] void no_backend(Device device) {
  NG_THROW(UnsupportedError, "device = ", device.str(),
           ": this build has no backend for it (available: cpu; the cuda backend is built only "
           "with the CUDA toolkit, cmake -DNPUGRAPH_CUDA=ON)");
}
#endif

}  // namespace

std::span<const std::string_view> compiled_backends() noexcept { return kCompiled; }

int cuda_device_count() noexcept {
#if NPUGRAPH_HAVE_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

Backend& backend_for(Device device) {
  if (device.is_cpu()) return cpu_backend();
#if NPUGRAPH_HAVE_CUDA
  return cuda::cuda_backend(device.index());  // throws naming the device when there is no GPU
#else
  no_backend(device);
#endif
}

GraphBackend& graph_backend_for(Device device) {
  if (device.is_cpu()) return cpu_backend();
#if NPUGRAPH_HAVE_CUDA
  return cuda::cuda_backend(device.index());
#else
  no_backend(device);
#endif
}

void require(const Backend& backend, bool BackendCaps::*cap, const char* what) {
  NG_CHECK_AS(UnsupportedError, backend.caps().*cap, what, ": the ", backend.name(),
              " backend does not support it");
}

}  // namespace npugraph::detail
