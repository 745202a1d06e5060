// Which backend serves a device (docs/backends.md). The one place that knows every backend.
#include "backends/cpu/cpu_backend.hpp"
#include "npugraph/error.hpp"

namespace npugraph::detail {
namespace {

[[noreturn]] void no_backend(Device device) {
  NG_THROW(UnsupportedError, "device = ", device.str(),
           ": this build has no backend for it (available: cpu)");
}

}  // namespace

Backend& backend_for(Device device) {
  if (device.is_cpu()) return cpu_backend();
  no_backend(device);
}

GraphBackend& graph_backend_for(Device device) {
  if (device.is_cpu()) return cpu_backend();
  no_backend(device);
}

void require(const Backend& backend, bool BackendCaps::*cap, const char* what) {
  NG_CHECK_AS(UnsupportedError, backend.caps().*cap, what, ": the ", backend.name(),
              " backend does not support it");
}

}  // namespace npugraph::detail
