// argmax / sample: checks, launches, kernels, and the Philox4x32-10 generator.
#include "npugraph/ops/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "npugraph/stream.hpp"
#include "ops/activation/float_io.hpp"

namespace npugraph::ops {

void philox4x32(std::uint64_t key, std::uint64_t counter_lo, std::uint64_t counter_hi,
                std::uint32_t out[4]) noexcept {
  // Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC'11): 10 rounds of
  // multiply-xor with the paper's constants (as curand, numpy and JAX use them).
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  std::uint32_t c[4] = {static_cast<std::uint32_t>(counter_lo), static_cast<std::uint32_t>(counter_lo >> 32),
                        static_cast<std::uint32_t>(counter_hi), static_cast<std::uint32_t>(counter_hi >> 32)};
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kM0) * c[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kM1) * c[2];
    const std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    c[0] = hi1 ^ c[1] ^ k0;
    c[1] = lo1;
    c[2] = hi0 ^ c[3] ^ k1;
    c[3] = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  for (int i = 0; i < 4; ++i) out[i] = c[i];
}

double sampling_uniform(std::uint64_t seed, std::uint64_t step, std::uint64_t row) noexcept {
  std::uint32_t r[4];
  philox4x32(seed, step, row, r);
  const std::uint64_t bits = ((static_cast<std::uint64_t>(r[0]) << 32) | r[1]) >> 11;
  return static_cast<double>(bits) * 0x1.0p-53;
}

namespace {

using namespace detail_llm;

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
};

// The index of the largest value (ties: the lowest index; the first NaN wins, as torch.argmax).
std::int32_t argmax_row(const float* x, std::int64_t V) {
  std::int64_t best = 0;
  float bv = x[0];
  if (std::isnan(bv)) return 0;
  for (std::int64_t j = 1; j < V; ++j) {
    const float v = x[j];
    if (v > bv) {
      bv = v;
      best = j;
    } else if (std::isnan(v)) {
      return static_cast<std::int32_t>(j);
    }
  }
  return static_cast<std::int32_t>(best);
}

void argmax_cpu(const void* raw, std::size_t size, const ExecContext& ctx) {
  const auto& p = params_of<ArgmaxParams>(raw, size, "argmax");
  ctx.parallel_for(p.B, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) p.out[r] = argmax_row(p.logits + r * p.V, p.V);
  });
}

// One row of `sample` (the header's definition), in a fixed order.
std::int32_t sample_row(const SampleParams& p, std::int64_t row, std::vector<std::int32_t>& idx,
                        std::vector<double>& prob) {
  const float* x = p.logits + row * p.V;
  const std::int64_t V = p.V;
  if (p.temperature == 0) return argmax_row(x, V);
  // NaN logits are never drawn; a row with nothing finite to draw from falls back to argmax.
  auto z = [&](std::int64_t j) {
    const float v = x[j];
    return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v;
  };
  float max = -std::numeric_limits<float>::infinity();
  for (std::int64_t j = 0; j < V; ++j) max = std::max(max, z(j));
  if (!std::isfinite(max)) return argmax_row(x, V);
  const double inv_t = 1.0 / p.temperature;
  auto weight = [&](std::int64_t j) { return std::exp((static_cast<double>(z(j)) - max) * inv_t); };
  const std::int64_t k = p.top_k > 0 ? std::min(p.top_k, V) : V;
  const bool truncate = k < V || p.top_p < 1.0;
  const double u = sampling_uniform(static_cast<std::uint64_t>(p.seeds[row]),
                                    static_cast<std::uint64_t>(p.steps[row]),
                                    static_cast<std::uint64_t>(row));
  if (!truncate) {  // the whole vocabulary, walked in index order
    double total = 0;
    prob.resize(static_cast<std::size_t>(V));
    for (std::int64_t j = 0; j < V; ++j) total += (prob[j] = weight(j));
    const double target = u * total;
    double cum = 0;
    for (std::int64_t j = 0; j < V; ++j) {
      cum += prob[j];
      if (cum > target && prob[j] > 0) return static_cast<std::int32_t>(j);
    }
    return argmax_row(x, V);
  }
  // Candidates in descending logit order, ties by index: a strict total order, so the set and
  // order are the same whatever the selection algorithm does.
  auto before = [&](std::int32_t a, std::int32_t b) {
    const float za = z(a), zb = z(b);
    return za > zb || (za == zb && a < b);
  };
  idx.resize(static_cast<std::size_t>(V));
  for (std::int64_t j = 0; j < V; ++j) idx[j] = static_cast<std::int32_t>(j);
  double total = 0;  // the probability mass the nucleus is measured against
  if (k < V) {
    std::nth_element(idx.begin(), idx.begin() + k, idx.end(), before);
    for (std::int64_t i = 0; i < k; ++i) total += weight(idx[i]);
  } else {
    for (std::int64_t j = 0; j < V; ++j) total += weight(j);
  }
  // Sort a prefix large enough to hold the nucleus: grown by 8x until its mass reaches top_p
  // (top_p = 1: the nucleus is all k candidates).
  const bool all = p.top_p >= 1.0;
  std::int64_t sorted = all ? k : std::min<std::int64_t>(k, 64);
  for (;;) {
    if (sorted < k) std::nth_element(idx.begin(), idx.begin() + sorted, idx.begin() + k, before);
    std::sort(idx.begin(), idx.begin() + sorted, before);
    if (all) break;
    double mass = 0;
    for (std::int64_t i = 0; i < sorted; ++i) mass += weight(idx[i]);
    if (sorted == k || (!all && mass >= p.top_p * total)) break;
    sorted = std::min(k, sorted * 8);
  }
  prob.resize(static_cast<std::size_t>(sorted));
  double nucleus = 0;
  std::int64_t n = 0;
  for (; n < sorted;) {
    nucleus += (prob[n] = weight(idx[n]));
    ++n;
    if (!all && nucleus >= p.top_p * total) break;
  }
  const double target = u * nucleus;
  double cum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    cum += prob[i];
    if (cum > target) return idx[i];
  }
  return idx[n - 1];
}

