// The model runner: persistent device buffers, the forward pass as npugraph ops, and the decode
// step captured once per batch-size bucket and updated in place every step.
//
// Note [Decode step graph]
// Shaped like vLLM's / vllm-ascend's model runner. Everything a decode step reads that changes from
// step to step is a device buffer the runner owns and the host writes before the step: token ids,
// positions, KV slot mapping, block tables (and the sliding window's table and mask: Note [Sliding
// window]), sampling seeds and step counters. So a step captured once replays unchanged, except for
// the one host value that re-plans an op: each attention layer's actual KV lengths (FIA splits the
// KV by them; a sliding-window layer's are its window's). Each attention call is captured in its own
// task group. update_then_replay records them as graph-owned updates (RecordedUpdates, Note
// [Recorded updates]; stream-ordered, Note [Stream-ordered records]): a step stages the new lengths
// into every layer's call and issues one batched update on the runner's stream, whose patch lands in
// stream order before the replay that follows — with the protocol's rollback, and no ExternalEvent
// (a CUDA graph stays one launch). replay_then_update — vllm-ascend's order — replays first and
// updates layer after layer, each update recording the ExternalEvent its captured layer waits on, so
// the host's updates overlap the first layers' compute; that order is the reverse of the protocol's
// (an update there feeds the replay already launched, which the protocol's update would wait for), so
// it keeps its own task groups and events. Batches are
// padded to the bucket: padded rows embed token 0 at position 0, write no KV (slot -1), attend to
// nothing (KV length 0) and their outputs are ignored. Eager mode issues the same ops on the same
// buffers without a graph, so graph and eager logits are bitwise equal.
// Under tensor parallelism (Note [Tensor-parallel split]) the step also issues the two all-reduces
// per layer on the runner's stream: captured into the graph with the rest, they replay in stream
// order, so every rank issues the same collectives in the same order; updates touch only FIA.
//
// Note [Sliding window]
// Gemma 3's sliding-window layers (ModelConfig::is_sliding) let the query at position p see key j
// iff j <= p and p - j < W, W = sliding_window (llama.cpp's is_masked_swa, Hugging Face's). While
// W >= max_context no sequence outgrows its window and those layers are issued as the global ones
// are; otherwise (window_ = W) their FIA calls differ:
// - A prefill chunk (query S > 1) takes the band anchored bottom right instead of causal: sparse_mode
//   4, pre_tokens = W - 1, next_tokens = 0 (docs/fia.md: row p sees p - pre <= j <= p), with the same
//   compressed mask. The kernels walk only the band's columns.
// - One query row per sequence (decode, and a one-token prefill chunk) ignores the band, as
//   torch_npu's does, so it takes a full mask, over a view of the paged KV that starts near the
//   window: row b of the window table holds the sequence's blocks from block skip = max(0, L - W) /
//   block_size on (L: its KV length), its KV length is L - skip * block_size <= W + block_size - 1,
//   and row b of the window mask ([max_batch, 1, window_blocks * block_size] uint8, nonzero =
//   masked; window_blocks = ceil((W + block_size - 1) / block_size), at most max_context's) hides
//   its first max(0, L - W) - skip * block_size (< block_size) columns, the first block's keys
//   before the window. So the layer reads O(W) keys whatever the context, and only the first block
//   is masked in part.
// The host writes each row's table row and mask row with the step's other inputs (write_window:
// window_blocks ids and window_blocks * block_size mask bytes a row, rewritten whole, which costs
// less than knowing what changed), they are staged with them (Note [Engine on a device]), and a
// captured step reads them when it replays: a new step needs no re-capture, and its update sets
// the sliding layers' lengths to the window lengths as it sets the global ones'. Padding rows
// have window length 0. A one-token prefill chunk uses row 0 of both buffers, which every decode
// step rewrites before it runs.
//
// Note [KV cache layout]
// Each layer's key and value caches are [num_blocks, kv_heads, block_size, head_dim]
// (KvCacheLayout::head_major; FIA reads them as BNSD paged caches through the block tables), not
// vLLM's [num_blocks, block_size, kv_heads * head_dim]. Decode attention reads one KV head's
// keys and values per unit of work: head-major, a block's rows of that head are one contiguous
// run (block_size * head_dim values), where token-major they are head_dim values of every
// kv_heads * head_dim, the other heads' rows in between. The values and the attention's
// arithmetic are the same in both (FIA's result is bitwise the same; tests/ops/llm/
// test_kv_cache.cpp), only the addresses differ. Measured (AMD EPYC Zen 3, AVX2, 2 cores):
// SmolLM2's attention layer at batch 8 from a cold cache, `bench_attention
// --benchmark_filter='fia/decode_f16_small_b8_bsh(nd)?/fast_graph'`, us_per_call in three rounds:
// 221-251 us token-major against 134-166 us head-major.
//
// Note [Engine on a device]
// EngineOptions::device places the step on the cpu or on cuda:N. On cuda the runner copies the
// weights it issues (token_embd_, output_, output_norm_, layers_) to the device once, in its
// constructor (a tied output matrix is copied once with the embeddings), and keeps every
// persistent buffer, activation, KV cache, workspace and the causal mask there. The host writes a
// step's inputs into host staging tensors (the *_h_ members) and stages them with eager copy_
// calls on the runner's stream just before the step is issued or replayed; the sampled ids (and,
// when the engine keeps logits, the logits rows) come back with copy_ before the step's
// synchronize. Eager copies rather than copies captured into the graph: the captured step then
// stays exactly the cpu's graph (on the cpu the staging tensors *are* the device buffers and no
// copy is issued, so cpu generation is unchanged, bitwise), a captured copy would tie every replay
// to one host address, and stream order already puts the copies after the previous step's
// synchronize (which ends the host's reuse of the staging memory) and before the replay.
// Without tensor parallelism only (its collectives are MPI on host memory). Compiled and run
// without a GPU only: on a machine without one the Engine refuses a cuda device before loading.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "llm/kv_blocks.hpp"
#include "llm/logit_adjust.hpp"
#include "npugraph/external_event.hpp"
#include "npugraph/graph.hpp"
#include "npugraph/llm/constraint.hpp"
#include "npugraph/llm/engine.hpp"
#include "npugraph/llm/model.hpp"
#include "npugraph/ops/fia.hpp"
#include "npugraph/stream.hpp"
#include "npugraph/task_group.hpp"

