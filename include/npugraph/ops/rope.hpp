// Rotary position embedding with positions read from a device tensor (so a captured decode step
// rotates by each step's positions without an update): vLLM's / vllm-ascend's rotary_embedding
// (torch_npu._npu_rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox)),
// with the angles computed from theta instead of a cos/sin cache.
//
//   for each token t, head h, pair i < R/2 (R = rotary_dim, default the head dim D):
//     angle = positions[t] * (freq_scale * theta^(-2i / R) / freq_factors[i])
//                                   (double precision, then cos/sin; freq_factors[i] = 1 without them)
//     (a, b) = the pair's two elements of x[t, h]
//     out: a' = a cos - b sin,  b' = b cos + a sin        (float32)
//   elements R..D-1 of each head are copied unchanged.
//
// Note [RoPE pairing]
// Two conventions pair the elements differently:
//   - RopeStyle::neox — GPT-NeoX / Hugging Face rotate_half: pairs (i, i + R/2);
//   - RopeStyle::norm — GPT-J / ggml's "NORM" mode: adjacent pairs (2i, 2i + 1).
// llama.cpp rotates LLAMA-architecture GGUF files with NORM: llama_model_rope_type()
// (src/llama-model.cpp, formerly src/llama.cpp) lists LLM_ARCH_LLAMA under "use what we call a normal
// RoPE, operating on pairs of consecutive head values" (LLAMA_ROPE_TYPE_NORM = 0), while Falcon,
// Qwen2, Phi, Gemma, GPT-NeoX use NEOX ("the pairs of head values are offset by n_rot/2").
// Hugging Face's Llama uses rotate_half, but convert_hf_to_gguf.py permutes the rows of
// attn_q / attn_k on conversion (LlamaModel.permute: reshape(n_head, 2, D/2, ...).swapaxes(1, 2)),
// which turns the half-split pairs into adjacent ones. So a Llama GGUF file (SmolLM2 included) must
// be rotated with RopeStyle::norm; the same model's Hugging Face weights with RopeStyle::neox.
// (At position 0 both are the identity, so a wrong choice shows only from the second token on.)
//
// Note [RoPE scaling]
// Two ways GGUF files stretch rope to longer contexts, both llama.cpp's ggml_rope_ext arguments:
// freq_scale (<arch>.rope.scaling.type = "linear": 1 / rope.scaling.factor, every frequency the same)
// and freq_factors (the rope_freqs.weight tensor of Llama 3.1 / 3.2 files: one divisor per pair,
// which convert_hf_to_gguf.py computes from Hugging Face's "llama3" rope_scaling — low frequencies
// divided by the factor, high ones kept, a smooth ramp between). freq_factors is a float32 tensor
// of rot / 2 positive values on x's device, read when the kernel runs.
//
// positions int32 [T]; x [T, heads, D] float32 / float16 / bfloat16 (contiguous); out [T, heads, D]
// of any float dtype (float16 for a KV cache or FIA query), may be x itself (in place, same dtype).
// One kernel launch on the current stream, capturable.
#pragma once

#include <cstdint>

#include "npugraph/kernel.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph::ops {

enum class RopeStyle : std::uint8_t { neox, norm };

struct RopeOptions {
  double theta = 10000.0;        // the frequency base (rope.freq_base; SmolLM2: 1e5)
  RopeStyle style = RopeStyle::neox;
  std::int64_t rotary_dim = 0;   // 0: the whole head dim; else an even number <= D
  double freq_scale = 1.0;       // every angle times this (Note [RoPE scaling]); positive, finite
  Tensor freq_factors{};         // undefined, or float32 [rotary_dim / 2]: each pair's divisor
};

void rotary_embedding_out(const Tensor& positions, const Tensor& x, const Tensor& out,
                          const RopeOptions& options);
Tensor rotary_embedding(const Tensor& positions, const Tensor& x, const RopeOptions& options,
                        DType out_dtype);
inline Tensor rotary_embedding(const Tensor& positions, const Tensor& x, const RopeOptions& options) {
  return rotary_embedding(positions, x, options, x.dtype());
}

const KernelDef& rotary_embedding_kernel();

}  // namespace npugraph::ops
