// The math of the reshape_and_cache CUDA kernel (cache_cuda.cu) as __host__ __device__ code.
//
// Note [KV cache write on CUDA]
// A thread block per token t (grid-stride over tokens), in two phases:
//   1. its threads scan slot_mapping together: is any slot >= capacity (the CPU kernel throws and
//      writes nothing: here every block then writes nothing, so the cache is left as it was), and
//      does a later token t' > t name the same slot (the CPU kernel writes tokens in order, so the
//      later one is what stays: token t then skips its write);
//   2. unless phase 1 said skip (or the slot is negative), its threads copy the token's H key and
//      value elements into the slot, converted and rounded once to the cache's dtype.
// So the cache ends bitwise as the CPU op leaves it, whatever order the blocks run in. Phase 1 is
// O(T) per token: nothing for decode (T = batch), and a prefill chunk's few hundred tokens cost a
// few hundred int32 reads per block.
#pragma once

#include "ops/activation/cuda_io.hpp"
#include "ops/kv_cache/cache_params.hpp"

namespace npugraph::ops::cache_impl::cuda_core {

using namespace cuda_io;

// Phase 1, thread `tid` of `threads`: true if token t must not write (a bad slot anywhere, or a
// later token with t's slot) as far as this thread's share of the scan sees.
NG_HD inline bool skip_share(const CacheParams& p, std::int64_t t, std::int64_t tid, std::int64_t threads) {
  const std::int64_t slot = p.slots[t];
  for (std::int64_t u = tid; u < p.T; u += threads) {
    const std::int64_t s = p.slots[u];
    if (s >= p.capacity) return true;
    if (u > t && s == slot) return true;
  }
  return false;
}

// Phase 2: element i of token t (the caller skipped tokens phase 1 refused and negative slots).
NG_HD inline void copy_element(const CacheParams& p, std::int64_t t, std::int64_t i) {
  const std::int64_t slot = p.slots[t];
  const std::int64_t at = cache_offset(p, slot, i);
  store(p.cache_dtype, p.key_cache, at, load(p.kv_dtype, p.key, t * p.H + i));
  store(p.cache_dtype, p.value_cache, at, load(p.kv_dtype, p.value, t * p.H + i));
}

}  // namespace npugraph::ops::cache_impl::cuda_core
