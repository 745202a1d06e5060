// FIA's parameter block: the plain bytes one launch carries, written by the host (fia_block.cpp
// fills what fia_plan.cpp planned), read by the kernels through FiaLaunch (fia_launch.hpp) and
// compared by the update check (fia_update.cpp). The operator's semantics: docs/fia.md.
//
// Note [FIA parameter block]
// One launch = one block: a fixed header (FiaParams) followed by a tail of 4*B int64 values: the
// per-batch actual query lengths, actual KV lengths, first query token and first KV token (the
// last two are the cumulative starts of TND/NTD, else 0), already resolved (broadcast, defaults,
// decode rule applied), so the kernel never sees FiaOptions; then, in a block the plan built
// (FiaParams::has_dims), the tensors' dimensions (FiaTensorDims per FiaArg), which only the update
// check and the description read. A task update re-planned from its captured plan (Note [FIA
// re-plan]) leaves them out: it cannot change them, and they were 640 of the 2 KB every update
// copied twice. The kernel reads each tensor's rank and dtype from the key. Everything a task update may change
// lives here: those lengths, the shared-prefix length, the scale, pre/next tokens, the tensors'
// addresses and strides. The header's FiaShapeKey holds everything the shapes, dtypes, layout and
// flags decide (tensor signatures, options that are not host values, derived sizes); the workspace
// plan is a pure function of it, and fia_check_update refuses a block whose key differs from the
// captured one, so the plan of the captured launch stays valid. The block is trivially copyable,
// 8-byte aligned, and holds no pointers to host memory other than the tensors' data.
//
// Note [FIA decode]
// Decode (query S == 1, not TND/NTD) ignores actual_seq_lengths, pre/next tokens, sparse_mode and
// query padding: the host writes actual query length 1 and an unbounded band without anchor, so the
// kernel has no decode special case (an atten_mask still applies, in its decode shapes).
//
// Note [FIA views]
// Every tensor is seen as (b, n, s, d) with element strides (FiaView); one kernel serves every
// layout. TND/NTD/NSD views have stride_b = 0 (s is the token); paged caches are (block, n, row,
// d); atten_mask and pse_shift are (b, n, i, j) with stride 0 on broadcast dimensions; antiquant
// parameters are (b, n, s, d) over the token they scale (paged modes: (block, n, row, d));
// quant_scale2/quant_offset2 are (-, n, -, d) over the output channel.
//
// Note [FIA workspace]
// plan_workspace() (fia_plan.cpp) is the one function that sizes and lays out the workspace
// (fia_workspace_bytes and every launch take it from the plan); it reads only the FiaShapeKey, so
// an update (same key) keeps a valid plan and the size fia_max_workspace promises is enough for any
// lengths and any thread count. The workspace starts at align_up(workspace, kWorkspaceAlign)
// (kWorkspaceAlign bytes of slack let any base address be aligned) and holds one of two layouts,
// whichever the launch's kernel uses; the total is the larger of the two.
//   - simple kernel: the query rows (row r = (b * N + n) * Sq + s, or t * N + n for TND/NTD) split
//     into `chunks` parallel chunks of `grain` rows; chunk c owns the scratch at c * chunk_bytes,
//     float32 arrays: the query row (Dk), its rope part (Dr), one key row (Dk), its rope part
//     (Dr), one value row (Dv), the output accumulator (Dv) and the scores of one block of
//     kKvBlock columns, each rounded up to kWorkspaceAlign.
//   - fast kernels (Note [FIA fast kernels]): fast_slots = fast_slot_count() scratch slots of
//     fast_slot_bytes (one per core, at most kFastSlots: more workers than cores never run at
//     once); a launch uses min(threads, fast_slots) of them, each worker owning one and
//     taking units from a shared counter (a unit's result does not depend on the slot or thread
//     that computes it; the slot's contents are rewritten before they are read). A slot holds,
//     for fast_rows query rows: the float32 queries (fast_dk = Dk + Dr padded to kFastPad), the
//     accumulators (fast_dv = Dv padded), the states (max, sum), the scores/probabilities of one
//     chunk of kFastChunk columns; then the chunk's key tile (kFastChunk x fast_dk) and value tile
//     (kFastChunk x fast_dv) in float32. Decode plans (fast_splits > 0) add, after the slots, one
//     partial record of fast_partial_bytes (acc[fast_dv], max, sum, padding) per (query row,
//     split) for fast_splits = the most KV splits a (batch, KV head) can get for this shape
//     (ceil(KV capacity / kMinSplit), at most kMaxSplits); the launch chooses the actual splits
//     from the lengths and the thread count, never more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "npugraph/dtype.hpp"
#include "npugraph/kernel.hpp"

