// all_reduce latency and bandwidth, 4 KB to 16 MB of float32 per rank, three ways in one run:
//   mpi      MPI_Allreduce (in place) called directly on the host thread
//   mpi_i    MPI_Iallreduce + MPI_Wait on the host thread (the nonblocking algorithm npugraph uses)
//   eager    npugraph::dist::all_reduce on a stream, synchronized after the batch
//   replay   a graph of kPerGraph captured all_reduces, replayed, synchronized after the batch
// Run by hand under mpirun (docs/dist.md, "Benchmark"):
//   mpirun -np 2 --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1
//     --mca btl self,vader --mca btl_vader_single_copy_mechanism none build/dist_allreduce_bench
// (one command line)
// Each time is the best of kTrials batches, the slowest rank's; algbw = bytes / time, busbw =
// algbw * 2 (n - 1) / n (the ring all-reduce's traffic per rank, as nccl-tests reports it).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "npugraph/dist.hpp"
#include "npugraph/npugraph.hpp"

namespace ng = npugraph;

namespace {

constexpr int kPerGraph = 8;
constexpr int kTrials = 3;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The slowest rank's time of f(), best of kTrials.
template <class F>
double best_time(F&& f) {
  double best = 1e30;
  for (int t = 0; t < kTrials; ++t) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    f();
    double mine = seconds_since(t0), slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    best = std::min(best, slowest);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  ng::dist::init(&argc, &argv);
  {
    const ng::dist::Communicator comm = ng::dist::Communicator::world();
    MPI_Comm raw;
    MPI_Comm_dup(MPI_COMM_WORLD, &raw);
    const int n = comm.size();
    if (comm.rank() == 0) {
      std::printf("all_reduce float32, %d ranks; us per all_reduce, algbw / busbw GB/s\n", n);
      std::printf("%10s %6s | %9s %7s | %9s %7s | %9s %7s | %9s %7s %7s\n", "bytes", "iters",
                  "mpi us", "busbw", "mpi_i us", "busbw", "eager us", "busbw", "replay us", "algbw",
                  "busbw");
    }
    for (std::int64_t bytes = 4096; bytes <= (16 << 20); bytes *= 4) {
      const std::int64_t count = bytes / 4;
      const int iters = static_cast<int>(std::clamp<std::int64_t>((256ll << 20) / bytes, 16, 4096)) /
                        kPerGraph * kPerGraph;
      std::vector<float> host(static_cast<std::size_t>(count), 0.0f);  // zeros stay zeros: no overflow
      const ng::Tensor x = ng::zeros({count}, ng::f32);
      const ng::Stream s = ng::Stream::create();
      ng::Graph g;
      {
        ng::CaptureScope capture(g, s);
        for (int k = 0; k < kPerGraph; ++k) ng::dist::all_reduce(comm, x);
      }
      g.replay(s);  // warm-up
      s.synchronize();
      const double mpi = best_time([&] {
        for (int i = 0; i < iters; ++i)
          MPI_Allreduce(MPI_IN_PLACE, host.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, raw);
      });
      const double mpi_i = best_time([&] {
        for (int i = 0; i < iters; ++i) {
          MPI_Request req;
          MPI_Iallreduce(MPI_IN_PLACE, host.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, raw, &req);
          MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
      });
      const double eager = best_time([&] {
        ng::StreamGuard on(s);
        for (int i = 0; i < iters; ++i) ng::dist::all_reduce(comm, x);
        s.synchronize();
      });
      const double replay = best_time([&] {
        for (int i = 0; i < iters / kPerGraph; ++i) g.replay(s);
        s.synchronize();
      });
      const double bus = 2.0 * (n - 1) / n;
      auto us = [&](double t) { return t / iters * 1e6; };
      auto gbs = [&](double t) { return static_cast<double>(bytes) * iters / t / 1e9; };
      if (comm.rank() == 0)
        std::printf("%10lld %6d | %9.1f %7.2f | %9.1f %7.2f | %9.1f %7.2f | %9.1f %7.2f %7.2f\n",
                    static_cast<long long>(bytes), iters, us(mpi), gbs(mpi) * bus, us(mpi_i),
                    gbs(mpi_i) * bus, us(eager), gbs(eager) * bus, us(replay), gbs(replay),
                    gbs(replay) * bus);
    }
    MPI_Comm_free(&raw);
  }
  ng::device_synchronize();
  ng::dist::finalize();
  return 0;
}