namespace npugraph::llm {

class Architecture;

struct Sequence {
  std::vector<std::int32_t> tokens;  // prompt + generated so far
  std::int64_t cached = 0;           // tokens whose KV is in the cache
  std::vector<std::int32_t> blocks;  // its KV cache blocks, in token order
  PrefixChain prefix;                // its blocks published so far (Note [Prefix cache])
  std::uint64_t seed = 0;
  std::int64_t generated = 0;
  // Its sampling settings (the step's per-row buffers: ops::sample_rows_out).
  float temperature = 0, top_p = 1;
  std::int64_t top_k = 0;
  // Its penalties and biases (the step's adjustment lists: Note [Logit adjustments]).
  LogitAdjust adjust;
  // Its constraint (Request::constraint; null: none), writing its row of the step's token masks.
  std::unique_ptr<TokenConstraint> constraint;
  std::int64_t logprobs = -1;  // top alternatives per token (Request::logprobs); -1: none
  // Request::prompt_logprobs (-1: none), and those of prompt tokens 1.. prefilled so far.
  std::int64_t prompt_logprobs = -1;
  std::vector<TokenLogprob> prompt_logprobs_out;
};

inline constexpr std::array<std::int64_t, 5> kBuckets{1, 2, 4, 8, 16};

class ModelRunner {
 public:
  ModelRunner(std::shared_ptr<const Model> model, const EngineOptions& options);
  ~ModelRunner();

