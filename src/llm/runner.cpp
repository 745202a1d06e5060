#include "llm/runner.hpp"

#include "llm/arch/architecture.hpp"
#include "llm/logprobs.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "npugraph/error.hpp"
#include "npugraph/llm/tensor_parallel.hpp"
#include "npugraph/ops/elementwise.hpp"
#include "npugraph/ops/embedding.hpp"
#include "npugraph/ops/fia.hpp"
#include "npugraph/ops/fia_record.hpp"
#include "npugraph/ops/kv_cache.hpp"
#include "npugraph/ops/linear.hpp"
#include "npugraph/ops/rms_norm.hpp"
#include "npugraph/ops/rope.hpp"
#include "npugraph/ops/sampling.hpp"
#include "npugraph/ops/swiglu.hpp"
#include "npugraph/recorded_updates.hpp"
#include "npugraph/tasks.hpp"

namespace npugraph::llm {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void embed(const Tensor& ids, const Matrix& table, const Tensor& out) {
  if (table.quant.defined()) ops::embedding_out(ids, table.quant, out);
  else ops::embedding_out(ids, table.dense, out);
}

Tensor rows(const Tensor& t, std::int64_t n) { return t.narrow(0, 0, n); }
// The same, or nothing for a buffer not allocated (the window's, for a model without one).
Tensor rows_if(const Tensor& t, std::int64_t n) { return t.defined() ? rows(t, n) : Tensor{}; }

// torch_npu's compressed mask for sparse modes 2-4: bool [2048, 2048], 1 above the diagonal (FIA
// checks its shape and dtype; causal masking itself comes from sparse_mode 3).
Tensor compressed_causal_mask() {
  Tensor m = empty({2048, 2048}, DType::boolean);
  auto* p = static_cast<std::uint8_t*>(m.data());
  for (std::int64_t i = 0; i < 2048; ++i)
    for (std::int64_t j = 0; j < 2048; ++j) p[i * 2048 + j] = j > i ? 1 : 0;
  return m;
}

template <class T>
T* host(const Tensor& t) {
  return static_cast<T*>(t.data());
}

}  // namespace

struct ModelRunner::Rows {
  std::int64_t n = 0;      // tokens in this pass
  bool prefill = false;    // one sequence's prompt chunk (else one token per sequence)
  bool logits = true;      // compute the last tokens' logits and sample
  std::int64_t batch = 0;  // FIA batch: 1 for a prefill chunk, n for a decode step
  std::int64_t q_len = 0;  // FIA query S: n for a prefill chunk, 1 for a decode step
  std::vector<std::int64_t> kv_lengths;  // per FIA batch row
  Tensor block_table;                    // [batch, max_blocks]
  // What sliding-window layers take instead when q_len == 1 (Note [Sliding window]): each row's
  // KV length from its window table row's first block, that table, and the mask over it.
  std::vector<std::int64_t> window_lengths;
  Tensor window_table;  // [batch, window_blocks]
  Tensor window_mask;   // [batch, 1, window_blocks * block_size]
  // A mixed step (Note [Mixed steps]): its decode rows' part and its chunk's part, each attending as
  // it does in its own pass; a part's first row in the step's buffers (-1: not a part); the chunk's
  // last row when the chunk ends its prompt (its logits follow the decode rows'), else -1.
  std::vector<Rows> parts;
  std::int64_t first = -1;
  std::int64_t chunk_last = -1;
};

struct ModelRunner::Bucket {
  std::int64_t rows = 0;
  Graph graph;
  // update_then_replay: each attention layer a recorded call (Note [Recorded updates]).
  std::unique_ptr<RecordedUpdates> records;
  ops::FiaRecorder recorder;
  // replay_then_update: one task group per attention layer, and the event each one waits on.
  std::vector<TaskGroupHandle> handles;
  std::vector<ExternalEvent> ready;
};