namespace npugraph::ops::attention {

// Every FIA message starts with the op's name.
inline constexpr const char* kOp = "fused_infer_attention_score: ";

enum class FiaLayout : std::uint8_t { bsh, bsnd, bnsd, nsd, tnd, ntd, nbsd /* output only */ };
const char* layout_name(FiaLayout layout);
// TND/NTD: one token dimension, cumulative lengths, B = the number of lengths.
inline bool is_token_layout(FiaLayout l) { return l == FiaLayout::tnd || l == FiaLayout::ntd; }

enum class FiaKvStore : std::uint8_t { contiguous, paged_bsh, paged_bnsd };
enum class FiaMaskKind : std::uint8_t { none, full, compressed };

// Tuning constants of the plan (pure functions of the shapes only).
inline constexpr std::int64_t kWorkspaceAlign = 64;
inline constexpr std::int64_t kKvBlock = 64;             // KV columns scored per softmax block
inline constexpr std::int64_t kMaxChunks = 256;          // parallel chunks at most
inline constexpr std::int64_t kMinChunkFlops = 1 << 16;  // rough work per chunk at least
inline constexpr std::int64_t kCompressedMask = 2048;    // the compressed mask of sparse_mode 2-4

// Unbounded band: |pre|, |next| are clamped to this so that i - pre and i + next never overflow.
inline constexpr std::int64_t kBandLimit = std::int64_t{1} << 60;

// Fast kernels (Note [FIA fast kernels] in fia_fast.hpp).
inline constexpr std::int64_t kFastChunk = 64;     // KV columns per tile
inline constexpr std::int64_t kFastPad = 16;       // float32 row padding (the widest vector)
inline constexpr std::int64_t kFastSlots = 64;     // scratch slots (threads used) at most
// The slots a workspace holds: the machine's cores, capped at kFastSlots (fixed per process).
std::int64_t fast_slot_count();
inline constexpr std::int64_t kDecodeMaxSeq = 4;   // query S up to this runs the decode kernel
inline constexpr std::int64_t kPrefillRows = 64;   // query rows (heads x positions) per prefill unit
inline constexpr std::int64_t kMinSplit = 256;     // KV columns per decode split at least
inline constexpr std::int64_t kMaxSplits = 32;     // decode splits per (batch, KV head) at most
inline constexpr std::int64_t kMaxHeadDim = 512;   // D at most (fia_plan_layout.cpp checks it)

struct FiaWorkspacePlan {
  // Simple kernel.
  std::int64_t rows = 0;    // query rows (B * N * Sq, or N * T), the unit of parallel work
  std::int64_t grain = 0;   // rows per chunk
  std::int64_t chunks = 0;  // ceil(rows / grain)
  std::int64_t q_offset = 0, q_rope_offset = 0, k_offset = 0, k_rope_offset = 0, v_offset = 0,
               acc_offset = 0, score_offset = 0;  // byte offsets inside a chunk's scratch
  std::int64_t chunk_bytes = 0;  // a multiple of kWorkspaceAlign
  // Fast kernels.
  std::int64_t fast_rows = 0;  // query rows per unit at most
  std::int64_t fast_dk = 0, fast_dv = 0;  // padded float32 row lengths (Dk + Dr, Dv)
  std::int64_t fast_q_offset = 0, fast_acc_offset = 0, fast_state_offset = 0,
               fast_score_offset = 0, fast_k_offset = 0, fast_v_offset = 0;  // inside a slot
  std::int64_t fast_slot_bytes = 0;
  std::int64_t fast_slots = 0;
  std::int64_t fast_splits = 0;         // decode: splits per (batch, KV head) at most; 0: prefill
  std::int64_t fast_tile = 0;           // prefill: query positions per unit
  std::int64_t fast_partial_offset = 0;  // decode: after the slots
  std::int64_t fast_partial_bytes = 0;   // one (row, split) record
  std::int64_t total_bytes = 0;  // kWorkspaceAlign + max(simple layout, fast layout)
};

// A tensor's presence and dtype, in the key (rank -1: undefined); its dimensions, in the block's
// dimension trailer (Note [FIA parameter block]). Both are compared by fia_check_update.
struct FiaTensorSig {
  std::int8_t rank = -1;
  DType dtype = DType::f32;
};
struct FiaTensorDims {
  std::int64_t d[4] = {};
};
std::string sig_text(const FiaTensorSig& s, const FiaTensorDims& dims);  // "float16[1, 2, 3]" or "undefined"

// The tensors with a signature, in the order fia_check_update reports them.
enum class FiaArg : std::uint8_t {
  query, key, value, query_rope, key_rope, key_shared_prefix, value_shared_prefix, pse_shift,
  atten_mask, block_table, query_padding_size, kv_padding_size, antiquant_scale, antiquant_offset,
  key_antiquant_scale, key_antiquant_offset, value_antiquant_scale, value_antiquant_offset,
  quant_scale2, quant_offset2, learnable_sink, count
};
const char* arg_name(FiaArg a);

// Everything the shapes, dtypes, layout and flags decide (Note [FIA parameter block]).
struct FiaShapeKey {
  FiaTensorSig sig[static_cast<int>(FiaArg::count)];
  // Options that are not host values (resolved: kv_heads is never 0).
  std::int64_t layout_in = 0, layout_out = 0, heads = 0, kv_heads = 0, sparse_mode = 0,
               inner_precise = 0, block_size = 0, antiquant_mode = 0, key_antiquant_mode = 0,
               value_antiquant_mode = 0, lse_flag = 0;
  // Derived sizes: batch (TND/NTD: the number of lengths), q_seq (S, or T), kv_seq (S, T, or the
  // paged capacity max_blocks * block_size), head dims, prefix S, paged geometry.
  std::int64_t batch = 0, q_seq = 0, kv_seq = 0, dk = 0, dv = 0, dr = 0, prefix_seq = 0,
               num_blocks = 0, max_blocks = 0;
  // Derived modes.
  std::int64_t decode = 0, kv_store = 0, mask_kind = 0, anchor = 0, out_int8 = 0;