  const Model& model() const { return *model_; }
  BlockManager& blocks() { return blocks_; }
  std::int64_t max_batch() const { return max_batch_; }
  std::int64_t bucket_for(std::int64_t batch) const;

  // Runs prompt tokens [seq.cached, seq.tokens.size()) through the model eagerly, in chunks of
  // prefill_chunk tokens counted from the prompt's start, writing their KV — at most `max_chunks`
  // of them; returns the last token's logits row ([1, vocab] float32, valid until the next call)
  // once the prompt is done, an undefined tensor before.
  Tensor prefill(Sequence& seq, std::int64_t max_chunks = std::numeric_limits<std::int64_t>::max());
  // Captures the graph of the bucket `batch` falls in, if it is not yet (graph mode; not timed).
  void prepare(std::int64_t batch) { bucket(bucket_for(batch)); }
  std::int64_t captured() const { return static_cast<std::int64_t>(buckets_.size()); }
  // One decode step of `batch` (each sequence's last token is not cached yet): graph or eager, as
  // the options say. Returns the logits [batch, vocab]; sampled ids are next_ids()[0..batch).
  Tensor decode(std::span<Sequence* const> batch, StepMode mode, StepTimes& times);
  // Whether steps mix (Note [Mixed steps] in engine_step.cpp): EngineOptions::mixed_steps, on the
  // cpu, without tensor parallelism.
  bool mixes() const { return mixes_; }
  // A mixed step (eager): one decode step of `batch` (1 .. max_batch - 1 sequences, no padding) and
  // the next prefill chunk of `seq` in one forward pass. Returns the logits rows: the batch's, then
  // the chunk's last token's when the chunk ends its prompt; next_ids() likewise.
  Tensor mixed(std::span<Sequence* const> batch, Sequence& seq, StepTimes& times);
  // The ids the last decode / prefill sampled (host-readable after it returned).
  const std::int32_t* next_ids() const;

 private:
  struct Bucket;
  struct Rows;
  void write_inputs(std::span<Sequence* const> batch, std::int64_t rows);
  void issue_step(const Rows& r, Bucket* capture);
  void issue_attention(const Rows& r, std::size_t layer, Bucket* capture);
  void issue_sampling(std::int64_t rows, const Tensor& logits);
  // FIA's options for one attention call over `r`: a global layer's, or a sliding-window layer's.
  ops::FiaOptions attention_options(const Rows& r, bool sliding) const;
  Rows placeholder_rows(std::int64_t rows) const;
  Rows decode_rows(std::int64_t rows, std::vector<std::int64_t> lengths, std::vector<std::int64_t> window_lengths) const;
  Bucket& bucket(std::int64_t rows);
  void update(Bucket& b, const Rows& r, bool per_layer);

  // Note [Sliding window]: whether `layer` attends through the window; the blocks of a KV length
  // wholly before its window; writes row `row` of the window table and mask for a sequence holding
  // `blocks` at KV length `length` (no blocks, length 0: a padding row) and returns the length its
  // window table row holds.
  bool windowed(std::size_t layer) const;
  std::int64_t window_skip(std::int64_t length) const;
  std::int64_t window_length(std::int64_t length) const;  // the KV length its window table row holds
  std::int64_t write_window(std::int64_t row, std::span<const std::int32_t> blocks, std::int64_t length);

  // The partial sums of w.o and w.down summed over the ranks (tensor parallel), else nothing.
  void reduce(const Tensor& partial);