ModelRunner::ModelRunner(std::shared_ptr<const Model> model, const EngineOptions& options)
    : model_(std::move(model)),
      options_(options),
      heads_(model_->shard().heads),
      kv_heads_(model_->shard().kv_heads),
      q_dim_(heads_ * model_->config().head_dim),
      kv_dim_(kv_heads_ * model_->config().head_dim),
      ffn_(model_->shard().ffn),
      max_batch_(options.max_batch),
      max_rows_(options.max_batch + options.prefill_chunk),  // a mixed step's rows at most
      max_blocks_((options.max_context + options.block_size - 1) / options.block_size),
      device_(options.device),
      arch_(architecture(model_->config().architecture, model_->file().name())),
      linear_{.activations = options.activations.value_or(device_.is_cpu() ? ops::Activations::q8
                                                                           : ops::Activations::f32)},
      stream_(device_.is_cpu() ? Stream::create(device_, {.num_threads = options.threads}) : Stream::create(device_)),
      update_stream_(Stream::create(device_)),
      blocks_(options.max_batch * ((options.max_context + options.block_size - 1) / options.block_size),
              options.block_size, options.prefix_cache) {
  const ModelConfig& c = model_->config();
  const std::int64_t nb = blocks_.num_blocks(), bs = options.block_size;
  const Device d = device_;
  // The weights, copied once (Note [Engine on a device]); a tied output is the embeddings' copy,
  // in the projections' layout (the embedding lookup reads rows16 too).
  const Matrix& out = model_->output;
  const Matrix& emb = model_->token_embd;
  const bool tied = (out.quant.defined() && emb.quant.defined() && out.quant.data() == emb.quant.data()) ||
                    (out.dense.defined() && emb.dense.defined() && out.dense.data() == emb.dense.data());
  token_embd_ = tied ? for_linear(model_->token_embd) : on_device(model_->token_embd);
  output_ = tied ? token_embd_ : for_linear(model_->output);
  output_norm_ = on_device(model_->output_norm);
  if (model_->rope_freqs.defined()) rope_freqs_ = on_device(model_->rope_freqs);
  for (const LayerWeights& w : model_->layers) {  // by the architecture's table (Note [Tensor tables])
    LayerWeights& lw = layers_.emplace_back();
    for (const LayerTensor& t : arch_.layer_tensors()) {
      if (t.as_matrix) lw.*t.as_matrix = for_linear(w.*t.as_matrix);
      else if (t.as_vector) lw.*t.as_vector = on_device(w.*t.as_vector);
      else if (const Matrix& x = w.extra.at(t.name); t.matrix) lw.extra[t.name] = for_linear(x);
      else lw.extra[t.name] = Matrix{.dense = on_device(x.dense)};
    }
    lw.qkv_bias = on_device(w.qkv_bias);  // the stacks the loader made
    lw.qkv = for_linear(w.qkv);
    lw.gate_up = for_linear(w.gate_up);
  }
  for (std::int64_t l = 0; l < c.layers; ++l) {
    const std::int64_t hd = model_->config().head_dim;  // Note [KV cache layout]
    // Not written here: the default cache (16 sequences of 2048 tokens) is 1.5 GB for SmolLM2 in
    // float32, and its pages are taken as the steps first reach them (Note [Cache writes miss] in
    // reshape_and_cache.cpp).
    k_cache_.push_back(empty({nb, kv_heads_, bs, hd}, options.kv_dtype, d));
    v_cache_.push_back(empty({nb, kv_heads_, bs, hd}, options.kv_dtype, d));
  }
  if (c.sliding_window > 0 && c.sliding_window < options.max_context) {  // Note [Sliding window]
    window_ = c.sliding_window;
    window_blocks_ = std::min(max_blocks_, (window_ + 2 * bs - 2) / bs);  // ceil((W + bs - 1) / bs)
  }
  // Note [Step inputs]: every persistent input and output of the step, declared once; the host
  // tensors start zeroed (empty block tables, masks, ids), the sampling rows greedy.
  const std::int64_t T = max_rows_, B = max_batch_, W = window_blocks_;
  // The adjustment lists (Note [Logit adjustments]): the cpu's sampler only.
  adjust_capacity_ = options.max_context + kMaxLogitBias;
  const Staged adjusts = d.is_cpu() ? Staged::always : Staged::absent;
  const std::int64_t C = adjust_capacity_;
  inputs_ = {
      {"ids", &ids_, DType::i32, {T}, Staged::always},
      {"positions", &positions_, DType::i32, {T}, Staged::always},
      {"slots", &slots_, DType::i32, {T}, Staged::always},
      {"block_table", &block_table_, DType::i32, {B, max_blocks_}, Staged::decode},
      {"prefill_table", &prefill_table_, DType::i32, {1, max_blocks_}, Staged::prefill},
      {"window_table", &window_table_, DType::i32, {B, W}, window_ > 0 ? Staged::always : Staged::absent},
      {"window_mask", &window_mask_, DType::u8, {B, 1, W * bs}, window_ > 0 ? Staged::always : Staged::absent},
      {"seeds", &seeds_, DType::i64, {B}, Staged::always},
      {"steps", &steps_, DType::i64, {B}, Staged::always},
      {"temperature", &temperature_, DType::f32, {B}, Staged::always},
      {"top_k", &top_k_, DType::i64, {B}, Staged::always},
      {"top_p", &top_p_, DType::f32, {B}, Staged::always},
      {"adjust_count", &adjust_count_, DType::i32, {B}, adjusts},
      {"adjust_tokens", &adjust_tokens_, DType::i32, {B, C}, adjusts},
      {"adjust_scale", &adjust_scale_, DType::f32, {B, C}, adjusts},
      {"adjust_add", &adjust_add_, DType::f32, {B, C}, adjusts},
      // The token masks (Note [Token constraints]): likewise the cpu's sampler only.
      {"mask_on", &mask_on_, DType::i32, {B}, adjusts},
      {"mask_bits", &mask_bits_, DType::i32, {B, (c.vocab + 31) / 32}, adjusts},
      {"next_ids", &next_ids_, DType::i32, {B}, Staged::read_back},
  };
  for (const StepInput& in : inputs_) {
    if (in.staged == Staged::absent) continue;
    in.buffer->host = empty(in.shape, in.dtype);
    std::memset(in.buffer->host.data(), 0, in.buffer->host.nbytes());
  }
  for (std::int64_t b = 0; b < max_batch_; ++b) write_sampling(b, nullptr);
  for (const StepInput& in : inputs_)
    if (in.staged != Staged::absent) in.buffer->device = on_device(in.buffer->host);
  x_ = empty({max_rows_, c.hidden}, DType::f32, d);
  h_ = empty({max_rows_, c.hidden}, DType::f32, d);
  y_ = empty({max_rows_, c.hidden}, DType::f32, d);
  q_ = empty({max_rows_, q_dim_}, DType::f32, d);
  k_ = empty({max_rows_, kv_dim_}, DType::f32, d);
  v_ = empty({max_rows_, kv_dim_}, DType::f32, d);
  attn_ = empty({max_rows_, q_dim_}, DType::f32, d);
  act_ = empty({max_rows_, ffn_}, DType::f32, d);
  last_ = empty({max_batch_, c.hidden}, DType::f32, d);
  logits_ = empty({max_batch_, c.vocab}, DType::f32, d);
  logits_h_ = d.is_cpu() ? logits_ : empty({max_batch_, c.vocab}, DType::f32);
  lse_ = empty({1}, DType::f32, d);
  mask_ = on_device(compressed_causal_mask());
  const LayerWeights& first = layers_.front();
  if (options.fuse_projections && first.qkv.defined() && first.gate_up.defined()) {
    qkv1_ = empty({q_dim_ + 2 * kv_dim_}, DType::f32, d);
    gate_up_ = empty({max_rows_, 2 * ffn_}, DType::f32, d);
  } else {
    gate_ = empty({max_rows_, ffn_}, DType::f32, d);
    up_ = empty({max_rows_, ffn_}, DType::f32, d);
  }
  // One workspace for every pass: FIA sizes it from the shapes only (not the lengths).
  std::int64_t ws = 0;
  auto need = [&](const Rows& r) {
    const Tensor query = rows(q_, r.n).view({r.batch, r.q_len, q_dim_});
    for (bool sliding : {false, window_ > 0})
      ws = std::max(ws, ops::fia_workspace_bytes(query, k_cache_[0], v_cache_[0], attention_options(r, sliding)));
  };
  // Every shape a pass can take — decode rows 1 .. max_batch (mixed steps' decode parts are not
  // padded to a bucket), chunks of 1 .. prefill_chunk tokens: the bytes are not monotonic in the
  // shape (a 106-token chunk needed more than a 128-token one, and more than the workspace sized
  // at the powers of two, with max_batch 4).
  for (std::int64_t b = 1; b <= max_batch_; ++b) need(placeholder_rows(b));
  for (std::int64_t t = 1; t <= options.prefill_chunk; ++t)
    need({.n = t, .prefill = true, .batch = 1, .q_len = t, .kv_lengths = {t}, .block_table = prefill_table_.device,
          .window_lengths = {1}, .window_table = rows_if(window_table_.device, 1), .window_mask = rows_if(window_mask_.device, 1)});
  workspace_ = empty({ws}, DType::u8, d);
  mixes_ = options.mixed_steps && d.is_cpu() && !(options.tensor_parallel && options.tensor_parallel->size() > 1);
  stream_.synchronize();  // the copies above read host memory this constructor's callers may free
}