  const FiaTensorSig& of(FiaArg a) const { return sig[static_cast<int>(a)]; }
  bool token() const { return is_token_layout(static_cast<FiaLayout>(layout_in)); }
  bool paged() const { return kv_store != static_cast<std::int64_t>(FiaKvStore::contiguous); }
};

struct FiaView {
  void* data = nullptr;
  std::int64_t stride[4] = {};  // b, n, s, d (elements)
};

inline constexpr std::uint32_t kFiaMagic = 0x46494133;  // "FIA3"

struct FiaParams {
  std::uint32_t magic = kFiaMagic;
  std::uint32_t header_bytes = sizeof(FiaParams);
  FiaShapeKey key;
  FiaWorkspacePlan plan;
  // Tensors (Note [FIA views]). Undefined optional tensors have data == nullptr.
  FiaView q, q_rope, k, k_rope, v, k_prefix, v_prefix, out, pse, mask;
  FiaView k_scale, k_offset, v_scale, v_offset, out_scale, out_offset;
  FiaView block_table;  // (b, -, i, -) int32
  FiaView sink;         // learnable_sink: (-, n, -, -), one logit per query head (Note [FIA learnable sink])
  float* lse = nullptr;       // (b, n, s) via lse_stride; null: softmax_lse not written
  std::int64_t lse_stride[3] = {};
  // Without softmax_lse_flag: softmax_lse's first element, set to 0 (zero bytes) by every launch, as
  // torch_npu's outputs hold 0 there (the eager form's 1-element lse; the .out form's given tensor).
  unsigned char* lse_zero = nullptr;
  std::int64_t lse_zero_bytes = 0;
  const std::int64_t* q_padding = nullptr;   // effective left padding (1 element), else null
  const std::int64_t* kv_padding = nullptr;
  std::byte* workspace = nullptr;
  std::int64_t workspace_bytes = 0;
  // Host values.
  std::int64_t pre_tokens = 0, next_tokens = 0;  // the resolved band, clamped to kBandLimit
  std::int64_t prefix_len = 0;                   // actual_shared_prefix_len
  float scale = 1.0f;
  std::uint32_t has_dims = 0;  // 1: the dimension trailer follows the tail
  // Followed by the tail: std::int64_t actual_q[B], actual_kv[B], q_start[B], kv_start[B]; then,
  // when has_dims, FiaTensorDims[FiaArg::count].
};
static_assert(std::is_trivially_copyable_v<FiaParams>);
static_assert(alignof(FiaParams) <= 8 && sizeof(FiaParams) % 8 == 0);

inline constexpr std::size_t kFiaTailArrays = 4;
inline constexpr std::size_t kFiaDimsBytes = static_cast<std::size_t>(FiaArg::count) * sizeof(FiaTensorDims);
// The header and the tail (without the dimension trailer).
inline std::size_t fia_block_bytes(std::int64_t batch) {
  return sizeof(FiaParams) + kFiaTailArrays * static_cast<std::size_t>(batch) * sizeof(std::int64_t);
}

// The batch count of an FIA block, or 0 when `block` is not one (magic, header size, batch >= 1,
// total size with or without the dimension trailer, as has_dims says). Reads four fields only: the
// storage need not be aligned. The kernel (FiaLaunch) and the update check decode blocks through it.
inline std::int64_t fia_block_batch(std::span<const std::byte> block);
// Whether a block (fia_block_batch() != 0) carries the dimension trailer, and a copy of it.
inline bool fia_block_has_dims(std::span<const std::byte> block);
inline void fia_block_dims(std::span<const std::byte> block, FiaTensorDims (&dims)[static_cast<int>(FiaArg::count)]);

// A parameter block under construction. The header is written in place by the plan before the
// batch count is known (start()), the tail is sized once the plan has found it (size_tail()), the
// dimension trailer is added last (attach_dims(); sizing the tail drops it): inline storage for
// batches up to kInlineBatch (no allocation on the update path), the heap beyond, where bytes() puts
// the header in front of the tail.
class FiaParamBuffer {
 public:
  static constexpr std::int64_t kInlineBatch = 64;

