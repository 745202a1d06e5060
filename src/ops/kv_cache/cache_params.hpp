// The parameter block of reshape_and_cache (reshape_and_cache.cpp) and its CUDA launcher
// (cache_cuda.cu; built with the CUDA backend only).
#pragma once

#include <cstddef>
#include <cstdint>

#include "npugraph/dtype.hpp"

namespace npugraph::ops::cache_impl {

struct CacheParams {
  const void* key = nullptr;
  const void* value = nullptr;
  void* key_cache = nullptr;
  void* value_cache = nullptr;
  const std::int32_t* slots = nullptr;
  std::int64_t T = 0, H = 0, capacity = 0;
  DType kv_dtype = DType::f32, cache_dtype = DType::f16;
};

void cache_cuda(const void* params, std::size_t size, const void* device_params, void* stream);

}  // namespace npugraph::ops::cache_impl