ModelRunner::~ModelRunner() = default;

Tensor ModelRunner::on_device(const Tensor& host) {
  if (!host.defined() || device_.is_cpu()) return host;
  Tensor t = empty(host.shape(), host.dtype(), device_);
  copy_(stream_, t, host);
  return t;
}

Matrix ModelRunner::on_device(const Matrix& host) {
  if (device_.is_cpu()) return host;
  Matrix m;
  if (host.quant.defined())
    m.quant = ops::QuantWeight(on_device(host.quant.bytes()), host.quant.type(), host.quant.rows(), host.quant.cols());
  m.dense = on_device(host.dense);
  return m;
}

// Q8 activations on the cpu: the quantised projections in the rows16 layout, whose GEMV keeps one
// weight row per SIMD lane (Note [Packed weights]); a tied output's embeddings too.
Matrix ModelRunner::for_linear(const Matrix& host) {
  Matrix m = on_device(host);
  if (device_.is_cpu() && linear_.activations == ops::Activations::q8 && m.quant.defined() &&
      ops::quant_traits(m.quant.type()).rows16 && ops::quant_traits(m.quant.type()).q8_kernel)
    m.quant = ops::pack_rows16(m.quant);
  return m;
}

void ModelRunner::stage_inputs(bool prefill) {
  if (device_.is_cpu()) return;  // the staging tensors are the buffers
  for (const StepInput& in : inputs_)
    if (in.staged == Staged::always || in.staged == (prefill ? Staged::prefill : Staged::decode))
      copy_(stream_, in.buffer->device, in.buffer->host);
}