  // Default-initialises the header and forgets any tail.
  FiaParams& start() {
    batch_ = 0;
    heap_.clear();
    return *::new (static_cast<void*>(inline_)) FiaParams{};
  }
  // The same with a copy of `header` (a plan's static part).
  FiaParams& start(const FiaParams& header) {
    batch_ = 0;
    heap_.clear();
    return *::new (static_cast<void*>(inline_)) FiaParams(header);
  }
  // Sizes the tail for `batch` (>= 1) value arrays; the header is kept, without the trailer.
  void size_tail(std::int64_t batch) {
    batch_ = batch;
    header().has_dims = 0;
    if (batch <= kInlineBatch) {
      heap_.clear();
      heap_.shrink_to_fit();
    } else {
      heap_.assign((fia_block_bytes(batch) + kFiaDimsBytes) / sizeof(std::int64_t), 0);
    }
  }
  // Appends the dimension trailer (after size_tail()).
  void attach_dims(const FiaTensorDims* dims) {
    std::memcpy(tail_base() + kFiaTailArrays * batch_, dims, kFiaDimsBytes);
    header().has_dims = 1;
  }

  FiaParams& header() { return *reinterpret_cast<FiaParams*>(inline_); }
  const FiaParams& header() const { return *reinterpret_cast<const FiaParams*>(inline_); }
  std::int64_t* tail(std::size_t array) { return tail_base() + array * batch_; }
  std::int64_t* actual_q() { return tail(0); }
  std::int64_t* actual_kv() { return tail(1); }
  std::int64_t* q_start() { return tail(2); }
  std::int64_t* kv_start() { return tail(3); }
  std::int64_t batch() const { return batch_; }
  // The block: the header followed by the tail, contiguous.
  std::span<const std::byte> bytes() {
    const std::size_t size = fia_block_bytes(batch_) + (header().has_dims ? kFiaDimsBytes : 0);
    if (heap_.empty()) return {inline_, size};
    auto* base = reinterpret_cast<std::byte*>(heap_.data());
    std::memcpy(base, inline_, sizeof(FiaParams));
    return {base, size};
  }