void sample_cpu(const void* raw, std::size_t size, const ExecContext& ctx) {
  const auto& p = params_of<SampleParams>(raw, size, "sample");
  ctx.parallel_for(p.B, 1, [&](std::int64_t b, std::int64_t e) {
    std::vector<std::int32_t> idx;
    std::vector<double> prob;
    for (std::int64_t r = b; r < e; ++r) {
      p.out[r] = sample_row(p, r, idx, prob);
      if (p.advance_steps) p.steps[r] += 1;
    }
  });
}

const KernelDef kArgmax{.name = "argmax", .cpu = argmax_cpu};
const KernelDef kSample{.name = "sample", .cpu = sample_cpu};

void check_logits(const char* op, const Tensor& logits) {
  NG_CHECK_ARG(logits.defined(), op, ": logits is undefined");
  NG_CHECK_ARG(logits.dtype() == DType::f32 && logits.dim() == 2 && logits.is_contiguous(), op,
               ": logits = ", logits.str(), ": must be a contiguous float32 [batch, vocab]");
  NG_CHECK_ARG(logits.size(1) > 0 && logits.size(1) <= std::numeric_limits<std::int32_t>::max(), op,
               ": logits = ", logits.str(), ": the vocabulary must have 1 to 2^31 - 1 entries");
}

void check_out(const char* op, const Tensor& out, const Tensor& logits) {
  check_i32(op, "out", out, logits.size(0), "one token per row of logits");
  check_same_device(op, "out", out, logits);
}

void check_i64(const char* op, const char* arg, const Tensor& t, const Tensor& logits) {
  NG_CHECK_ARG(t.defined(), op, ": ", arg, " is undefined");
  NG_CHECK_ARG(t.dtype() == DType::i64 && t.is_contiguous() && t.numel() == logits.size(0), op, ": ",
               arg, " = ", t.str(), ": must be a contiguous int64 tensor of ", logits.size(0),
               " elements (one per row of logits = ", logits.str(), ")");
  check_same_device(op, arg, t, logits);
}

}  // namespace

const KernelDef& argmax_kernel() { return kArgmax; }
const KernelDef& sample_kernel() { return kSample; }

void argmax_out(const Tensor& logits, const Tensor& out) {
  const Stream stream = current_stream(logits.device());
  const UpdateErrorGuard guard(stream);
  check_logits("argmax", logits);
  check_out("argmax", out, logits);
  const ArgmaxParams p{logits.data_ptr<float>(), out.data_ptr<std::int32_t>(), logits.size(0),
                       logits.size(1)};
  const Tensor* uses[] = {&logits, &out};
  launch(stream, kArgmax, p, uses);
}

Tensor argmax(const Tensor& logits) {
  check_logits("argmax", logits);
  Tensor out = empty({logits.size(0)}, DType::i32, logits.device());
  argmax_out(logits, out);
  return out;
}

void sample_out(const Tensor& logits, const Tensor& seeds, const Tensor& steps, const Tensor& out,
                const SamplingOptions& options) {
  const Stream stream = current_stream(logits.device());
  const UpdateErrorGuard guard(stream);
  constexpr const char* op = "sample";
  check_logits(op, logits);
  check_i64(op, "seeds", seeds, logits);
  check_i64(op, "steps", steps, logits);
  check_out(op, out, logits);
  NG_CHECK_ARG(std::isfinite(options.temperature) && options.temperature >= 0, op,
               ": temperature = ", options.temperature, ": must be finite and >= 0 (0: greedy)");
  NG_CHECK_ARG(options.top_k >= 0 && options.top_k <= logits.size(1), op, ": top_k = ",
               options.top_k, ": must be in [0, ", logits.size(1), "] (0: no top-k; the vocabulary of logits = ",
               logits.str(), ")");
  NG_CHECK_ARG(options.top_p > 0 && options.top_p <= 1, op, ": top_p = ", options.top_p,
               ": must be in (0, 1]");
  SampleParams p;
  p.logits = logits.data_ptr<float>();
  p.seeds = seeds.data_ptr<std::int64_t>();
  p.steps = steps.data_ptr<std::int64_t>();
  p.out = out.data_ptr<std::int32_t>();
  p.B = logits.size(0);
  p.V = logits.size(1);
  p.temperature = options.temperature;
  p.top_p = options.top_p;
  p.top_k = options.top_k;
  p.advance_steps = options.advance_steps;
  const Tensor* uses[] = {&logits, &seeds, &steps, &out};
  launch(stream, kSample, p, uses);
}

Tensor sample(const Tensor& logits, const Tensor& seeds, const Tensor& steps,
              const SamplingOptions& options) {
  check_logits("sample", logits);
  Tensor out = empty({logits.size(0)}, DType::i32, logits.device());
  sample_out(logits, seeds, steps, out, options);
  return out;
}

}  // namespace npugraph::ops
