// The math of the embedding CUDA kernel (embedding_cuda.cu) as __host__ __device__ code.
//
// Note [Embedding on CUDA]
// One thread per output element (grid-stride over T * H): out[t, i] = table[ids[t], i], converted
// (float tables) or dequantised (quant_cuda_core.hpp, ggml's values) and rounded once to out's
// dtype, as the CPU kernel does, so the result is bitwise the CPU op's. A kernel cannot throw: an
// id outside [0, V) (which the CPU kernel reports as a TaskError before writing anything) writes
// its row as NaN, never a read outside the table and never a silently finite row.
#pragma once

#include "ops/embedding/embedding_params.hpp"
#include "ops/linear/quant_cuda_core.hpp"

namespace npugraph::ops::embedding_impl::cuda_core {

using namespace cuda_io;

NG_HD inline void element(const EmbeddingParams& p, std::int64_t k) {
  const std::int64_t t = k / p.H, i = k % p.H;
  const std::int64_t id = p.ids[t];
  if (id < 0 || id >= p.V) {
    store(p.out_dtype, p.out, k, quiet_nan());
    return;
  }
  const std::byte* row = p.table + id * p.row_bytes;
  const float v = p.quant ? quant_cuda::dequant(p.quant_type, row, i) : load(p.table_dtype, row, i);
  store(p.out_dtype, p.out, k, v);
}

}  // namespace npugraph::ops::embedding_impl::cuda_core
