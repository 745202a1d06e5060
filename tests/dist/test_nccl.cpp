// NCCL communicators where no GPU can run them (every build with npugraph::dist): making one is a
// clear error on every rank at once (no CUDA device, or no NCCL in this build); a collective on the
// MPI communicator refuses tensors of a cuda device, naming both devices; and the update rule of a
// collective on an NCCL communicator (its buffers are fixed at capture), checked on the kernel's
// update check with an NCCL state that has no ncclComm_t behind it. The GPU side: test_nccl_gpu.cpp.
#include <cstdint>

#include "dist/collective_params.hpp"
#include "dist/comm_state.hpp"
#include "dist/dist_fixture.hpp"
#include "dist/nccl_api.hpp"
#include "dist/nccl_state.hpp"
#include "runtime/backend.hpp"

namespace dist_test {
namespace {

TEST(DistNccl, BuildSaysWhetherItHasNccl) {
  EXPECT_EQ(dist::Communicator::nccl_built(), NPUGRAPH_BUILT_WITH_NCCL != 0);
  EXPECT_FALSE(world().is_nccl());
  EXPECT_EQ(world().device(), ng::Device::cpu());
}

// On a machine without a GPU every rank gets the error at once (none waits for the others): a rank
// that waited for another one that had left would time out instead (a TimeoutError, not this error)
// and break the MPI communicator, which the checks below see; no duration is asserted (Note [Tests
// without time], tests/support/wait.hpp).
TEST(DistNccl, WithoutAGpuMakingACommunicatorIsAnUnsupportedErrorOnEveryRank) {
  if (ng::detail::cuda_device_count() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  if (NPUGRAPH_BUILT_WITH_NCCL) {
    EXPECT_TRUE(ngtest::throws<ng::UnsupportedError>(
        [] { (void)dist::Communicator::nccl(world(), ng::Device::cuda(0)); },
        {"dist::Communicator::nccl(communicator (rank ", ", cuda:0)",
         "device = cuda:0: no CUDA device is present"}));
  } else {
    EXPECT_TRUE(ngtest::throws<ng::UnsupportedError>(
        [] { (void)dist::Communicator::nccl(world(), ng::Device::cuda(0)); },
        {"this build of npugraph::dist has no NCCL", "NPUGRAPH_NCCL=ON"}));
  }
  EXPECT_FALSE(world().broken());
  // The MPI communicator is still in step on every rank: a collective on it works.
  const Tensor x = ngtest::filled_tensor({4}, DType::f32, 1);
  dist::all_reduce(world(), x);
  ng::current_stream().synchronize();
  EXPECT_TRUE(ngtest::bitwise_equal(x, ngtest::filled_tensor({4}, DType::f32, world().size())));
}

TEST(DistNccl, ArgumentsAreCheckedBeforeAnything) {
  if (!NPUGRAPH_BUILT_WITH_NCCL) GTEST_SKIP() << "no NCCL in this build: Communicator::nccl refuses first";
  EXPECT_TRUE(ngtest::throws<ng::ArgumentError>([] { (void)dist::Communicator::nccl(world(), ng::Device::cpu()); },
                                                {"device = cpu: must be a cuda device"}));
}

// Mixed devices: cuda tensors on the MPI communicator (views made without touching a GPU).
TEST(DistNccl, AnMpiCommunicatorRefusesCudaTensorsNamingBothDevices) {
  alignas(64) static float fake[64];
  const Tensor gpu = Tensor::from_blob(fake, {16}, DType::f32, {}, ng::Device::cuda(0));
  const Tensor cpu = ngtest::filled_tensor({16}, DType::f32, 1);
  const std::string rule = "float32[16] on cuda:0: must be on the communicator's device, cpu";
  const std::string hint = "an MPI communicator takes cpu tensors; Communicator::nccl";
  EXPECT_TRUE(ngtest::throws<ng::ArgumentError>([&] { dist::all_reduce(world(), gpu); },
                                                {"dist::all_reduce: in = float32[16] on cuda:0"}));
  EXPECT_TRUE(ngtest::throws<ng::ArgumentError>([&] { dist::all_reduce_out(world(), cpu, gpu); },
                                                {"dist::all_reduce: out = ", rule}));
  EXPECT_TRUE(ngtest::throws<ng::ArgumentError>([&] { (void)dist::all_gather(world(), gpu); },
                                                {"dist::all_gather: in = ", hint}));
  EXPECT_TRUE(ngtest::throws<ng::ArgumentError>([&] { (void)dist::reduce_scatter(world(), gpu); },
                                                {"dist::reduce_scatter: in = ", rule}));
}

#if NPUGRAPH_BUILT_WITH_NCCL
// Note [NCCL collectives take host arguments]: on an NCCL communicator an update may not move the
// buffers (they are baked into the CUDA graph); the same buffers pass. No ncclComm_t is made: the
// check reads only the parameter blocks and the state's kind.
TEST(DistNccl, UpdateCheckRefusesOtherBuffersOnNcclAndAcceptsTheCapturedOnes) {
  dist::CommState s;
  s.rank = 1;
  s.size = 2;
  s.device = ng::Device::cuda(1);
  s.nccl = std::make_shared<dist::NcclState>();
  EXPECT_EQ(s.str(), "NCCL communicator (rank 1 of 2 on cuda:1)");
  float a[8], b[8], c[8];
  auto block = [&](const void* in, void* out) {
    return dist::CollectiveParams{&s, in, out, 8, DType::f32, dist::Collective::all_reduce};
  };
  const dist::CollectiveParams captured = block(a, b), same = block(a, b), moved = block(c, b),
                               moved_out = block(a, c);
  const auto check = dist::all_reduce_kernel().check_update;
  auto bytes = [](const dist::CollectiveParams& p) { return std::as_bytes(std::span(&p, 1)); };
  EXPECT_EQ(check(bytes(captured), bytes(same)), "");
  for (const dist::CollectiveParams* p : {&moved, &moved_out}) {
    const std::string why = check(bytes(captured), bytes(*p));
    EXPECT_NE(why.find("all_reduce on NCCL communicator (rank 1 of 2 on cuda:1): in and out are not "
                       "updatable on NCCL"), std::string::npos) << why;
    EXPECT_NE(why.find("baked into the CUDA graph"), std::string::npos) << why;
  }
  // On MPI the same move is an update like any other.
  dist::CommState m;
  auto mpi_block = [&](const void* in) {
    return dist::CollectiveParams{&m, in, b, 8, DType::f32, dist::Collective::all_reduce};
  };
  const dist::CollectiveParams m1 = mpi_block(a), m2 = mpi_block(c);
  EXPECT_EQ(check(bytes(m1), bytes(m2)), "");
  EXPECT_NE(dist::all_reduce_kernel().cuda, nullptr);  // the NCCL slot
}

// Note [NCCL is loaded when first used]: the test binary does not link libnccl; the loader finds
// it (this machine has it) and binds every function, and names a library it cannot load.
TEST(DistNccl, TheNcclLibraryIsLoadedAtRunTimeWithEveryFunction) {
  const dist::impl::NcclApi& api = dist::impl::nccl();
  ASSERT_NE(api.get_error_string, nullptr);
  EXPECT_STRNE(api.get_error_string(ncclInvalidArgument), "");
  auto addr = [](auto fn) { return reinterpret_cast<const void*>(fn); };
  for (const void* fn : {addr(api.get_unique_id), addr(api.comm_init_rank_config), addr(api.comm_get_async_error),
                         addr(api.comm_abort), addr(api.get_last_error), addr(api.all_reduce),
                         addr(api.all_gather), addr(api.reduce_scatter)})
    EXPECT_NE(fn, nullptr);
  EXPECT_TRUE(ngtest::throws<ng::UnsupportedError>(
      [] { (void)dist::impl::load_nccl({"/nonexistent/libnccl.so.2"}); },
      {"the NCCL library could not be loaded (/nonexistent/libnccl.so.2: ", "LD_LIBRARY_PATH"}));
}
#else
TEST(DistNccl, WithoutNcclTheCollectivesHaveNoCudaSlot) {
  EXPECT_EQ(dist::all_reduce_kernel().cuda, nullptr);
  EXPECT_EQ(dist::all_gather_kernel().cuda, nullptr);
  EXPECT_EQ(dist::reduce_scatter_kernel().cuda, nullptr);
}
#endif

}  // namespace
}  // namespace dist_test
