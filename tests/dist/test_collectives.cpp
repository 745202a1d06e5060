// The three collectives, eager and replayed, against the sum of every rank's input computed on each
// rank (dist_fixture.hpp: exact sums, so bitwise in every dtype); task-group updates of a captured
// collective; the plan's and the update check's errors.
#include "dist/dist_fixture.hpp"

namespace dist_test {
namespace {

const DType kReduceDtypes[] = {DType::f32, DType::f16, DType::bf16};

TEST(DistCollectives, CommunicatorKnowsItsRankAndSize) {
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(world().rank(), rank);
  EXPECT_EQ(world().size(), size);
  EXPECT_NE(world().mpi_comm(), MPI_COMM_WORLD);  // a duplicate
  EXPECT_EQ(world().str(), ng::detail::cat("communicator (rank ", rank, " of ", size, ")"));
  EXPECT_EQ(world().timeout(), std::chrono::milliseconds(20000));  // NPUGRAPH_DIST_TIMEOUT_S=20 (ctest)
}

TEST(DistCollectives, EagerAllReduceIsTheSumOverRanks) {
  const int r = world().rank(), n = world().size();
  for (DType dt : kReduceDtypes) {
    for (std::int64_t count : {1, 1000, 70001}) {
      SCOPED_TRACE(ng::detail::cat(ng::dtype_name(dt), " count ", count));
      const Tensor x = input_tensor(r, {count}, dt, 1);
      dist::all_reduce(world(), x);  // in place
      const Tensor in = input_tensor(r, {count}, dt, 2);
      const Tensor out = ngtest::filled_tensor({count}, dt, 0);
      dist::all_reduce_out(world(), in, out);
      ng::current_stream().synchronize();
      EXPECT_TRUE(ngtest::bitwise_equal(x, expected(sum_over_ranks(n, count, 1), {count}, dt)));
      EXPECT_TRUE(ngtest::bitwise_equal(out, expected(sum_over_ranks(n, count, 2), {count}, dt)));
      EXPECT_TRUE(ngtest::bitwise_equal(in, input_tensor(r, {count}, dt, 2)));  // in untouched
    }
  }
}

TEST(DistCollectives, EagerAllGatherConcatenatesInRankOrder) {
  const int r = world().rank(), n = world().size();
  for (DType dt : {DType::f32, DType::bf16, DType::i32, DType::u8}) {
    SCOPED_TRACE(ng::dtype_name(dt));
    const Tensor in = input_tensor(r, {5, 3}, dt, 3);
    const Tensor out = dist::all_gather(world(), in);
    ng::current_stream().synchronize();
    ASSERT_EQ(out.shape(), (Shape{5 * n, 3}));
    std::vector<double> want;
    for (int q = 0; q < n; ++q) {
      const std::vector<double> part = ngtest::read_back(input_tensor(q, {5, 3}, dt, 3));
      want.insert(want.end(), part.begin(), part.end());
    }
    EXPECT_TRUE(ngtest::bitwise_equal(out, expected(want, {5 * n, 3}, dt)));
  }
}

TEST(DistCollectives, EagerReduceScatterKeepsThisRanksRowsOfTheSum) {
  const int r = world().rank(), n = world().size();
  const std::int64_t m = 7, cols = 9;
  for (DType dt : kReduceDtypes) {
    SCOPED_TRACE(ng::dtype_name(dt));
    const Tensor in = input_tensor(r, {m * n, cols}, dt, 4);
    const Tensor out = dist::reduce_scatter(world(), in);
    ng::current_stream().synchronize();
    const std::vector<double> sum = sum_over_ranks(n, m * n * cols, 4);
    const std::vector<double> mine(sum.begin() + r * m * cols, sum.begin() + (r + 1) * m * cols);
    EXPECT_TRUE(ngtest::bitwise_equal(out, expected(mine, {m, cols}, dt)));
  }
}

// One graph: all_reduce -> scale (stream order: the scale reads the reduced tensor), all_gather,
// reduce_scatter; replayed with new inputs written between replays.
TEST(DistCollectives, ReplayedCollectivesRunInStreamOrderWithNewInputsEachReplay) {
  const int r = world().rank(), n = world().size();
  const std::int64_t count = 4099;
  const Tensor a = input_tensor(r, {count}, DType::f32, 0);
  const Tensor b = input_tensor(r, {3, 4}, DType::f16, 0);
  const Tensor c = input_tensor(r, {2 * n, 5}, DType::bf16, 0);
  const Tensor scaled = ngtest::filled_tensor({count}, DType::f32, 0);
  const Tensor gathered = ngtest::filled_tensor({3 * n, 4}, DType::f16, 0);
  const Tensor scattered = ngtest::filled_tensor({2, 5}, DType::bf16, 0);
  ng::Graph g;
  {
    ng::CaptureScope capture(g);
    dist::all_reduce(world(), a);
    ng::ops::scale_out(a, 0.5, scaled);
    dist::all_gather_out(world(), b, gathered);
    dist::reduce_scatter_out(world(), c, scattered);
  }
  for (int step = 1; step <= 5; ++step) {
    SCOPED_TRACE(ng::detail::cat("replay ", step));
    refill(a, r, step);
    refill(b, r, step);
    refill(c, r, step);
    g.replay();
    ng::device_synchronize();
    std::vector<double> half_sum = sum_over_ranks(n, count, step);
    for (double& v : half_sum) v *= 0.5;
    EXPECT_TRUE(ngtest::bitwise_equal(a, expected(sum_over_ranks(n, count, step), {count}, DType::f32)));
    EXPECT_TRUE(ngtest::bitwise_equal(scaled, expected(half_sum, {count}, DType::f32)));
    std::vector<double> want;
    for (int q = 0; q < n; ++q) {
      const std::vector<double> part = input(q, 12, step);
      want.insert(want.end(), part.begin(), part.end());
    }
    EXPECT_TRUE(ngtest::bitwise_equal(gathered, expected(want, {3 * n, 4}, DType::f16)));
    const std::vector<double> sum = sum_over_ranks(n, 2 * n * 5, step);
    const std::vector<double> mine(sum.begin() + r * 10, sum.begin() + (r + 1) * 10);
    EXPECT_TRUE(ngtest::bitwise_equal(scattered, expected(mine, {2, 5}, DType::bf16)));
  }
}

// A collective in a task group: an update points it at other buffers; the next replays use them.
TEST(DistCollectives, UpdatedCollectiveInATaskGroupUsesTheNewBuffers) {
  const int r = world().rank(), n = world().size();
  const Tensor in1 = input_tensor(r, {64}, DType::f32, 10), out1 = ngtest::filled_tensor({64}, DType::f32, 0);
  const Tensor in2 = input_tensor(r, {64}, DType::f32, 11), out2 = ngtest::filled_tensor({64}, DType::f32, 0);
  ng::Graph g;
  ng::TaskGroupHandle h;
  {
    ng::CaptureScope capture(g);
    const ng::Stream s = ng::current_stream();
    ng::task_group_begin(s);
    dist::all_reduce_out(world(), in1, out1);
    h = ng::task_group_end(s);
  }
  g.replay();
  ng::device_synchronize();
  EXPECT_TRUE(ngtest::bitwise_equal(out1, expected(sum_over_ranks(n, 64, 10), {64}, DType::f32)));
  const ng::Stream u = ng::Stream::create();
  {
    ng::StreamGuard on(u);
    ng::task_update_begin(u, h);
    dist::all_reduce_out(world(), in2, out2);
    ng::task_update_end(u);
  }
  u.synchronize();
  ng::fill_(out1, -1.0);
  ng::device_synchronize();
  g.replay();
  ng::device_synchronize();
  EXPECT_TRUE(ngtest::bitwise_equal(out2, expected(sum_over_ranks(n, 64, 11), {64}, DType::f32)));
  EXPECT_TRUE(ngtest::bitwise_equal(out1, ngtest::filled_tensor({64}, DType::f32, -1.0)));  // untouched
}

TEST(DistCollectives, UpdateCheckRefusesWhatTheCaptureFixed) {
  const Tensor in = ngtest::filled_tensor({64}, DType::f32, 1), out = ngtest::filled_tensor({64}, DType::f32, 0);
  ng::Graph g;
  ng::TaskGroupHandle h;
  {
    ng::CaptureScope capture(g);
    const ng::Stream s = ng::current_stream();
    ng::task_group_begin(s);
    dist::all_reduce_out(world(), in, out);
    h = ng::task_group_end(s);
  }
  const ng::Stream u = ng::Stream::create();
  ng::StreamGuard on(u);
  auto refused = [&](auto reissue, std::initializer_list<std::string> parts) {
    ng::task_update_begin(u, h);
    auto res = ngtest::throws<ng::Error>(reissue, parts);
    if (u.is_updating()) ng::task_update_abort(u);
    return res;
  };
  const Tensor small = ngtest::filled_tensor({32}, DType::f32, 1);
  EXPECT_TRUE(refused([&] { dist::all_reduce_out(world(), small, small); ng::task_update_end(u); },
                      {"all_reduce", "element count is not updatable", "captured with 64", "updated with 32"}));
  const Tensor h16 = ngtest::filled_tensor({64}, DType::f16, 1);
  EXPECT_TRUE(refused([&] { dist::all_reduce_out(world(), h16, h16); ng::task_update_end(u); },
                      {"dtype is not updatable", "float32", "float16"}));
  const dist::Communicator other(MPI_COMM_WORLD);  // collective: every rank makes it
  EXPECT_TRUE(refused([&] { dist::all_reduce_out(other, in, out); ng::task_update_end(u); },
                      {"communicator is not updatable"}));
  const Tensor gathered = ngtest::filled_tensor({64 * world().size()}, DType::f32, 0);
  EXPECT_TRUE(refused([&] { dist::all_gather_out(world(), in, gathered); ng::task_update_end(u); },
                      {"all_reduce", "all_gather"}));
  EXPECT_TRUE(refused([&] { (void)dist::all_gather(world(), in); },
                      {"allocating form cannot be bound in a task update", "all_gather_out"}));
  EXPECT_FALSE(u.is_updating());
}

TEST(DistCollectives, PlanErrorsNameTheArgumentTheValueAndTheRule) {
  const int n = world().size();
  const Tensor f = ngtest::filled_tensor({6}, DType::f32, 1);
  const Tensor i32 = ngtest::filled_tensor({6}, DType::i32, 1);
  EXPECT_TRUE(ngtest::throws<ng::ArgumentError>([&] { dist::all_reduce(world(), i32); },
                                                {"dist::all_reduce", "in dtype = int32", "float32, float16 or bfloat16"}));
  EXPECT_TRUE(ngtest::throws<ng::ArgumentError>(
      [&] { dist::all_reduce_out(world(), f, ngtest::filled_tensor({7}, DType::f32, 0)); },
      {"dist::all_reduce: out = ", "[7]", "must have the dtype and shape of in"}));
  EXPECT_TRUE(ngtest::throws<ng::ArgumentError>(
      [&] { dist::all_gather_out(world(), f, f); },
      {"dist::all_gather: out = ", ng::detail::cat("must be float32[", 6 * n, "]")}));
  const Tensor odd = ngtest::filled_tensor({n * 2 + 1, 2}, DType::f32, 1);
  EXPECT_TRUE(ngtest::throws<ng::ArgumentError>(
      [&] { (void)dist::reduce_scatter(world(), odd); },
      {"dist::reduce_scatter: in = ", "dim 0 must be a multiple of the communicator size"}));
  EXPECT_TRUE(ngtest::throws<ng::ArgumentError>([&] { dist::all_reduce(world(), Tensor()); },
                                                {"dist::all_reduce: in is undefined"}));
  dist::Communicator c(MPI_COMM_WORLD);
  EXPECT_TRUE(ngtest::throws<ng::ArgumentError>([&] { c.set_timeout(std::chrono::milliseconds(0)); },
                                                {"timeout = 0 ms", "must be > 0"}));
}

}  // namespace
}  // namespace dist_test
