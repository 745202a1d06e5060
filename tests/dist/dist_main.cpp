// The dist tests' main: MPI initialized by npugraph::dist::init (MPI_THREAD_MULTIPLE), every rank
// runs every test, and the exit status is nonzero on a rank whose tests failed (mpirun then fails).
// Output of ranks other than 0 is kept to failures, so the log stays readable.
#include <gtest/gtest.h>

#include <cstdio>

#include "npugraph/dist.hpp"
#include "npugraph/npugraph.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int level = npugraph::dist::init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    std::printf("MPI thread level %d (MPI_THREAD_MULTIPLE = %d)\n", level, MPI_THREAD_MULTIPLE);
  }
  const int rc = RUN_ALL_TESTS();
  int failed = rc != 0, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any) std::printf("dist tests failed on at least one rank\n");
  npugraph::device_synchronize();
  npugraph::dist::finalize();
  return rc;
}
