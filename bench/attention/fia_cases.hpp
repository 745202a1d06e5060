// The attention workloads of issue 6, built as ready-to-call arguments of the `.out` form of
// fused_infer_attention_score (preallocated workspace and outputs), so a timed call is the kernel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "npugraph/npugraph.hpp"

namespace npugraph_bench {

struct FiaCaseSpec {
  std::string name;
  npugraph::DType dtype = npugraph::DType::f16;  // query, key and value
  std::int64_t batch = 1;
  std::int64_t heads = 32;
  std::int64_t kv_heads = 32;
  std::int64_t dim = 128;
  std::int64_t q_len = 1;                  // 1: decode
  std::vector<std::int64_t> kv_lengths;    // one per batch
  std::int64_t block_size = 0;             // 0: contiguous BNSD; else paged [blocks, KV_N, bs, D]
  bool bsh = false;                        // paged only: BSH, the cache [blocks, bs, KV_N * D] (the decode engine's)
  bool bsh_query_only = false;             // with bsh: the query BSH, the cache still [blocks, KV_N, bs, D]
  bool causal = false;                     // sparse_mode 3 with the compressed 2048 x 2048 mask
  // One copy of a KV small enough for the last-level cache: the kernel's own rate without DRAM (its
  // GBps over the DRAM read rate says how far the kernel is from being the limit), decode only.
  bool hot = false;
  int copies = 0;  // decode, not hot: copies of the inputs used in turn (0: enough for 128 MiB, at most 8)
};

struct FiaInputs {
  npugraph::Tensor q, k, v;
  npugraph::ops::FiaOptions opt;
};

struct FiaCase {
  // Copies of the inputs, used in turn, so that together they are several times the last-level
  // cache and every call reads its KV from DRAM (a 16 MiB GQA cache would otherwise stay in L3).
  std::vector<FiaInputs> copies;
  npugraph::Tensor workspace, out, lse;
  double kv_bytes = 0;  // K and V bytes one call reads: sum of lengths x KV heads x D x 2 tensors
  double flops = 0;     // unmasked work of one call: 4 D per visible (i, j) pair per query head
};

// The issue 6 cases, in report order.
const std::vector<FiaCaseSpec>& fia_case_specs();

// Built on first use and kept for the process (the fast and simple runs share it).
const FiaCase& fia_case(const FiaCaseSpec& spec);

}  // namespace npugraph_bench