void ModelRunner::write_sampling(std::int64_t b, const Sequence* s) {
  host<std::int64_t>(seeds_.host)[b] = s ? static_cast<std::int64_t>(s->seed) : 0;
  host<std::int64_t>(steps_.host)[b] = s ? s->generated : 0;
  host<float>(temperature_.host)[b] = s ? s->temperature : 0.0f;
  host<std::int64_t>(top_k_.host)[b] = s ? s->top_k : 0;
  host<float>(top_p_.host)[b] = s ? s->top_p : 1.0f;
  if (!adjust_count_.host.defined()) return;
  const std::int64_t at = b * adjust_capacity_;
  host<std::int32_t>(adjust_count_.host)[b] =
      s ? s->adjust.write(host<std::int32_t>(adjust_tokens_.host) + at, host<float>(adjust_scale_.host) + at,
                          host<float>(adjust_add_.host) + at, adjust_capacity_)
        : 0;
  const bool masked = s && s->constraint;
  host<std::int32_t>(mask_on_.host)[b] = masked ? 1 : 0;
  if (masked) {
    const std::int64_t words = mask_bits_.host.size(1);
    const std::span<std::uint32_t> row(reinterpret_cast<std::uint32_t*>(host<std::int32_t>(mask_bits_.host) + b * words),
                                       static_cast<std::size_t>(words));
    std::fill(row.begin(), row.end(), 0u);
    s->constraint->allowed(row);
  }
}

void ModelRunner::read_back(std::int64_t n, bool logits) {
  if (device_.is_cpu()) return;
  copy_(stream_, next_ids_.host, next_ids_.device);
  if (logits || options_.keep_logits || options_.keep_full_logits) copy_(stream_, rows(logits_h_, n), rows(logits_, n));
}

Tensor ModelRunner::q_rows(std::int64_t n) const {
  if (n == 1 && qkv1_.defined()) return qkv1_.narrow(0, 0, q_dim_).view({1, q_dim_});
  return rows(q_, n);
}

std::int64_t ModelRunner::bucket_for(std::int64_t batch) const {
  for (std::int64_t b : kBuckets)
    if (b >= batch && b <= max_batch_) return b;
  return max_batch_;
}

bool ModelRunner::windowed(std::size_t layer) const {
  return window_ > 0 && model_->config().is_sliding(static_cast<std::int64_t>(layer));
}

std::int64_t ModelRunner::window_skip(std::int64_t length) const {
  return std::max<std::int64_t>(0, length - window_) / options_.block_size;
}

std::int64_t ModelRunner::window_length(std::int64_t length) const {
  return length - window_skip(length) * options_.block_size;
}

std::int64_t ModelRunner::write_window(std::int64_t row, std::span<const std::int32_t> blocks, std::int64_t length) {
  const std::int64_t bs = options_.block_size, skip = window_skip(length);
  std::int32_t* table = host<std::int32_t>(window_table_.host) + row * window_blocks_;
  const auto from = std::min(static_cast<std::size_t>(skip), blocks.size());
  const auto n = std::min(static_cast<std::size_t>(window_blocks_), blocks.size() - from);
  std::copy_n(blocks.begin() + static_cast<std::ptrdiff_t>(from), n, table);
  std::fill(table + n, table + window_blocks_, 0);
  auto* mask = host<std::uint8_t>(window_mask_.host) + row * window_blocks_ * bs;
  const std::int64_t hidden = std::max<std::int64_t>(0, length - window_) - skip * bs;  // < bs
  std::fill(mask, mask + hidden, std::uint8_t{1});
  std::fill(mask + hidden, mask + window_blocks_ * bs, std::uint8_t{0});
  return window_length(length);
}

ops::FiaOptions ModelRunner::attention_options(const Rows& r, bool sliding) const {
  const ModelConfig& c = model_->config();
  ops::FiaOptions o;
  o.actual_seq_lengths_kv = r.kv_lengths;
  o.block_table = r.block_table;
  o.num_heads = heads_;
  o.num_key_value_heads = kv_heads_;
  o.scale = c.attention_scale > 0 ? c.attention_scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  o.input_layout = "BSH";
  o.block_size = options_.block_size;
  if (r.q_len > 1) {  // a prefill chunk: bottom-right causal over the cached prefix and this chunk
    o.actual_seq_lengths = {r.q_len};
    o.sparse_mode = 3;
    o.atten_mask = mask_;
    if (sliding) {  // and within the window: the band p - W < j <= p (Note [Sliding window])
      o.sparse_mode = 4;
      o.pre_tokens = window_ - 1;
      o.next_tokens = 0;
    }
  } else if (sliding) {  // one query row per sequence: the window's blocks, its first one masked in part
    o.actual_seq_lengths_kv = r.window_lengths;
    o.block_table = r.window_table;
    o.atten_mask = r.window_mask;
  }
  return o;
}

void ModelRunner::issue_attention(const Rows& r, std::size_t layer, Bucket* capture) {
  if (!r.parts.empty()) {  // a mixed step (eager): each part's call, as in its own pass
    for (const Rows& part : r.parts) issue_attention(part, layer, nullptr);
    return;
  }
  const Tensor query = (r.first >= 0 ? q_.narrow(0, r.first, r.n) : q_rows(r.n)).view({r.batch, r.q_len, q_dim_});
  const Tensor out = attn_.narrow(0, std::max<std::int64_t>(r.first, 0), r.n).view({r.batch, r.q_len, q_dim_});
  const ops::FiaOptions o = attention_options(r, windowed(layer));
  if (!capture) {
    ops::fused_infer_attention_score_out(query, k_cache_[layer], v_cache_[layer], o, workspace_, out, lse_);
    return;
  }
  if (capture->records) {  // its own group behind its own event, updated as the protocol says
    const ops::FiaOutBuffers given{.workspace = workspace_, .attention_out = out, .softmax_lse = lse_};
    NG_CHECK_STATE(capture->recorder.record(*capture->records, query, k_cache_[layer], v_cache_[layer], o, 0, &given),
                   "decode step capture: layer ", layer, "'s attention was not recorded (its stream does not capture)");
    return;
  }
  capture->ready[layer].wait(stream_);
  task_group_begin(stream_);
  ops::fused_infer_attention_score_out(query, k_cache_[layer], v_cache_[layer], o, workspace_, out, lse_);
  capture->handles.push_back(task_group_end(stream_));
}

