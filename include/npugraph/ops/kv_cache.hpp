// Paged KV-cache write, torch_npu's _npu_reshape_and_cache(key, value, key_cache, value_cache,
// slot_indices) (vLLM's reshape_and_cache; npu_scatter_pa_kv_cache for the same layout):
//   for each token t with slot = slot_mapping[t] >= 0:
//     key_cache[slot / block_size, slot % block_size, :] = key[t]   (converted to the cache dtype)
//     value_cache[...] likewise
// key / value [T, KV_N, D] float32 / float16 / bfloat16 (contiguous, one dtype); key_cache /
// value_cache float16, bfloat16 or float32, contiguous, in one of two layouts (KvCacheLayout):
//   token_major (the default): [num_blocks, block_size, KV_N * D] (the BSH paged layout FIA reads
//     through block_table) or [num_blocks, block_size, KV_N, D] (torch_npu's): a slot's values
//     together;
//   head_major: [num_blocks, KV_N, block_size, D] (FIA's BNSD paged cache): each KV head's rows of a
//     block together, so attention streams one head's keys contiguously (key [T, KV_N * D] is read
//     as [T, KV_N, D] then).
// slot_mapping int32 [T] read by the kernel at run time. A negative slot skips its token
// (vLLM's padding); a slot >= num_blocks * block_size fails the task, naming the token, the slot and
// the cache capacity (raised as a TaskError by the next synchronize), and nothing is written then.
// One kernel launch, capturable; the values written are those of a scalar conversion to the
// cache's dtype (round to nearest even) whatever the layout.
#pragma once

#include "npugraph/kernel.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph::ops {

enum class KvCacheLayout {
  token_major,  // [num_blocks, block_size, KV_N * D] or [num_blocks, block_size, KV_N, D]
  head_major,   // [num_blocks, KV_N, block_size, D]
};

void reshape_and_cache(const Tensor& key, const Tensor& value, const Tensor& key_cache,
                       const Tensor& value_cache, const Tensor& slot_mapping,
                       KvCacheLayout layout = KvCacheLayout::token_major);

const KernelDef& reshape_and_cache_kernel();

}  // namespace npugraph::ops