 private:
  std::int64_t* tail_base() {
    return reinterpret_cast<std::int64_t*>(
        (heap_.empty() ? inline_ : reinterpret_cast<std::byte*>(heap_.data())) + sizeof(FiaParams));
  }
  alignas(16) std::byte inline_[sizeof(FiaParams) + kFiaTailArrays * kInlineBatch * sizeof(std::int64_t) +
                                kFiaDimsBytes];
  std::vector<std::int64_t> heap_;  // larger batches: room for the header, then the tail
  std::int64_t batch_ = 0;
};

inline std::int64_t fia_block_batch(std::span<const std::byte> block) {
  if (block.size() < sizeof(FiaParams)) return 0;
  auto field = [&]<class T>(T, std::size_t offset) {
    T v;
    std::memcpy(&v, block.data() + offset, sizeof v);
    return v;
  };
  const auto batch =
      field(std::int64_t{}, offsetof(FiaParams, key) + offsetof(FiaShapeKey, batch));
  const auto has_dims = field(std::uint32_t{}, offsetof(FiaParams, has_dims));
  const bool ok = field(std::uint32_t{}, offsetof(FiaParams, magic)) == kFiaMagic &&
                  field(std::uint32_t{}, offsetof(FiaParams, header_bytes)) == sizeof(FiaParams) &&
                  batch >= 1 && has_dims <= 1 && batch <= (std::int64_t{1} << 40) &&
                  block.size() == fia_block_bytes(batch) + (has_dims ? kFiaDimsBytes : 0);
  return ok ? batch : 0;
}

inline bool fia_block_has_dims(std::span<const std::byte> block) {
  std::uint32_t has_dims;
  std::memcpy(&has_dims, block.data() + offsetof(FiaParams, has_dims), sizeof has_dims);
  return has_dims != 0;
}

inline void fia_block_dims(std::span<const std::byte> block,
                           FiaTensorDims (&dims)[static_cast<int>(FiaArg::count)]) {
  std::memcpy(dims, block.data() + block.size() - kFiaDimsBytes, kFiaDimsBytes);
}

// The kernel's two functions (reachable through fia_kernel()): fia_launch.cpp, fia_update.cpp.
void fia_cpu_kernel(const void* params, std::size_t size, const ExecContext& ctx);
std::string fia_check_update(std::span<const std::byte> captured, std::span<const std::byte> updated);
// Its CUDA launcher (fia_cuda.cu; built with the CUDA backend only, Note [FIA CUDA kernels]).
void fia_cuda(const void* params, std::size_t size, const void* device_params, void* stream);
// The block for people (KernelDef::describe): tensors, layout, heads, and the host values; the
// dimensions from `captured` when `block` has none (a re-planned update's block).
std::string fia_describe(std::span<const std::byte> block, std::span<const std::byte> captured);

}  // namespace npugraph::ops::attention
