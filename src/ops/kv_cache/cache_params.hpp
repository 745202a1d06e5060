// The parameter block of reshape_and_cache (reshape_and_cache.cpp) and its CUDA launcher
// (cache_cuda.cu; built with the CUDA backend only).
#pragma once

#include <cstddef>
#include <cstdint>

#include "npugraph/dtype.hpp"
#include "ops/activation/cuda_io.hpp"

namespace npugraph::ops::cache_impl {

struct CacheParams {
  const void* key = nullptr;
  const void* value = nullptr;
  void* key_cache = nullptr;
  void* value_cache = nullptr;
  const std::int32_t* slots = nullptr;
  std::int64_t T = 0, H = 0, capacity = 0;
  DType kv_dtype = DType::f32, cache_dtype = DType::f16;
  // KvCacheLayout::head_major: the cache [num_blocks, heads, block_size, D], H = heads * D.
  bool head_major = false;
  std::int64_t block_size = 0, D = 0;
};

// Where value i (< H) of the token in `slot` goes: slot * H + i in a token-major cache; in a
// head-major one, head i / D's row of the slot's block, at its offset in the block.
NG_HD inline std::int64_t cache_offset(const CacheParams& p, std::int64_t slot, std::int64_t i) {
  if (!p.head_major) return slot * p.H + i;
  const std::int64_t heads = p.H / p.D, block = slot / p.block_size, h = i / p.D;
  return ((block * heads + h) * p.block_size + slot % p.block_size) * p.D + i % p.D;
}

void cache_cuda(const void* params, std::size_t size, const void* device_params, void* stream);

}  // namespace npugraph::ops::cache_impl
