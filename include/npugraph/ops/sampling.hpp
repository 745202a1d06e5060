// Token selection from logits [B, V] (float32, contiguous): argmax, and seeded sampling with
// temperature, top-k and top-p whose randomness comes from device tensors, so a captured decode
// step samples anew at every replay without an update.
//
// argmax: out[b] = the index of the largest logit of row b (int32); ties give the lowest index;
// NaN counts as larger than every number (torch.argmax), the first NaN winning.
//
// sample: per row b, with u = philox4x32-10(key = seeds[b], counter = (steps[b], b)) as a double
// in [0, 1) — a counter-based generator, so the draw depends on (seed, step, row) only, never on
// threads or on other rows:
//   temperature == 0: argmax (no draw);
//   else, with z_j = logits[b, j] (NaN as -inf) and w_j = exp((z_j - max z) * (1 / temperature))
//   in float32 (the unnormalised probabilities):
//     order: z descending, then index ascending (a strict order, so the sets below are unique);
//     top-k: the first top_k of that order (top_k 0: all V);
//     top-p: of those, the shortest prefix whose mass (sum of w, in double) reaches top_p times
//            the top-k mass (top_p 1: all of them);
//     draw:  the kept tokens walked in index order: the first whose cumulative w exceeds
//            u * (their total w).
//   (vLLM's sampler order: temperature, top-k, then top-p on the renormalised top-k.)
//   Cost per row: top-k by one pass with a k-heap (no sort of V); top-p alone by a 4096-bucket
//   histogram of z (no sort of V); w computed for the kept candidates, or all V when top-k is off.
// seeds int64 [B]; steps int64 [B]; with advance_steps the kernel adds 1 to steps[b] after drawing
// (a captured graph then draws a new number every replay with no host work at all).
// One kernel launch each, capturable; rows run in parallel, each in a fixed order.
#pragma once

#include <cstdint>

#include "npugraph/kernel.hpp"
#include "npugraph/tensor.hpp"

namespace npugraph::ops {

void argmax_out(const Tensor& logits, const Tensor& out);
Tensor argmax(const Tensor& logits);

struct SamplingOptions {
  double temperature = 1.0;  // >= 0; 0 = greedy
  std::int64_t top_k = 0;    // 0: no top-k; else 1..V
  double top_p = 1.0;        // (0, 1]
  bool advance_steps = false;
};

void sample_out(const Tensor& logits, const Tensor& seeds, const Tensor& steps, const Tensor& out,
                const SamplingOptions& options);
Tensor sample(const Tensor& logits, const Tensor& seeds, const Tensor& steps,
              const SamplingOptions& options);

// sample with each row's own parameters, read from device tensors at launch time (so a captured
// graph samples each replay with whatever the host last wrote there, with no update):
// temperature float32 [B] (required), top_k int64 [B] and top_p float32 [B] (each optional:
// undefined means no top-k / top-p). Row b draws as `sample` with (temperature[b], top_k[b],
// top_p[b]) widened to double, except that its uniform comes from (seeds[b], steps[b], 0) — not its row — so a
// request's draws do not depend on its place in a batch. Values the host cannot check at launch
// are read as the nearest setting: a temperature that is not a finite number > 0 is greedy, a
// top_k outside [1, V] is no top-k, a top_p outside (0, 1) is 1. On cuda: temperature only
// (top_k / top_p tensors are an UnsupportedError, as `sample`'s restricted draws are there).
//
// Adjustment lists (optional; cpu only): before row b is sampled (greedy included), its first
// count[b] entries i (count clamped to [0, C]) change its logits, in float32, in a copy (the
// logits tensor is left as it is):
//   z = logits[b, tokens[b, i]];  z = (z > 0 ? z / scale[b, i] : z * scale[b, i]) + add[b, i]
// A token outside [0, V) is skipped; a token listed twice is applied twice, in list order.
// A row with count 0 reads the logits as they are (no copy). Penalties and logit biases as
// per-row buffers: Note [Logit adjustments] in src/llm/logit_adjust.hpp.
struct LogitAdjustRows {
  Tensor count;   // int32 [B]
  Tensor tokens;  // int32 [B, C]
  Tensor scale;   // float32 [B, C]
  Tensor add;     // float32 [B, C]
};
// Token masks (optional; cpu only): a row b with on[b] != 0 may draw only tokens t whose bit
// (bits[b, t / 32] >> (t % 32)) & 1 is set; the others read as -inf, after the adjustment lists,
// in the same copy (the logits tensor is left as it is). bits has ceil(V / 32) words per row (bit
// order: xgrammar's and vLLM's token bitmask). A row whose allowed tokens are all -inf or NaN
// (or that allows none) is drawn as a row of nothing finite is: its argmax over the masked copy,
// the lowest token id. Constrained decoding (grammars, JSON schemas) as per-row buffers: Note
// [Token constraints] in include/npugraph/llm/constraint.hpp.
struct TokenMaskRows {
  Tensor on;    // int32 [B]
  Tensor bits;  // int32 [B, ceil(V / 32)]
};
struct SamplingRows {
  Tensor temperature;  // float32 [B]
  Tensor top_k;        // int64 [B], or undefined
  Tensor top_p;        // float32 [B], or undefined
  bool advance_steps = false;
  LogitAdjustRows adjust{};  // undefined count: none
  TokenMaskRows mask{};      // undefined on: none
};
void sample_rows_out(const Tensor& logits, const Tensor& seeds, const Tensor& steps, const SamplingRows& rows,
                     const Tensor& out);

// Philox4x32-10 of (key, counter): the generator `sample` draws from (for tests and references).
void philox4x32(std::uint64_t key, std::uint64_t counter_lo, std::uint64_t counter_hi,
                std::uint32_t out[4]) noexcept;
// The uniform double in [0, 1) `sample` uses for (seed, step, row): 53 bits of the first two words.
double sampling_uniform(std::uint64_t seed, std::uint64_t step, std::uint64_t row) noexcept;

const KernelDef& argmax_kernel();
const KernelDef& sample_kernel();

}  // namespace npugraph::ops
