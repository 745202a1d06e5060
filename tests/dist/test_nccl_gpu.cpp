// NCCL collectives on GPUs (suite DistNcclGpu), rank r on cuda:r: eager and replayed all_reduce,
// all_gather and reduce_scatter bitwise against the sum of every rank's input computed on each rank
// (dist_fixture.hpp: sums exact in every dtype, so NCCL's order and its 16-bit arithmetic cannot
// change a bit), the update rule (Note [NCCL collectives take host arguments]), the mixed-device
// refusal, and the eager deadline. Each test skips without a GPU per rank: one H200 runs the 1-rank
// case only (ctest dist_nccl_np1); dist_mpi_np2 / np3 need 2 / 3 GPUs.
// NOT YET RUN ON A GPU: written and compiled without hardware.
#include <chrono>

#include "dist/dist_fixture.hpp"
#include "runtime/backend.hpp"
#include "support/require_gpu.hpp"

namespace dist_test {
namespace {

// Every rank decides the same (one machine): no rank is left alone in a collective.
#define NG_REQUIRE_GPU_PER_RANK()                                                                    \
  do {                                                                                               \
    NG_REQUIRE_GPU();                                                                                \
    if (!dist::Communicator::nccl_built()) GTEST_SKIP() << "this build has no NCCL (NPUGRAPH_NCCL)"; \
    if (ng::detail::cuda_device_count() < world().size())                                            \
      GTEST_SKIP() << "NCCL needs a GPU per rank: " << world().size() << " ranks, "                \
                   << ng::detail::cuda_device_count() << " CUDA devices";                            \
  } while (0)

ng::Device my_gpu() { return ng::Device::cuda(world().rank()); }

const dist::Communicator& nccl_world() {
  static const dist::Communicator comm = dist::Communicator::nccl(world(), my_gpu());
  return comm;
}

Tensor to_gpu(const ng::Stream& s, const Tensor& host) {
  Tensor t = ng::empty(host.shape(), host.dtype(), s.device());
  ng::copy_(s, t, host);
  s.synchronize();
  return t;
}

Tensor to_host(const ng::Stream& s, const Tensor& dev) {
  Tensor h = ng::empty(dev.shape(), dev.dtype());
  ng::copy_(s, h, dev);
  s.synchronize();
  return h;
}

// Rows [first, first + rows) of a [*, cols] sum over the ranks.
Tensor sum_rows(std::int64_t total_rows, std::int64_t cols, std::int64_t first, std::int64_t rows, DType dt,
                int salt) {
  const std::vector<double> all = sum_over_ranks(world().size(), total_rows * cols, salt);
  const std::vector<double> part(all.begin() + first * cols, all.begin() + (first + rows) * cols);
  return expected(part, {rows, cols}, dt);
}

Tensor gathered(const Shape& each, DType dt, int salt) {
  std::vector<double> want;
  for (int q = 0; q < world().size(); ++q) {
    const std::vector<double> part = ngtest::read_back(input_tensor(q, each, dt, salt));
    want.insert(want.end(), part.begin(), part.end());
  }
  Shape s = each;
  s[0] = each[0] * world().size();
  return expected(want, s, dt);
}

TEST(DistNcclGpu, CommunicatorIsOnThisRanksGpu) {
  NG_REQUIRE_GPU_PER_RANK();
  EXPECT_TRUE(nccl_world().is_nccl());
  EXPECT_EQ(nccl_world().device(), my_gpu());
  EXPECT_EQ(nccl_world().str(), ng::detail::cat("NCCL communicator (rank ", world().rank(), " of ",
                                                world().size(), " on ", my_gpu().str(), ")"));
}

TEST(DistNcclGpu, EagerCollectivesAreBitwiseTheLocalReduction) {
  NG_REQUIRE_GPU_PER_RANK();
  const auto& c = nccl_world();
  const int r = world().rank(), n = world().size();
  const ng::Stream s = ng::Stream::create(my_gpu());
  const ng::StreamGuard on(s);
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (std::int64_t count : {1, 1000, 70001}) {
      SCOPED_TRACE(ng::detail::cat(ng::dtype_name(dt), " count ", count));
      const Tensor x = to_gpu(s, input_tensor(r, {count}, dt, 1));
      dist::all_reduce(c, x);
      EXPECT_TRUE(ngtest::bitwise_equal(to_host(s, x), expected(sum_over_ranks(n, count, 1), {count}, dt)));
    }
    const std::int64_t m = 7, cols = 9;
    const Tensor rs = dist::reduce_scatter(c, to_gpu(s, input_tensor(r, {n * m, cols}, dt, 2)));
    EXPECT_TRUE(ngtest::bitwise_equal(to_host(s, rs), sum_rows(n * m, cols, r * m, m, dt, 2)));
  }
  for (DType dt : {DType::f32, DType::bf16, DType::i32, DType::u8}) {
    SCOPED_TRACE(ng::dtype_name(dt));
    const Tensor out = dist::all_gather(c, to_gpu(s, input_tensor(r, {5, 3}, dt, 3)));
    EXPECT_TRUE(ngtest::bitwise_equal(to_host(s, out), gathered({5, 3}, dt, 3)));
  }
}

// Captured once (the all_reduce in a task group), replayed with new data copied into the captured
// inputs; an update naming the captured tensors is accepted, one moving a buffer is refused.
TEST(DistNcclGpu, ReplayedCollectivesAreBitwiseTheLocalReductionAndUpdatesKeepTheirBuffers) {
  NG_REQUIRE_GPU_PER_RANK();
  const auto& c = nccl_world();
  const int r = world().rank(), n = world().size();
  const ng::Stream s = ng::Stream::create(my_gpu()), u = ng::Stream::create(my_gpu());
  const std::int64_t count = 4096, m = 8;
  const Tensor x = to_gpu(s, input_tensor(r, {count}, DType::f32, 20));
  const Tensor y = ng::empty({count}, DType::f32, my_gpu());
  const Tensor gin = to_gpu(s, input_tensor(r, {6, 2}, DType::bf16, 21));
  const Tensor gout = ng::empty({6 * n, 2}, DType::bf16, my_gpu());
  const Tensor rin = to_gpu(s, input_tensor(r, {n * m, 1}, DType::f16, 22));
  const Tensor rout = ng::empty({m, 1}, DType::f16, my_gpu());
  ng::Graph g;
  ng::TaskGroupHandle h;
  {
    ng::CaptureScope capture(g, s);
    ng::task_group_begin(s);
    dist::all_reduce_out(c, x, y);
    h = ng::task_group_end(s);
    dist::all_gather_out(c, gin, gout);
    dist::reduce_scatter_out(c, rin, rout);
    capture.end();
  }
  auto replay_and_check = [&](int salt, const char* what) {
    const Tensor fresh = input_tensor(r, {count}, DType::f32, salt);
    ng::copy_(s, x, fresh);
    g.replay(s);
    EXPECT_TRUE(ngtest::bitwise_equal(to_host(s, y), expected(sum_over_ranks(n, count, salt), {count}, DType::f32)))
        << what;
    EXPECT_TRUE(ngtest::bitwise_equal(to_host(s, gout), gathered({6, 2}, DType::bf16, 21))) << what;
    EXPECT_TRUE(ngtest::bitwise_equal(to_host(s, rout), sum_rows(n * m, 1, r * m, m, DType::f16, 22))) << what;
  };
  for (int round = 0; round < 3; ++round) replay_and_check(30 + round, "replay");
  ng::task_update_begin(u, h);
  {
    const ng::StreamGuard on(u);
    dist::all_reduce_out(c, x, y);
  }
  ng::task_update_end(u);
  u.synchronize();
  replay_and_check(40, "replay after an update naming the captured tensors");
  const Tensor y2 = ng::empty({count}, DType::f32, my_gpu());
  ng::task_update_begin(u, h);
  EXPECT_TRUE(ngtest::throws<ng::Error>(
      [&] {
        const ng::StreamGuard on(u);
        dist::all_reduce_out(c, x, y2);
        ng::task_update_end(u);
      },
      {"all_reduce on NCCL communicator", "in and out are not updatable on NCCL", "baked into the CUDA graph"}));
  if (u.is_updating()) ng::task_update_abort(u);
  replay_and_check(41, "replay after a refused update");
}

TEST(DistNcclGpu, AnNcclCommunicatorRefusesCpuTensorsNamingBothDevices) {
  NG_REQUIRE_GPU_PER_RANK();
  const Tensor cpu = ngtest::filled_tensor({4}, DType::f32, 1);
  EXPECT_TRUE(ngtest::throws<ng::ArgumentError>(
      [&] { dist::all_reduce(nccl_world(), cpu); },
      {"dist::all_reduce: in = float32[4] on cpu: must be on the communicator's device, " + my_gpu().str(),
       "an NCCL communicator takes tensors of its cuda device"}));
}

// Rank 0 alone in an eager all_reduce on a communicator of its own: its deadline reports it, NCCL
// is aborted, the communicator broken. The other ranks skip the collective.
TEST(DistNcclGpu, ARankAloneInAnEagerCollectiveTimesOut) {
  NG_REQUIRE_GPU_PER_RANK();
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  dist::Communicator c = dist::Communicator::nccl(world(), my_gpu());
  c.set_timeout(std::chrono::milliseconds(1000));
  if (world().rank() == 0) {
    const ng::Stream s = ng::Stream::create(my_gpu());
    const Tensor x = to_gpu(s, ngtest::filled_tensor({16}, DType::f32, 1));
    {
      const ng::StreamGuard on(s);
      dist::all_reduce(c, x);
    }
    EXPECT_TRUE(ngtest::throws<ng::TaskError>([&] { s.synchronize(); },
                                              {"all_reduce of 16 float32 elements timed out after 1 s",
                                               "NCCL communicator (rank 0 of"}));
    EXPECT_TRUE(c.broken());
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace dist_test