void ModelRunner::issue_sampling(std::int64_t n, const Tensor& logits) {
  // Each row's own settings from the device buffers (greedy rows are argmax), so one captured step
  // serves any mix of requests. The CUDA kernel takes temperatures only (the engine refuses top-k /
  // top-p requests there).
  // The adjustment lists (penalties, biases: Note [Logit adjustments]) likewise, on the cpu.
  ops::SamplingRows r{.temperature = rows(temperature_.device, n),
                      .top_k = device_.is_cpu() ? rows(top_k_.device, n) : Tensor{},
                      .top_p = device_.is_cpu() ? rows(top_p_.device, n) : Tensor{}};
  if (adjust_count_.device.defined())
    r.adjust = {.count = rows(adjust_count_.device, n), .tokens = rows(adjust_tokens_.device, n),
                .scale = rows(adjust_scale_.device, n), .add = rows(adjust_add_.device, n)};
  if (mask_on_.device.defined()) r.mask = {.on = rows(mask_on_.device, n), .bits = rows(mask_bits_.device, n)};
  ops::sample_rows_out(logits, rows(seeds_.device, n), rows(steps_.device, n), r, rows(next_ids_.device, n));
}

void ModelRunner::reduce(const Tensor& partial) {
  if (options_.tensor_parallel && options_.tensor_parallel->size() > 1) options_.tensor_parallel->all_reduce(partial);
}

// The forward pass of `r.n` tokens as ops on the current stream (the runner's): the same calls
// eager, captured (capture != null) or prefilling.
void ModelRunner::issue_step(const Rows& r, Bucket* capture) {
  const ModelConfig& c = model_->config();
  const std::int64_t n = r.n;
  // One token with stacked projections: q, k, v (gate, up) are the parts of one GEMV's output.
  const bool stacked = n == 1 && qkv1_.defined();
  auto part = [](const Tensor& all, std::int64_t start, std::int64_t length) {
    return all.narrow(0, start, length).view({1, length});
  };
  embed(rows(ids_.device, n), token_embd_, rows(x_, n));
  if (c.embedding_scale != 1.0) ops::scale_out(rows(x_, n), c.embedding_scale, rows(x_, n));
  LayerStep s{.config = &c, .n = n, .heads = heads_, .kv_heads = kv_heads_, .linear = linear_};
  s.x = rows(x_, n);
  s.h = rows(h_, n);
  s.y = rows(y_, n);
  s.q = q_rows(n);
  s.k = stacked ? part(qkv1_, q_dim_, kv_dim_) : rows(k_, n);
  s.v = stacked ? part(qkv1_, q_dim_ + kv_dim_, kv_dim_) : rows(v_, n);
  if (stacked) s.qkv1 = qkv1_;
  s.attn = rows(attn_, n);
  s.act = rows(act_, n);
  if (gate_up_.defined()) {  // gate|up as one GEMV for any number of rows (the fused weights are loaded)
    s.gate_up = rows(gate_up_, n);
  } else {
    s.gate = rows(gate_, n);
    s.up = rows(up_, n);
  }
  s.positions = rows(positions_.device, n);
  s.slots = rows(slots_.device, n);
  s.rope_freqs = rope_freqs_;
  if (!r.parts.empty()) s.split = r.parts.front().n;  // a mixed step's decode rows (Note [Mixed steps])
  std::size_t layer = 0;
  s.attention = [&] { issue_attention(r, layer, capture); };
  s.reduce = [this](const Tensor& partial) { reduce(partial); };
  for (; layer < layers_.size(); ++layer) {
    s.layer = static_cast<std::int64_t>(layer);
    s.w = &layers_[layer];
    s.k_cache = k_cache_[layer];
    s.v_cache = v_cache_[layer];
    arch_.layer(s);
  }
  if (!r.logits) return;
  const Tensor x = s.x;
  if (!r.parts.empty()) {  // mixed: the decode rows, then the chunk's last row if it ends its prompt
    const std::int64_t decoding = r.parts.front().n;
    ops::rms_norm_out(x.narrow(0, 0, decoding), output_norm_, c.rms_eps, rows(last_, decoding));
    if (r.chunk_last >= 0)
      ops::rms_norm_out(x.narrow(0, r.chunk_last, 1), output_norm_, c.rms_eps, last_.narrow(0, decoding, 1));
    const std::int64_t wanted = decoding + (r.chunk_last >= 0 ? 1 : 0);
    matmul(rows(last_, wanted), output_, Tensor(), rows(logits_, wanted), linear_);
    issue_sampling(wanted, rows(logits_, wanted));
    return;
  }
  const std::int64_t last = r.prefill ? 1 : n;  // the rows whose next token is wanted
  const Tensor last_x = r.prefill ? x.narrow(0, n - 1, 1) : x;
  ops::rms_norm_out(last_x, output_norm_, c.rms_eps, rows(last_, last));
  matmul(rows(last_, last), output_, Tensor(), rows(logits_, last), linear_);
  issue_sampling(last, rows(logits_, last));
}

