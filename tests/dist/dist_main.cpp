// The dist tests' main: MPI initialized by npugraph::dist::init (MPI_THREAD_MULTIPLE), every rank
// runs every test, and the exit status is nonzero on a rank whose tests failed (mpirun then fails).
// NPUGRAPH_DIST_TEST_LEVEL=serialized initializes MPI with MPI_THREAD_SERIALIZED first (the tests
// then run on npugraph's process-wide MPI lock); =funneled with MPI_THREAD_FUNNELED, and checks
// only that making a Communicator is refused, naming the level.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "npugraph/dist.hpp"
#include "npugraph/npugraph.hpp"

namespace {

int funneled_is_refused() {
  std::string what;
  try {
    (void)npugraph::dist::Communicator::world();
  } catch (const npugraph::StateError& e) {
    what = e.what();
  }
  const bool ok = what.find("MPI thread level = MPI_THREAD_FUNNELED") != std::string::npos &&
                  what.find("MPI_THREAD_MULTIPLE") != std::string::npos;
  std::printf("funneled: %s\nthread-level check: %s\n", what.c_str(), ok ? "ok" : "FAILED");
  MPI_Finalize();
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* want = std::getenv("NPUGRAPH_DIST_TEST_LEVEL");
  const std::string level_name = want ? want : "";
  if (level_name == "serialized" || level_name == "funneled") {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, level_name == "serialized" ? MPI_THREAD_SERIALIZED : MPI_THREAD_FUNNELED,
                    &provided);
    if (level_name == "funneled") return funneled_is_refused();
  }
  const int level = npugraph::dist::init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) std::printf("MPI thread level %d (SERIALIZED %d, MULTIPLE %d)\n", level,
                             MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE);
  const int rc = RUN_ALL_TESTS();
  int failed = rc != 0, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any) std::printf("dist tests failed on at least one rank\n");
  npugraph::device_synchronize();
  if (npugraph::dist::is_initialized()) MPI_Finalize();  // dist::finalize() only ends its own init
  return rc;
}
