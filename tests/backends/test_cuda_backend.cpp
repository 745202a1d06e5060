// The CUDA backend checks that need no GPU (docs/backends.md, "The CUDA backend"): whether it is
// compiled and registered by name, the clear error for cuda:N on a machine without a GPU (never a
// crash; the cpu unaffected), and the CUDA slots of the kernels it implements. The GPU tests are
// test_cuda_gpu.cpp. NPUGRAPH_BUILT_WITH_CUDA says what this build should have (cmake/Cuda.cmake).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "npugraph/npugraph.hpp"
#include "runtime/backend.hpp"
#include "support/throws.hpp"

namespace {

namespace ng = npugraph;
namespace nd = npugraph::detail;
using ngtest::throws;

bool compiled(std::string_view name) {
  const auto names = nd::compiled_backends();
  return std::find(names.begin(), names.end(), name) != names.end();
}

TEST(CudaBackend, IsCompiledAndRegisteredByNameExactlyWhenTheBuildSaysSo) {
  EXPECT_TRUE(compiled("cpu"));
  EXPECT_EQ(compiled("cuda"), NPUGRAPH_BUILT_WITH_CUDA == 1)
      << "NPUGRAPH_CUDA chose " << (NPUGRAPH_BUILT_WITH_CUDA ? "to build" : "not to build") << " the backend";
  if (!NPUGRAPH_BUILT_WITH_CUDA) {
    EXPECT_EQ(nd::cuda_device_count(), 0);
  }
}

TEST(CudaBackend, TheElementwiseAndFiaKernelsHaveTheirCudaSlotExactlyInCudaBuilds) {
  for (const ng::KernelDef* k : {&ng::ops::add_kernel(), &ng::ops::scale_kernel(), &ng::ops::noop_kernel(),
                                 &ng::ops::fia_kernel()}) {
    EXPECT_NE(k->cpu, nullptr) << k->name;
    EXPECT_EQ(k->cuda != nullptr, NPUGRAPH_BUILT_WITH_CUDA == 1) << k->name;
  }
}

// The decode engine's ops (issue 15): every kernel npugraph-generate runs has its CUDA slot exactly
// in CUDA builds, so `--device cuda:N` never meets "has no implementation for the cuda backend".
TEST(CudaBackend, EveryDecodeEngineKernelHasItsCudaSlotExactlyInCudaBuilds) {
  namespace ops = ng::ops;
  for (const ng::KernelDef* k :
       {&ops::rms_norm_kernel(), &ops::add_rms_norm_kernel(), &ops::rotary_embedding_kernel(), &ops::swiglu_kernel(),
        &ops::embedding_kernel(), &ops::reshape_and_cache_kernel(), &ops::linear_kernel(),
        &ops::weight_quant_linear_kernel(), &ops::argmax_kernel(), &ops::sample_kernel(), &ops::fia_kernel(),
        &ops::add_kernel()}) {
    EXPECT_NE(k->cpu, nullptr) << k->name;
    EXPECT_EQ(k->cuda != nullptr, NPUGRAPH_BUILT_WITH_CUDA == 1) << k->name;
  }
}

// No GPU: every way to reach cuda:0 throws UnsupportedError naming the device and the reason.
TEST(CudaBackend, WithoutAGpuEveryUseOfCuda0ThrowsNamingTheDevice) {
  if (nd::cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present: the GPU tests cover it";
  const char* why = NPUGRAPH_BUILT_WITH_CUDA ? "no CUDA device is present" : "no backend";
  const ng::Device gpu = ng::Device::cuda(0);
  EXPECT_TRUE(throws<ng::UnsupportedError>([&] { (void)ng::Stream::create(gpu); }, {"device = cuda:0", why}));
  EXPECT_TRUE(throws<ng::UnsupportedError>([&] { (void)ng::Stream::default_stream(gpu); }, {"cuda:0", why}));
  EXPECT_TRUE(throws<ng::UnsupportedError>([&] { (void)ng::current_stream(gpu); },
                                           {"current_stream", "cuda:0", why}));
  EXPECT_TRUE(throws<ng::UnsupportedError>([&] { (void)ng::empty({4}, ng::f32, gpu); }, {"cuda:0", why}));
  EXPECT_TRUE(throws<ng::UnsupportedError>([&] { (void)ng::zeros({4}, ng::f16, gpu); }, {"cuda:0", why}));
  EXPECT_TRUE(throws<ng::UnsupportedError>([&] { (void)ng::graph_pool_handle(gpu); }, {"cuda:0", why}));
  EXPECT_TRUE(throws<ng::UnsupportedError>([&] { (void)ng::Stream::create(ng::Device::cuda(3)); },
                                           {"cuda:3", why}));
  if (NPUGRAPH_BUILT_WITH_CUDA) {  // the reason CUDA gave is kept in the message
    EXPECT_TRUE(throws<ng::UnsupportedError>([&] { (void)ng::Stream::create(gpu); }, {"cudaGetDeviceCount"}));
  }
  // ... and the cpu is untouched by all of it.
  ng::Tensor a = ng::zeros({8}, ng::f32);
  ng::Tensor b = ng::ops::add(a, a);
  ng::current_stream().synchronize();
  EXPECT_EQ(b.data_ptr<float>()[7], 0.0f);
}

// A cpu stream does not touch another device's memory: refused before anything runs.
TEST(CudaBackend, ACpuStreamRefusesTensorsOfAnotherDevice) {
  // A tensor claiming cuda:0 over host bytes (never dereferenced: the checks refuse it first).
  std::vector<float> bytes(4);
  auto storage = std::make_shared<ng::Storage>(bytes.data(), bytes.size() * sizeof(float), ng::Device::cuda(0),
                                               nullptr, nullptr, nullptr, 0);
  const ng::Tensor fake(storage, 0, {4}, ng::contiguous_strides({4}), ng::f32);
  const ng::Tensor host = ng::zeros({4}, ng::f32);
  const ng::Stream cpu = ng::current_stream();
  EXPECT_TRUE(throws<ng::ArgumentError>([&] { ng::copy_(cpu, host, fake); },
                                        {"copy_: src", "cuda:0", "a cpu stream copies between cpu tensors"}));
  EXPECT_TRUE(throws<ng::ArgumentError>([&] { ng::fill_(cpu, fake, 1.0); }, {"fill_: dst", "cuda:0"}));
  EXPECT_TRUE(throws<ng::ArgumentError>([&] { ng::ops::add_out(host, fake, host); },
                                        {"kernel 'add'", "cuda:0", "copy_ first"}));
  cpu.synchronize();
}

}  // namespace
