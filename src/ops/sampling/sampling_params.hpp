// The parameter blocks of argmax / sample (sampling.cpp), their CUDA launchers (sampling_cuda.cu;
// built with the CUDA backend only). Light on includes: nvcc compiles it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace npugraph::ops::sampling_impl {

struct ArgmaxParams {
  const float* logits = nullptr;
  std::int32_t* out = nullptr;
  std::int64_t B = 0, V = 0;
};

struct SampleParams {
  const float* logits = nullptr;
  const std::int64_t* seeds = nullptr;
  std::int64_t* steps = nullptr;
  std::int32_t* out = nullptr;
  std::int64_t B = 0, V = 0;
  double temperature = 1, top_p = 1;
  std::int64_t top_k = 0;
  bool advance_steps = false;
  // sample_rows_out: row r's own parameters (each null when not given: greedy-free defaults below),
  // and the draw's counter (steps[r], 0) instead of (steps[r], r).
  bool per_row = false;
  const float* row_temperature = nullptr;
  const std::int64_t* row_top_k = nullptr;
  const float* row_top_p = nullptr;
  // sample_rows_out's adjustment lists (ops::LogitAdjustRows; null: none): row r's first
  // adjust_count[r] (clamped to [0, adjust_capacity]) of its adjust_capacity entries.
  const std::int32_t* adjust_count = nullptr;
  const std::int32_t* adjust_tokens = nullptr;
  const float* adjust_scale = nullptr;
  const float* adjust_add = nullptr;
  std::int64_t adjust_capacity = 0;
  // sample_rows_out's token masks (ops::TokenMaskRows; null: none): row r's mask_words words.
  const std::int32_t* mask_on = nullptr;
  const std::uint32_t* mask_bits = nullptr;
  std::int64_t mask_words = 0;
};

// Row r's parameters as the kernels use them. Per row, values a device buffer may hold that the
// host could not check are read as the nearest meaningful setting: a temperature that is not a
// finite number > 0 is greedy, a top_k outside [1, V] is no top-k, a top_p outside (0, 1) is 1.
struct RowSampling {
  double temperature, top_p;
  std::int64_t top_k;
  std::uint64_t counter_hi;  // the draw's second counter word: the row, or 0 (per_row)
};

#if defined(__CUDACC__)
__host__ __device__
#endif
inline RowSampling row_sampling(const SampleParams& p, std::int64_t r) {
  if (!p.per_row) return {p.temperature, p.top_p, p.top_k, static_cast<std::uint64_t>(r)};
  RowSampling s{0.0, 1.0, 0, 0};
  if (p.row_temperature) {
    const double t = p.row_temperature[r];  // float32 widened
    s.temperature = t > 0 && t - t == 0 ? t : 0.0;  // t - t is NaN for an infinity (and for NaN)
  }
  if (p.row_top_k) {
    const std::int64_t k = p.row_top_k[r];
    s.top_k = k >= 1 && k <= p.V ? k : 0;
  }
  if (p.row_top_p) {
    const double q = p.row_top_p[r];
    s.top_p = q > 0 && q < 1 ? q : 1.0;
  }
  return s;
}

void argmax_cuda(const void* params, std::size_t size, const void* device_params, void* stream);
void sample_cuda(const void* params, std::size_t size, const void* device_params, void* stream);

}  // namespace npugraph::ops::sampling_impl
