// A rank that is missing from a collective: the others' task fails with a TimeoutError naming the
// collective, the communicator's rank and size and the deadline, no earlier than the deadline, and
// the communicator is broken from then on. No upper bound on a duration is asserted (Note [Tests
// without time], tests/support/wait.hpp): a wait that never ends hangs the test, which ctest's
// TIMEOUT fails, and the messages name the deadline that ended it. Rank 0 waits; the other ranks skip the
// collective, then join late once rank 0 has seen its error, so that every rank ends cleanly (MPI
// cannot cancel a collective: the late ranks complete rank 0's abandoned request, whose buffer the
// test keeps alive).
#include <chrono>

#include "dist/dist_fixture.hpp"

namespace dist_test {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs `missing` on rank 0 with the other ranks absent; afterwards the others run `late`.
template <class Missing, class Late>
void rank0_alone(Missing&& missing, Late&& late) {
  if (world().rank() == 0) missing();
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() != 0) late();
  MPI_Barrier(MPI_COMM_WORLD);  // rank 0 makes MPI progress here while the late ranks finish
}

TEST(DistTimeout, EagerCollectiveWithAMissingRankFailsWithinTheDeadline) {
  dist::Communicator c(MPI_COMM_WORLD);
  c.set_timeout(std::chrono::milliseconds(1000));
  const Tensor x = ngtest::filled_tensor({16}, DType::f32, 1);
  rank0_alone(
      [&] {
        const auto t0 = Clock::now();
        dist::all_reduce(c, x);
        EXPECT_TRUE(ngtest::throws<ng::TaskError>(
            [] { ng::current_stream().synchronize(); },
            {"all_reduce of 16 float32 elements timed out after 1 s",
             ng::detail::cat("communicator (rank 0 of ", c.size(), ")"), "NPUGRAPH_DIST_TIMEOUT_S"}));
        EXPECT_GE(seconds_since(t0), 1.0);  // a rule: never before the deadline
        EXPECT_TRUE(c.broken());
        // Later collectives on it fail at once, saying why: with a deadline of hours a later
        // collective that waited for the other ranks would hang (ctest's TIMEOUT), and the message
        // still names the 1 s timeout that broke it.
        c.set_timeout(std::chrono::hours(10));
        const Tensor y = ngtest::filled_tensor({4}, DType::f32, 1);
        dist::all_reduce(c, y);
        EXPECT_TRUE(ngtest::throws<ng::TaskError>([] { ng::current_stream().synchronize(); },
                                                  {"communicator is broken", "timed out after 1 s",
                                                   "make a new communicator"}));
      },
      [&] {
        dist::all_reduce(c, x);
        ng::current_stream().synchronize();
        EXPECT_FALSE(c.broken());
      });
}

TEST(DistTimeout, ReplayedCollectiveWithAMissingRankFailsWithinTheDeadline) {
  dist::Communicator c(MPI_COMM_WORLD);
  c.set_timeout(std::chrono::milliseconds(500));
  const Tensor x = ngtest::filled_tensor({8}, DType::bf16, 1);
  const Tensor y = ngtest::filled_tensor({8}, DType::bf16, 0);
  ng::Graph g;
  {
    ng::CaptureScope capture(g);
    dist::all_reduce(c, x);
    ng::ops::scale_out(x, 2.0, y);
  }
  rank0_alone(
      [&] {
        const auto t0 = Clock::now();
        g.replay();
        EXPECT_TRUE(ngtest::throws<ng::TaskError>(
            [] { ng::device_synchronize(); },
            {"all_reduce", "all_reduce of 8 bfloat16 elements timed out after 500 ms",
             ng::detail::cat("rank 0 of ", c.size())}));
        EXPECT_GE(seconds_since(t0), 0.5);  // a rule: never before the deadline
      },
      [&] {
        g.replay();
        ng::device_synchronize();
      });
}

TEST(DistTimeout, TimeoutFromTheEnvironmentIsCheckedAndTaken) {
  EXPECT_EQ(dist::default_timeout(), std::chrono::milliseconds(20000));  // ctest sets 20
  ::setenv("NPUGRAPH_DIST_TIMEOUT_S", "0.25", 1);
  EXPECT_EQ(dist::default_timeout(), std::chrono::milliseconds(250));
  for (const char* bad : {"soon", "-1", "0", "1s"}) {
    ::setenv("NPUGRAPH_DIST_TIMEOUT_S", bad, 1);
    EXPECT_TRUE(ngtest::throws<ng::ArgumentError>([] { (void)dist::default_timeout(); },
                                                  {"NPUGRAPH_DIST_TIMEOUT_S", bad, "seconds > 0"}));
  }
  ::setenv("NPUGRAPH_DIST_TIMEOUT_S", "20", 1);
}

}  // namespace
}  // namespace dist_test