  std::shared_ptr<const Model> model_;
  EngineOptions options_;
  // This rank's attention and MLP widths (the model's whole ones without tensor parallelism: Note
  // [Tensor-parallel split]): query heads, KV heads, q columns (heads x head_dim), k / v columns, FFN.
  std::int64_t heads_, kv_heads_, q_dim_, kv_dim_, ffn_;
  std::int64_t max_batch_, max_rows_, max_blocks_;
  // The sliding window when some sequence can outgrow it (0: none; Note [Sliding window]), and the
  // blocks of its table rows.
  std::int64_t window_ = 0, window_blocks_ = 0;
  Device device_;
  const Architecture& arch_;        // its layer forward (Note [Architectures])
  ops::QuantLinearOptions linear_;  // the quantised projections' (EngineOptions::activations)
  Stream stream_, update_stream_;
  BlockManager blocks_;
  std::vector<Tensor> k_cache_, v_cache_;
  // The weights the step issues: the model's on the cpu, copies on a device (Note [Engine on a device]).
  Matrix token_embd_, output_;
  Tensor output_norm_;
  Tensor rope_freqs_;  // undefined without them
  std::vector<LayerWeights> layers_;
  // Note [Step inputs]
  // The step's persistent inputs (Note [Decode step graph]) are one declared table, `inputs_`: each
  // row names a StepBuffer — the device buffer the captured step reads, and its host staging (the
  // same tensor on the cpu) — with its dtype, shape and when stage_inputs copies it to the device
  // (every step, decode or prefill only; never for next_ids, which read_back brings the other way).
  // The constructor allocates and zeroes every row, stage_inputs walks it; what writes the rows
  // (write_inputs, prefill, write_sampling) fills the host tensors. The window table and mask exist
  // with a window only (Note [Sliding window]). A new per-row input is one row and its writer.
  struct StepBuffer {
    Tensor host, device;
  };
  enum class Staged { always, decode, prefill, read_back, absent };
  struct StepInput {
    const char* name;
    StepBuffer* buffer;
    DType dtype;
    Shape shape;
    Staged staged;
  };
  StepBuffer ids_, positions_, slots_, block_table_, prefill_table_, window_table_, window_mask_, seeds_, steps_,
      temperature_, top_k_, top_p_, adjust_count_, adjust_tokens_, adjust_scale_, adjust_add_, mask_on_, mask_bits_,
      next_ids_;
  std::int64_t adjust_capacity_ = 0;  // entries per row of the adjustment lists (Note [Logit adjustments])
  std::vector<StepInput> inputs_;
  Tensor logits_h_;  // the logits rows read back (the logits themselves on the cpu)
  // A prompt chunk's logits at every row (Request::prompt_logprobs), allocated when first asked
  // for, and their host copy (the same tensor on the cpu).
  Tensor prompt_logits_, prompt_logits_h_;
  void prompt_logprobs(Sequence& seq, std::int64_t start, std::int64_t n);
  void write_sampling(std::int64_t row, const Sequence* seq);  // a row's seed ... top_p (padding: greedy)
  Tensor on_device(const Tensor& host);  // a device copy (the tensor itself on the cpu)
  Matrix on_device(const Matrix& host);
  Matrix for_linear(const Matrix& host);  // on_device, then rows16 where q8 activations run (cpu)
  void stage_inputs(bool prefill);       // the host staging -> the device buffers (eager copy_)
  // next_ids (and the logits rows, with keep_logits or when `logits`) -> the host
  void read_back(std::int64_t rows, bool logits);
  // Activations, sized for max_rows_ tokens.
  // y_: the MLP's normed input (hidden wide; q_ is only q_dim_ wide under tensor parallelism).
  Tensor x_, h_, y_, q_, k_, v_, attn_, gate_, up_, act_, last_, logits_, lse_, workspace_, mask_;
  // The stacked projections' outputs (undefined when they are not used): one token's q|k|v side by
  // side (q_rows(1) etc. are views of it), and every row's gate|up, which npu_swiglu's one-input
  // form reads as the halves of each row — so gate/up is one GEMV for any number of rows, while
  // q/k/v is stacked for one token only (rope, the KV write and FIA read them as contiguous rows).
  Tensor qkv1_, gate_up_;
  Tensor q_rows(std::int64_t n) const;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  bool mixes_ = false;
};

}  // namespace npugraph::llm
