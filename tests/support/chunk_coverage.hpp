// What a run_chunks covered (the compute pool's and a replay team's tests): each index of [0, n)
// exactly once, every chunk with the bounds of Note [Deterministic chunks].
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ngtest {

struct ChunkCoverage {
  std::vector<std::atomic<int>> hits;
  std::int64_t n, grain;
  std::atomic<int> bad_bounds{0};
  ChunkCoverage(std::int64_t n_, std::int64_t grain_) : hits(static_cast<std::size_t>(n_)), n(n_), grain(grain_) {}
  // A ChunkRunner::ChunkFn over `self`.
  static void run(void* self, std::int64_t b, std::int64_t e) {
    auto* c = static_cast<ChunkCoverage*>(self);
    if (b % c->grain != 0 || e != std::min(c->n, b + c->grain)) c->bad_bounds.fetch_add(1);
    for (std::int64_t i = b; i < e; ++i) c->hits[static_cast<std::size_t>(i)].fetch_add(1);
  }
  // Indices not covered exactly once, plus chunks with other bounds.
  int bad() const {
    int k = bad_bounds.load();
    for (const auto& h : hits) k += h.load() != 1;
    return k;
  }
};

}  // namespace ngtest
