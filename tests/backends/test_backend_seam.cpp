// The backend seam (docs/backends.md): the cpu backend is one implementation of the interface; the
// CUDA backend's declarations fit it; capabilities are data, and what a backend lacks throws
// UnsupportedError naming the backend.
#include <gtest/gtest.h>

#include <filesystem>
#include <type_traits>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cuda/cuda_backend.hpp"
#include "npugraph/npugraph.hpp"
#include "runtime/backend.hpp"
#include "support/throws.hpp"

namespace {

namespace ng = npugraph;
namespace nd = npugraph::detail;
using ngtest::throws;

static_assert(std::is_base_of_v<nd::Backend, nd::CpuBackend> &&
              std::is_base_of_v<nd::GraphBackend, nd::CpuBackend> && !std::is_abstract_v<nd::CpuBackend>);
// Every pure virtual of both halves of the seam has a CUDA declaration.
static_assert(std::is_base_of_v<nd::Backend, nd::cuda::CudaBackend> &&
              std::is_base_of_v<nd::GraphBackend, nd::cuda::CudaBackend> &&
              !std::is_abstract_v<nd::cuda::CudaBackend> && !std::is_abstract_v<nd::cuda::CudaStreamQueue>);

TEST(BackendSeam, TheRegistryServesTheCpuAndRefusesOtherDevices) {
  EXPECT_EQ(nd::backend_for(ng::Device::cpu()).name(), "cpu");
  EXPECT_EQ(static_cast<nd::GraphBackend*>(&nd::cpu_backend()), &nd::graph_backend_for(ng::Device::cpu()));
  if (nd::cuda_device_count() > 0) return;  // a GPU serves cuda:0 (tests/backends/test_cuda_backend.cpp)
  // Without the cuda backend: no backend; with it but no GPU: no device (named either way).
  const char* why = NPUGRAPH_BUILT_WITH_CUDA ? "no CUDA device is present" : "no backend";
  EXPECT_TRUE(throws<ng::UnsupportedError>([] { nd::backend_for(ng::Device::cuda(0)); }, {"cuda:0", why}));
  EXPECT_TRUE(throws<ng::UnsupportedError>([] { (void)ng::Stream::create(ng::Device::cuda(1)); },
                                                {"cuda:1", why}));
  EXPECT_TRUE(throws<ng::UnsupportedError>([] { (void)ng::empty({4}, ng::f32, ng::Device::cuda(0)); },
                                                {"cuda:0", why}));
}

TEST(BackendSeam, TheCpuBackendMovesMemoryThroughTheInterface) {
  nd::Backend& b = nd::backend_for(ng::Device::cpu());
  void* p = b.allocate(100);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
  b.memset(p, 0x5a, 100);
  unsigned char host[100];
  b.copy(host, p, 100, nd::CopyKind::device_to_host);
  for (unsigned char c : host) EXPECT_EQ(c, 0x5a);
  b.deallocate(p, 100);
  void* big = b.allocate(std::size_t{4} << 20);  // huge-page aligned
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(big) % (std::size_t{2} << 20), 0u);
  b.deallocate(big, std::size_t{4} << 20);
}

// A backend without a feature: every use site reads the capability and names the backend.
class NoFeatures final : public nd::Backend {
 public:
  std::string_view name() const noexcept override { return "toy"; }
  const nd::BackendCaps& caps() const noexcept override { return caps_; }
  int default_num_threads() const noexcept override { return 1; }
  void* allocate(std::size_t) noexcept override { return nullptr; }
  void deallocate(void*, std::size_t) noexcept override {}
  void copy(void*, const void*, std::size_t, nd::CopyKind) override {}
  void memset(void*, int, std::size_t) override {}
  std::unique_ptr<nd::StreamQueue> create_queue(const std::shared_ptr<nd::StreamState>&) override {
    return nullptr;
  }
  bool has_kernel(const ng::KernelDef&) const noexcept override { return false; }

 private:
  nd::BackendCaps caps_{};
};

TEST(BackendSeam, AMissingCapabilityThrowsUnsupportedErrorNamingTheBackend) {
  NoFeatures toy;
  EXPECT_TRUE(throws<ng::UnsupportedError>(
      [&] { nd::require(toy, &nd::BackendCaps::external_events, "ExternalEvent::record"); },
      {"ExternalEvent::record", "the toy backend does not support it"}));
  EXPECT_TRUE(throws<ng::UnsupportedError>(
      [&] { nd::require(toy, &nd::BackendCaps::graphs, "capture_begin"); }, {"capture_begin", "toy"}));
  EXPECT_NO_THROW(nd::require(nd::backend_for(ng::Device::cpu()), &nd::BackendCaps::graphs, "capture_begin"));
}

TEST(BackendSeam, AKernelWithoutACpuSlotIsRefusedByTheCpuBackend) {
  static const ng::KernelDef cuda_only{.name = "cuda_only",
                                       .cuda = [](const void*, std::size_t, const void*, void*) {}};
  const int dummy = 0;
  EXPECT_TRUE(throws<ng::ArgumentError>([&] { ng::launch(ng::current_stream(), cuda_only, dummy); },
                                             {"cuda_only", "no implementation for the cpu backend"}));
}

// The public count (npugraph/device.hpp) is the registry's: one cpu; for cuda what the CUDA runtime
// reports, which is 0 on a machine without the driver's control device (no GPU, as in CI).
TEST(BackendSeam, DeviceCountIsOneCpuAndTheGpusTheMachineHas) {
  EXPECT_EQ(ng::device_count(ng::DeviceType::cpu), 1);
  EXPECT_EQ(ng::device_count(ng::DeviceType::cuda), nd::cuda_device_count());
  if (!std::filesystem::exists("/dev/nvidiactl")) {
    EXPECT_EQ(ng::device_count(ng::DeviceType::cuda), 0);
  }
}

}  // namespace
