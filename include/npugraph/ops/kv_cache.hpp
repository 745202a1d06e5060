// Paged KV-cache write, torch_npu's _npu_reshape_and_cache(key, value, key_cache, value_cache,
// slot_indices) (vLLM's reshape_and_cache; npu_scatter_pa_kv_cache for the same layout):
//   for each token t with slot = slot_mapping[t] >= 0:
//     key_cache[slot / block_size, slot % block_size, :] = key[t]   (converted to the cache dtype)
//     value_cache[...] likewise
// key / value [T, KV_N, D] float32 / float16 / bfloat16 (contiguous, one dtype); key_cache /
// value_cache [num_blocks, block_size, KV_N * D] (the BSH paged layout FIA reads through
// block_table) or [num_blocks, block_size, KV_N, D] (torch_npu's), float16, bfloat16 or float32,
// contiguous; slot_mapping int32 [T] read by the kernel at run time. A negative slot skips its token
// (vLLM's padding); a slot >= num_blocks * block_size fails the task, naming the token, the slot and
// the cache capacity (raised as a TaskError by the next synchronize), and nothing is written then.
// One kernel launch, capturable.
#pragma once

#include "npugraph/kernel.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph::ops {

void reshape_and_cache(const Tensor& key, const Tensor& value, const Tensor& key_cache,
                       const Tensor& value_cache, const Tensor& slot_mapping);

const KernelDef& reshape_and_cache_kernel();

}  // namespace npugraph::ops
