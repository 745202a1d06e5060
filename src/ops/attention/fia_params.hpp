// FIA internals shared by the host side (fia_plan.cpp), the CPU kernel (fia_kernel.cpp) and tests:
// the parameter block, the workspace plan and the host planning entry point.
//
// Note [FIA parameter block]
// One launch = one block: a fixed header (FiaParams) followed by a tail of 2*B int64 values, the
// per-batch actual query lengths then the per-batch actual KV lengths, already resolved (broadcast,
// defaults, decode rule applied), so the kernel never sees FiaOptions. Everything a task update may
// change lives here: the lengths, the scale, pre/next tokens, the data pointers and strides. The
// shapes, dtype, layout, heads and the parallel plan (grain, chunk layout) are a pure function of the
// shapes; fia_check_update refuses a block whose shapes differ from the captured one, so the plan of
// the captured launch stays valid. The block is trivially copyable, 8-byte aligned, and holds
// no pointers to host memory other than the tensors' data.
//
// Note [FIA decode]
// Decode (query S == 1) ignores actual_seq_lengths, pre_tokens and next_tokens: the host writes
// actual query length 1 and an unbounded band, so the kernel has no decode special case.
//
// Note [FIA workspace]
// plan_workspace() is the one function that sizes and lays out the workspace (fia_workspace_bytes
// and the launch both call it). The kernel splits the B*N*Sq query rows into `chunks` parallel
// chunks of `grain` rows; chunk c owns the scratch at align_up(workspace, kWorkspaceAlign) +
// c * chunk_bytes:
//     [q_offset]      D floats           the query row converted to float32 (unscaled)
//     [acc_offset]    D floats           the output accumulator
//     [score_offset]  kKvBlock floats    the scores of one block of KV columns
// chunk_bytes is rounded up to kWorkspaceAlign (no false sharing), and the total has kWorkspaceAlign
// bytes of slack so that any base address can be aligned. Nothing depends on actual lengths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "npugraph/dtype.hpp"
#include "npugraph/ops/fia.hpp"

namespace npugraph::ops::attention {

enum class FiaLayout : std::uint8_t { bsh, bsnd, bnsd };
const char* layout_name(FiaLayout layout);

// Tuning constants of the plan (pure functions of the shapes only).
inline constexpr std::int64_t kWorkspaceAlign = 64;
inline constexpr std::int64_t kKvBlock = 64;          // KV columns scored per softmax block
inline constexpr std::int64_t kMaxChunks = 256;       // parallel chunks at most (bounds the workspace)
inline constexpr std::int64_t kMinChunkFlops = 1 << 16;  // rough work per chunk at least

// Unbounded band: |pre|, |next| are clamped to this so that i - pre and i + next never overflow.
inline constexpr std::int64_t kBandLimit = std::int64_t{1} << 60;

struct FiaWorkspacePlan {
  std::int64_t rows = 0;          // B * N * Sq query rows, the unit of parallel work
  std::int64_t grain = 0;         // rows per chunk
  std::int64_t chunks = 0;        // ceil(rows / grain)
  std::int64_t q_offset = 0;      // byte offsets inside a chunk's scratch
  std::int64_t acc_offset = 0;
  std::int64_t score_offset = 0;
  std::int64_t chunk_bytes = 0;   // a multiple of kWorkspaceAlign
  std::int64_t total_bytes = 0;   // chunks * chunk_bytes + kWorkspaceAlign
};
FiaWorkspacePlan plan_workspace(std::int64_t batch, std::int64_t heads, std::int64_t q_seq,
                                std::int64_t kv_seq, std::int64_t head_dim);
// The plan of these arguments, after checking the shapes, dtypes, layout and heads (what it depends on).
FiaWorkspacePlan plan_workspace_for(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const FiaOptions& options);

// A tensor seen as (b, n, s, d) with element strides; one kernel serves every layout.
struct FiaView {
  void* data = nullptr;
  std::int64_t stride[4] = {};  // b, n, s, d (elements)
};

inline constexpr std::uint32_t kFiaMagic = 0x46494131;  // "FIA1"

struct FiaParams {
  std::uint32_t magic = kFiaMagic;
  std::uint32_t header_bytes = sizeof(FiaParams);
  FiaView q, k, v, out;
  float* lse = nullptr;       // (B, N, Sq) float32 contiguous; null: softmax_lse not written
  float* lse_zero = nullptr;  // eager form without softmax_lse_flag: the 1-element lse, set to 0
  std::byte* workspace = nullptr;
  std::int64_t workspace_bytes = 0;
  std::int64_t batch = 0, heads = 0, kv_heads = 0, q_seq = 0, kv_seq = 0, head_dim = 0;
  FiaWorkspacePlan plan;
  std::int64_t pre_tokens = 0, next_tokens = 0;  // clamped to [-kBandLimit, kBandLimit]
  float scale = 1.0f;
  DType dtype = DType::f32;  // query, key, value and attention_out
  FiaLayout layout = FiaLayout::bsh;
  std::uint8_t lse_flag = 0;
  std::uint8_t reserved = 0;
  // Followed by the tail: std::int64_t actual_q[batch], actual_kv[batch].
};
static_assert(std::is_trivially_copyable_v<FiaParams>);
static_assert(alignof(FiaParams) <= 8 && sizeof(FiaParams) % 8 == 0);

inline std::size_t fia_block_bytes(std::int64_t batch) {
  return sizeof(FiaParams) + 2 * static_cast<std::size_t>(batch) * sizeof(std::int64_t);
}

// A parameter block under construction: inline storage for small batches, the heap beyond.
class FiaParamBuffer {
 public:
  static constexpr std::int64_t kInlineBatch = 64;

  // Sizes the buffer for `batch` and default-initialises the header.
  FiaParams& reset(std::int64_t batch);
  FiaParams& header() { return *reinterpret_cast<FiaParams*>(base()); }
  std::int64_t* actual_q() { return reinterpret_cast<std::int64_t*>(base() + sizeof(FiaParams)); }
  std::int64_t* actual_kv() { return actual_q() + batch_; }
  std::span<const std::byte> bytes() const { return {base(), size_}; }

 private:
  std::byte* base() { return heap_.empty() ? inline_ : reinterpret_cast<std::byte*>(heap_.data()); }
  const std::byte* base() const {
    return heap_.empty() ? inline_ : reinterpret_cast<const std::byte*>(heap_.data());
  }
  alignas(16) std::byte inline_[sizeof(FiaParams) + 2 * kInlineBatch * sizeof(std::int64_t)];
  std::vector<std::int64_t> heap_;
  std::size_t size_ = 0;
  std::int64_t batch_ = 0;
};

// Validates every argument of the `.out` form and fills `buffer` with the launch's block.
// `lse_zero`: see FiaParams::lse_zero (only the eager form passes one).
void build_fia_params(const Tensor& query, const Tensor& key, const Tensor& value,
                      const FiaOptions& options, const Tensor& workspace,
                      const Tensor& attention_out, const Tensor& softmax_lse, float* lse_zero,
                      FiaParamBuffer& buffer);

// The kernel's two functions (also reachable through fia_kernel()).
void fia_cpu_kernel(const void* params, std::size_t size, const ExecContext& ctx);
std::string fia_check_update(std::span<const std::byte> captured, std::span<const std::byte> updated);

}  // namespace npugraph::ops::attention