// A decode step of n rows with valid placeholders: length 1 (block 0) for every row, as a bucket is
// captured (each step updates them).
ModelRunner::Rows ModelRunner::placeholder_rows(std::int64_t n) const {
  const std::vector<std::int64_t> ones(static_cast<std::size_t>(n), 1);
  return decode_rows(n, ones, ones);
}

// The rows of a decode step of n rows (the batch's sequences, then padding) at these lengths.
ModelRunner::Rows ModelRunner::decode_rows(std::int64_t n, std::vector<std::int64_t> lengths,
                                           std::vector<std::int64_t> window_lengths) const {
  return {.n = n, .batch = n, .q_len = 1, .kv_lengths = std::move(lengths), .block_table = rows(block_table_.device, n),
          .window_lengths = std::move(window_lengths), .window_table = rows_if(window_table_.device, n),
          .window_mask = rows_if(window_mask_.device, n)};
}

ModelRunner::Bucket& ModelRunner::bucket(std::int64_t n) {
  for (auto& b : buckets_)
    if (b->rows == n) return *b;
  auto b = std::make_unique<Bucket>();
  b->rows = n;
  if (options_.order == GraphOrder::update_then_replay) {
    b->records = std::make_unique<RecordedUpdates>(b->graph, stream_, UpdateOrdering::stream);
  } else {
    for (std::size_t l = 0; l < model_->layers.size(); ++l)
      b->ready.emplace_back("layer " + std::to_string(l) + " attention ready (bucket " + std::to_string(n) + ")");
  }
  const Rows r = placeholder_rows(n);
  {
    StreamGuard on(stream_);
    b->graph.capture_begin(stream_, {.mode = CaptureMode::thread_local_});
    try {
      issue_step(r, b.get());
    } catch (...) {
      b->graph.reset();
      throw;
    }
    b->graph.capture_end(stream_);
  }
  buckets_.push_back(std::move(b));
  return *buckets_.back();
}

void ModelRunner::write_inputs(std::span<Sequence* const> batch, std::int64_t n) {
  const std::int64_t bs = options_.block_size;
  auto* ids = host<std::int32_t>(ids_.host);
  auto* pos = host<std::int32_t>(positions_.host);
  auto* slots = host<std::int32_t>(slots_.host);
  auto* table = host<std::int32_t>(block_table_.host);
  for (std::int64_t b = 0; b < n; ++b) {
    std::int32_t* row = table + b * max_blocks_;
    if (b >= static_cast<std::int64_t>(batch.size())) {  // padding (Note [Decode step graph])
      ids[b] = 0, pos[b] = 0, slots[b] = -1;
      write_sampling(b, nullptr);
      std::fill(row, row + max_blocks_, 0);
      if (window_ > 0) write_window(b, {}, 0);
      continue;
    }
    Sequence& s = *batch[static_cast<std::size_t>(b)];
    const std::int64_t p = s.cached;
    NG_CHECK_AS(ResourceError, blocks_.reserve(s.blocks, p + 1), "KV cache full: ", blocks_.num_blocks(),
                " blocks of ", bs, " tokens are in use");
    ids[b] = s.tokens[static_cast<std::size_t>(p)];
    pos[b] = static_cast<std::int32_t>(p);
    slots[b] = static_cast<std::int32_t>(s.blocks[static_cast<std::size_t>(p / bs)] * bs + p % bs);
    std::copy(s.blocks.begin(), s.blocks.end(), row);
    std::fill(row + s.blocks.size(), row + max_blocks_, 0);
    if (window_ > 0) write_window(b, s.blocks, p + 1);
    write_sampling(b, &s);
  }
}

void ModelRunner::update(Bucket& b, const Rows& r, bool per_layer) {
  // Only the KV lengths change from step to step: every tensor is the one the bucket captured (its
  // rows of the persistent buffers, each layer's cache), so each layer's task is re-issued with its
  // host values only (Note [FIA host-value update]) — a sliding-window layer's with the window lengths.
  const ops::FiaOptions global = attention_options(r, false), sliding = attention_options(r, window_ > 0);
  if (!per_layer) {  // the recorded calls' update: one batched update the next replay waits for
    RecordedUpdates::Update u(*b.records, b.graph, "decode step update");
    u.wait_for_replays();
    for (std::size_t l = 0; l < u.size(); ++l) {
      auto& call = static_cast<ops::FiaCall&>(u.call(l));
      const ops::FiaOptions& o = windowed(l) ? sliding : global;
      call.staging().actual_seq_lengths_kv.assign(o.actual_seq_lengths_kv.begin(), o.actual_seq_lengths_kv.end());
      call.stage([](ops::FiaOptions& a, ops::FiaOptions& z) { std::swap(a.actual_seq_lengths_kv, z.actual_seq_lengths_kv); },
                 /*host_value=*/true);
    }
    u.issue();
    return;
  }
  const ops::FiaHostValues lengths[2] = {ops::FiaHostValues::of(global), ops::FiaHostValues::of(sliding)};
  auto of = [&](std::size_t layer) { return lengths[windowed(layer) ? 1 : 0]; };
  StreamGuard on(update_stream_);
  for (std::size_t l = 0; l < b.handles.size(); ++l) {
    task_update_begin(update_stream_, b.handles[l]);
    ops::fused_infer_attention_score_update(update_stream_, of(l));  // abandons it on error
    task_update_end(update_stream_, std::span<const ExternalEvent>(&b.ready[l], 1));
  }
}

