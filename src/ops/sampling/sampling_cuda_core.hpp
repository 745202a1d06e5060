// The math of the argmax / sample CUDA kernels (sampling_cuda.cu) as __host__ __device__ code.
//
// Note [Sampling on CUDA]
// A thread block per row (grid-stride over rows); thread `tid` of `threads` scans elements tid,
// tid + threads, ... and the block reduces the threads' results in shared memory.
//   - argmax: the reduction keeps the better of two (value, index) pairs: a NaN beats a number,
//     a larger number beats a smaller one, and equal values (NaN and NaN, +0 and -0) go to the
//     lower index. That is a total order, so any reduction tree finds the CPU kernel's index
//     (torch.argmax's rule, sampling.hpp) exactly.
//   - sample with temperature 0: argmax. Otherwise the CUDA kernel covers the draw from the
//     whole vocabulary (top_k 0 or V, top_p 1); sample_out refuses the rest on the host with an
//     UnsupportedError naming top_k or top_p (sample_cuda_unsupported, sampling.cpp). The block
//     takes max z exactly (NaN as -inf; a row with nothing finite falls back to argmax, as on the
//     CPU), then thread c sums in float64 the weights w_j = exp((z_j - max) / T) of the c-th
//     contiguous chunk of the row; thread 0 adds the chunk sums in order, draws u = the CPU's
//     philox4x32-10 uniform of (seed, step, row), finds the chunk where the running sum passes
//     u * total and walks it token by token in index order — the CPU kernel's walk. The sums'
//     association and expf (against Highway's Exp) differ from the CPU's in the last bits, so
//     the token equals the CPU's unless u * total falls within rounding of a boundary between
//     two tokens' cumulative weights (about 1e-7 of the mass for float32 weights).
//   - advance_steps: thread 0 adds 1 to steps[row] after the draw read it.
#pragma once

#include "ops/activation/cuda_io.hpp"
#include "ops/sampling/sampling_params.hpp"

namespace npugraph::ops::sampling_impl::cuda_core {

using namespace cuda_io;

struct Best {
  float v;
  std::int64_t i;
};

// Whether a beats b under argmax's order (the Note).
NG_HD inline bool beats(const Best& a, const Best& b) {
  const bool an = is_nan(a.v), bn = is_nan(b.v);
  if (an != bn) return an;
  if (!an && a.v != b.v) return a.v > b.v;
  return a.i < b.i;
}

NG_HD inline Best better(const Best& a, const Best& b) { return beats(a, b) ? a : b; }

NG_HD inline Best argmax_share(const float* x, std::int64_t V, std::int64_t tid, std::int64_t threads) {
  Best best{neg_inf(), V};  // loses to every element (index V)
  for (std::int64_t j = tid; j < V; j += threads) best = better(best, Best{x[j], j});
  return best;
}

NG_HD inline bool is_finite(float v) { return v == v && v != neg_inf() && v != -neg_inf(); }

// z_j: NaN as -inf.
NG_HD inline float z_of(float x) { return is_nan(x) ? neg_inf() : x; }

NG_HD inline float max_share(const float* x, std::int64_t V, std::int64_t tid, std::int64_t threads) {
  float m = neg_inf();
  for (std::int64_t j = tid; j < V; j += threads) m = z_of(x[j]) > m ? z_of(x[j]) : m;
  return m;
}

// The CPU kernel's weight: exp of max((x - max) * inv_t, -FLT_MAX), 0 for NaN.
NG_HD inline float weight(float x, float max, float inv_t) {
  if (is_nan(x)) return 0.0f;
  float a = fmul(fsub(x, max), inv_t);
  const float lowest = -3.40282347e+38f;
  a = a < lowest ? lowest : a;
  return expf(a);
}

NG_HD inline std::int64_t chunk_len(std::int64_t V, std::int64_t chunks) { return (V + chunks - 1) / chunks; }

// Thread c's chunk mass (float64, in index order).
NG_HD inline double chunk_mass(const float* x, std::int64_t V, float max, float inv_t, std::int64_t c,
                               std::int64_t chunks) {
  const std::int64_t len = chunk_len(V, chunks);
  double s = 0;
  for (std::int64_t j = c * len; j < V && j < (c + 1) * len; ++j) s = dadd(s, weight(x[j], max, inv_t));
  return s;
}

// Philox4x32-10 and the uniform of sampling.cpp (philox4x32, sampling_uniform), device-callable.
NG_HD inline double uniform(std::uint64_t key, std::uint64_t counter_lo, std::uint64_t counter_hi) {
  std::uint32_t c[4] = {static_cast<std::uint32_t>(counter_lo), static_cast<std::uint32_t>(counter_lo >> 32),
                        static_cast<std::uint32_t>(counter_hi), static_cast<std::uint32_t>(counter_hi >> 32)};
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(0xD2511F53u) * c[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(0xCD9E8D57u) * c[2];
    const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    c[0] = hi1 ^ c[1] ^ k0;
    c[1] = lo1;
    c[2] = hi0 ^ c[3] ^ k1;
    c[3] = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  const std::uint64_t bits = ((static_cast<std::uint64_t>(c[0]) << 32) | c[1]) >> 11;
  return static_cast<double>(bits) * 1.1102230246251565e-16;  // 2^-53
}

// Thread 0's draw from the chunk masses (the Note): the token.
NG_HD inline std::int32_t draw(const float* x, std::int64_t V, float max, float inv_t, const double* mass,
                               std::int64_t chunks, double u) {
  double total = 0;
  for (std::int64_t c = 0; c < chunks; ++c) total = dadd(total, mass[c]);
  const double target = dmul(u, total);
  double cum = 0;
  const std::int64_t len = chunk_len(V, chunks);
  for (std::int64_t c = 0; c < chunks; ++c) {
    if (dadd(cum, mass[c]) <= target) {
      cum = dadd(cum, mass[c]);
      continue;
    }
    for (std::int64_t j = c * len; j < V && j < (c + 1) * len; ++j) {
      const float w = weight(x[j], max, inv_t);
      if (w == 0) continue;
      cum = dadd(cum, w);
      if (cum > target) return static_cast<std::int32_t>(j);
    }
  }
  for (std::int64_t j = V; j-- > 0;)  // rounding left the target past the end: the last token
    if (weight(x[j], max, inv_t) != 0) return static_cast<std::int32_t>(j);
  return 0;
}

NG_HD inline float inv_temperature(const SampleParams& p, std::int64_t row) {
  return static_cast<float>(1.0 / row_sampling(p, row).temperature);
}

NG_HD inline double row_uniform(const SampleParams& p, std::int64_t row) {
  return uniform(static_cast<std::uint64_t>(p.seeds[row]), static_cast<std::uint64_t>(p.steps[row]),
                 row_sampling(p, row).counter_hi);
}

}  // namespace npugraph::ops::sampling_impl::cuda_core
