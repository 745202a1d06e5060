// A rank that exits: every rank but 0 finalizes MPI and leaves without joining rank 0's all_reduce
// (argument "kill": is killed by SIGKILL instead; mpirun then needs --enable-recovery, else it ends
// the whole job itself). Rank 0's task must fail with the timeout error within the deadline (1 s
// here), and the process must end normally. Prints "exited-rank check: ok" on rank 0 when it does
// (ctest matches it). With a killed peer rank 0 leaves without MPI_Finalize: Open MPI's finalize
// waits for the dead rank (and for the abandoned collective), so a survivor can only report and exit
// (docs/dist.md, "A rank that fails").
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "npugraph/dist.hpp"
#include "npugraph/npugraph.hpp"

namespace ng = npugraph;

int main(int argc, char** argv) {
  ng::dist::init(&argc, &argv);
  const bool kill = argc > 1 && std::strcmp(argv[1], "kill") == 0;
  bool ok = true;
  {
    ng::dist::Communicator comm = ng::dist::Communicator::world();
    comm.set_timeout(std::chrono::milliseconds(1000));
    if (comm.rank() != 0) {
      std::printf("rank %d: %s without the all_reduce\n", comm.rank(), kill ? "killed" : "exiting");
      std::fflush(stdout);
      if (kill) std::raise(SIGKILL);
    } else {
      const ng::Tensor x = ng::zeros({32}, ng::f32);
      const auto t0 = std::chrono::steady_clock::now();
      ng::dist::all_reduce(comm, x);
      std::string what;
      try {
        ng::current_stream().synchronize();
      } catch (const ng::TaskError& e) {
        what = e.what();
      }
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const std::string rank = "communicator (rank 0 of " + std::to_string(comm.size()) + ")";
      ok = what.find("all_reduce of 32 float32 elements timed out after 1 s") != std::string::npos &&
           what.find(rank) != std::string::npos && took >= 1.0 && took < 4.0;
      std::printf("rank 0: after %.2f s: %s\n", took, what.empty() ? "(no error)" : what.c_str());
      if (kill) {
        std::printf("exited-rank check: %s\n", ok ? "ok" : "FAILED");
        std::fflush(stdout);
        std::_Exit(ok ? 0 : 1);
      }
      // A collective after MPI_Finalize is refused (MPI would abort).
      ng::dist::finalize();
      what.clear();
      try {
        const ng::Tensor y = ng::zeros({4}, ng::f32);
        ng::dist::all_reduce(comm, y);
        ng::current_stream().synchronize();
      } catch (const ng::TaskError& e) {
        what = e.what();
      }
      try {  // and so is a new communicator
        (void)ng::dist::Communicator::world();
        ok = false;
      } catch (const ng::StateError& e) {
        ok = ok && std::string(e.what()).find("MPI is not initialized") != std::string::npos;
      }
      std::printf("rank 0: after finalize: %s\n", what.c_str());
      ok = ok && what.find("MPI is finalized") != std::string::npos;
      std::printf("exited-rank check: %s\n", ok ? "ok" : "FAILED");
    }
  }
  std::fflush(stdout);
  ng::device_synchronize();
  ng::dist::finalize();  // rank 0 finalized above; a second call does nothing
  return ok ? 0 : 1;
}