Tensor ModelRunner::decode(std::span<Sequence* const> batch, StepMode mode, StepTimes& times) {
  const std::int64_t n = bucket_for(static_cast<std::int64_t>(batch.size()));
  NG_CHECK_ARG(!batch.empty() && static_cast<std::int64_t>(batch.size()) <= max_batch_, "decode: batch of ",
               batch.size(), " sequences: must be 1..", max_batch_);
  Bucket* b = mode == StepMode::graph ? &bucket(n) : nullptr;  // captured once, before the timing
  auto t = Clock::now();
  write_inputs(batch, n);
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(n), 0), window_lengths(lengths);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    lengths[i] = batch[i]->cached + 1;
    window_lengths[i] = window_length(lengths[i]);
  }
  const Rows r = decode_rows(n, std::move(lengths), std::move(window_lengths));
  stage_inputs(/*prefill=*/false);
  times.inputs += since(t);
  if (!b) {
    t = Clock::now();
    {
      StreamGuard on(stream_);
      issue_step(r, nullptr);
    }
    times.launch += since(t);
  } else if (options_.order == GraphOrder::update_then_replay) {
    t = Clock::now();
    update(*b, r, /*per_layer=*/false);
    times.update += since(t);
    t = Clock::now();
    b->records->replay(b->graph, stream_);
    times.launch += since(t);
  } else {
    t = Clock::now();
    b->graph.replay(stream_);
    times.launch += since(t);
    t = Clock::now();
    update(*b, r, /*per_layer=*/true);
    times.update += since(t);
  }
  t = Clock::now();
  read_back(n, std::any_of(batch.begin(), batch.end(), [](const Sequence* s) { return s->logprobs >= 0; }));
  stream_.synchronize();
  times.wait += since(t);
  for (Sequence* s : batch) s->cached += 1;
  return rows(logits_h_, static_cast<std::int64_t>(batch.size()));
}

Tensor ModelRunner::mixed(std::span<Sequence* const> batch, Sequence& seq, StepTimes& times) {
  const auto decoding = static_cast<std::int64_t>(batch.size());
  NG_CHECK_STATE(mixes_, "mixed step: this runner's steps do not mix (Note [Mixed steps])");
  NG_CHECK_ARG(decoding >= 1 && decoding < max_batch_, "mixed step: ", decoding, " decode rows: must be 1..",
               max_batch_ - 1, " (the chunk's sequence holds a batch row too)");
  const std::int64_t total = static_cast<std::int64_t>(seq.tokens.size()), bs = options_.block_size;
  const std::int64_t start = seq.cached, n = std::min(options_.prefill_chunk, total - start);
  NG_CHECK_ARG(n >= 1, "mixed step: the chunk's sequence is prefilled already (", start, " of ", total, " tokens)");
  NG_CHECK_AS(ResourceError, blocks_.reserve(seq.blocks, total), "KV cache full: a prompt of ", total,
              " tokens needs ", blocks_.blocks_for(total), " blocks, ", blocks_.free_blocks(), " are free");
  auto t = Clock::now();
  write_inputs(batch, decoding);  // rows 0 .. decoding: the decode rows, as decode() writes them
  auto* ids = host<std::int32_t>(ids_.host);
  auto* pos = host<std::int32_t>(positions_.host);
  auto* slots = host<std::int32_t>(slots_.host);
  for (std::int64_t i = 0; i < n; ++i) {  // then the chunk's, as prefill() writes them
    const std::int64_t p = start + i, row = decoding + i;
    ids[row] = seq.tokens[static_cast<std::size_t>(p)];
    pos[row] = static_cast<std::int32_t>(p);
    slots[row] = static_cast<std::int32_t>(seq.blocks[static_cast<std::size_t>(p / bs)] * bs + p % bs);
  }
  auto* table = host<std::int32_t>(prefill_table_.host);
  std::copy(seq.blocks.begin(), seq.blocks.end(), table);
  std::fill(table + seq.blocks.size(), table + max_blocks_, 0);
  const bool ends = start + n == total;
  if (ends) write_sampling(decoding, &seq);  // its first token's row follows the decode rows
  std::vector<std::int64_t> lengths, window_lengths;
  for (const Sequence* s : batch) {
    lengths.push_back(s->cached + 1);
    window_lengths.push_back(window_length(s->cached + 1));
  }
  Rows r{.n = decoding + n, .batch = decoding + n, .chunk_last = ends ? decoding + n - 1 : -1};
  r.parts.push_back(decode_rows(decoding, std::move(lengths), std::move(window_lengths)));
  r.parts.back().first = 0;
  Rows& chunk = r.parts.emplace_back(Rows{.n = n, .prefill = true, .logits = ends, .batch = 1, .q_len = n,
                                          .kv_lengths = {start + n}, .block_table = prefill_table_.device});
  chunk.first = decoding;
  if (n == 1 && window_ > 0) {  // decode-shaped: the window buffers' row after the decode rows
    chunk.window_lengths = {write_window(decoding, seq.blocks, start + 1)};
    chunk.window_table = window_table_.device.narrow(0, decoding, 1);
    chunk.window_mask = window_mask_.device.narrow(0, decoding, 1);
  }
  times.inputs += since(t);
  t = Clock::now();
  {
    StreamGuard on(stream_);
    issue_step(r, nullptr);
  }
  times.launch += since(t);
  t = Clock::now();
  stream_.synchronize();
  times.wait += since(t);
  for (Sequence* s : batch) s->cached += 1;
  seq.cached = start + n;
  return rows(logits_h_, decoding + (ends ? 1 : 0));
}

