// Tensor-parallel decode: the part of a model one rank holds, and the all-reduce the engine calls
// (docs/dist.md, "Tensor-parallel decode of SmolLM2").
//
//   auto tp = std::make_shared<MyAllReduce>(...);   // rank(), size(), all_reduce() on the stream
//   npugraph::llm::Engine engine({.model = path, .tensor_parallel = tp});
//
// The llm layer never links MPI: it declares TensorParallel, and the program that does link a
// collectives library supplies the implementation (npugraph-generate --tp N: dist::all_reduce,
// apps/tensor_parallel_mpi.hpp).
//
// Note [Tensor-parallel split]
// Attention is split by KV group: rank r holds a contiguous range of KV heads and the query heads
// of their groups (the rows of w.q, w.k, w.v of those heads, and the matching input columns of
// w.o); its KV cache, rope, cache writes and FIA cover only those heads. KV heads are dealt out as
// evenly as contiguous ranges allow, the first ranks taking one more: 3 KV heads over 3 ranks are
// 1 each, over 2 ranks 2 and 1 (rank 0: KV 0-1 and query heads 0-5, rank 1: KV 2 and query 6-8), so
// every rank's GQA ratio is the model's. The MLP is split by columns: rank r holds ffn / size rows
// of w.gate and w.up and the matching input columns of w.down. A quantised row is independent, so a
// row slice is exact; a column slice must fall on the 32-element blocks (checked, ArgumentError).
// h = attn @ w.o and h = act @ w.down are then partial sums: one all_reduce after each. Embedding,
// norms, the output projection and sampling are replicated, so every rank computes the same logits
// and samples the same token (the same seeds on every rank) and no broadcast is needed.
#pragma once

#include <cstdint>

#include "npugraph/tensor.hpp"

namespace npugraph::llm {

struct ModelConfig;

// Which rank of how many (size 1: the whole model).
struct TensorSplit {
  int rank = 0;
  int size = 1;
};

// The heads and FFN columns rank `rank` of `size` holds (Note [Tensor-parallel split]).
struct ModelShard {
  int rank = 0, size = 1;
  std::int64_t kv_head0 = 0, kv_heads = 0;  // KV heads [kv_head0, kv_head0 + kv_heads)
  std::int64_t head0 = 0, heads = 0;        // query heads [head0, head0 + heads)
  std::int64_t ffn0 = 0, ffn = 0;           // FFN columns [ffn0, ffn0 + ffn)
};

// The shard of `split` for a model of shape `c`. ArgumentError naming the value and the rule for a
// size below 1, a rank outside [0, size), more ranks than KV heads, or an FFN width the size does
// not divide. (Block alignment of the column cuts depends on the weights' types: Model::load.)
ModelShard shard_of(const ModelConfig& c, TensorSplit split);

// What the engine needs of a tensor-parallel group. One object per rank; every rank makes the same
// calls in the same order (the engine does: the same scheduler on the same requests).
class TensorParallel {
 public:
  virtual ~TensorParallel() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // x = the sum over the ranks of every rank's x, in place, issued as work on the current stream:
  // eagerly it runs in stream order, inside a capture it becomes a task of the graph and replays in
  // stream order with the rest of the step. x: a contiguous float32 cpu tensor, of the same shape on
  // every rank.
  virtual void all_reduce(const Tensor& x) = 0;
};

}  // namespace npugraph::llm