Tensor ModelRunner::prefill(Sequence& seq, std::int64_t max_chunks) {
  const std::int64_t total = static_cast<std::int64_t>(seq.tokens.size()), bs = options_.block_size;
  NG_CHECK_AS(ResourceError, blocks_.reserve(seq.blocks, total), "KV cache full: a prompt of ", total,
              " tokens needs ", blocks_.blocks_for(total), " blocks, ", blocks_.free_blocks(), " are free");
  auto* table = host<std::int32_t>(prefill_table_.host);
  std::copy(seq.blocks.begin(), seq.blocks.end(), table);
  std::fill(table + seq.blocks.size(), table + max_blocks_, 0);
  write_sampling(0, &seq);
  StreamGuard on(stream_);
  for (std::int64_t chunk = 0; seq.cached < total && chunk < max_chunks; ++chunk) {
    const std::int64_t start = seq.cached, n = std::min(options_.prefill_chunk, total - start);
    auto* ids = host<std::int32_t>(ids_.host);
    auto* pos = host<std::int32_t>(positions_.host);
    auto* slots = host<std::int32_t>(slots_.host);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t p = start + i;
      ids[i] = seq.tokens[static_cast<std::size_t>(p)];
      pos[i] = static_cast<std::int32_t>(p);
      slots[i] = static_cast<std::int32_t>(seq.blocks[static_cast<std::size_t>(p / bs)] * bs + p % bs);
    }
    Rows r{.n = n, .prefill = true, .logits = start + n == total, .batch = 1, .q_len = n,
           .kv_lengths = {start + n}, .block_table = prefill_table_.device};
    if (n == 1 && window_ > 0) {  // decode-shaped: row 0 of the window buffers (Note [Sliding window])
      r.window_lengths = {write_window(0, seq.blocks, start + 1)};
      r.window_table = rows(window_table_.device, 1);
      r.window_mask = rows(window_mask_.device, 1);
    }
    stage_inputs(/*prefill=*/true);
    issue_step(r, nullptr);
    if (start + n == total) read_back(1, seq.logprobs >= 0);
    if (seq.prompt_logprobs >= 0) prompt_logprobs(seq, start, n);
    stream_.synchronize();  // the next chunk rewrites the input buffers
    seq.cached = start + n;
  }
  return seq.cached == total ? rows(logits_h_, 1) : Tensor{};
}

// The logprobs of prompt tokens start + 1 .. start + n (those in the prompt) from the chunk's rows:
// its final hidden states (x_, which the step leaves there) normed and projected to the vocabulary
// for every row, apart from the step's own last-row logits (so the tokens it samples are those it
// samples without prompt logprobs, bitwise), then log-softmax on the host (Note [Logprobs on the
// host]). Issued on the runner's stream after the chunk.
void ModelRunner::prompt_logprobs(Sequence& seq, std::int64_t start, std::int64_t n) {
  const ModelConfig& c = model_->config();
  if (!prompt_logits_.defined()) {
    prompt_logits_ = empty({options_.prefill_chunk, c.vocab}, DType::f32, device_);
    prompt_logits_h_ = device_.is_cpu() ? prompt_logits_ : empty({options_.prefill_chunk, c.vocab}, DType::f32);
  }
  ops::rms_norm_out(rows(x_, n), output_norm_, c.rms_eps, rows(y_, n));
  matmul(rows(y_, n), output_, Tensor(), rows(prompt_logits_, n), linear_);
  if (!device_.is_cpu()) copy_(stream_, rows(prompt_logits_h_, n), rows(prompt_logits_, n));
  stream_.synchronize();
  if (start == 0)  // the first prompt token has no logprob
    seq.prompt_logprobs_out.push_back({.token = seq.tokens[0], .logprob = std::numeric_limits<double>::quiet_NaN()});
  const auto total = static_cast<std::int64_t>(seq.tokens.size());
  const auto* logits = static_cast<const float*>(prompt_logits_h_.data());
  for (std::int64_t i = 0; i < n && start + i + 1 < total; ++i)
    seq.prompt_logprobs_out.push_back(token_logprob(logits + i * c.vocab, c.vocab,
                                                    seq.tokens[static_cast<std::size_t>(start + i + 1)],
                                                    seq.prompt_logprobs));
}

const std::int32_t* ModelRunner::next_ids() const { return host<const std::int32_t>(next_ids_.host); }

}  // namespace npugraph::llm
