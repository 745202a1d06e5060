// argmax / sample: checks, launches, kernels, and the Philox4x32-10 generator.
#include "npugraph/ops/sampling.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "npugraph/memory.hpp"
#include "npugraph/stream.hpp"
#include "ops/activation/float_io.hpp"
#include "ops/sampling/sampling_cuda_check.hpp"
#include "ops/sampling/sampling_params.hpp"
#include "ops/sampling/sampling_weights.hpp"

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

namespace sampling_impl {

std::string sample_cuda_unsupported(const SamplingOptions& o, std::int64_t vocab, const Device& device) {
  if (o.temperature == 0) return {};  // greedy: argmax, whatever top_k and top_p say
  const char* rule =
      ": not supported on the CUDA backend yet (supported: temperature 0, or top_k 0 (or the "
      "vocabulary size) with top_p 1: a draw from the whole vocabulary)";
  if (o.top_k != 0 && o.top_k != vocab)
    return detail::cat("sample on ", device.str(), ": top_k = ", o.top_k, " (vocabulary ", vocab, ")", rule);
  if (o.top_p < 1.0) return detail::cat("sample on ", device.str(), ": top_p = ", o.top_p, rule);
  return {};
}

}  // namespace sampling_impl

namespace {

using namespace detail_llm;
using sampling_impl::ArgmaxParams;
using sampling_impl::SampleParams;



float max_of(const float* x, std::int64_t V);

// The index of the largest value (ties: the lowest index; the first NaN wins, as torch.argmax).
// With every value finite, one vectorised pass (argmax_finite: per lane the largest value and its
// first index); otherwise an exact scan: the first NaN, else the first index of the maximum (an
// infinity). A Gemma 3 row of 262,144 logits was three passes before (the maximum, a NaN probe,
// the first index of the maximum).
std::int32_t argmax_row(const float* x, std::int64_t V) {
  std::int32_t index = 0;
  if (sampling_impl::argmax_finite(x, V, &index)) return index;
  for (std::int64_t i = 0; i < V; ++i)
    if (std::isnan(x[i])) return static_cast<std::int32_t>(i);
  const float best = max_of(x, V);
  for (std::int64_t i = 0; i < V; ++i)
    if (x[i] == best) return static_cast<std::int32_t>(i);
  return 0;  // every value -inf, or none
}

void argmax_cpu(const void* raw, std::size_t size, const ExecContext& ctx) {
  const auto& p = params_of<ArgmaxParams>(raw, size, "argmax");
  ctx.parallel_for(p.B, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) p.out[r] = argmax_row(p.logits + r * p.V, p.V);
  });
}

// Order-preserving unsigned key of a float (NaN excluded): larger floats, larger keys.
std::uint32_t order_key(float f) {
  const auto bits = std::bit_cast<std::uint32_t>(f);
  return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}

struct Scratch {
  std::vector<std::int32_t> idx;
  std::vector<float> w, zk, wk, adjusted;
  std::vector<double> bucket_mass;
};

// The largest of x[0, V) with NaN as -inf (8 independent lanes).
float max_of(const float* x, std::int64_t V) {
  float m[8];
  for (float& v : m) v = -std::numeric_limits<float>::infinity();
  std::int64_t j = 0;
  for (; j + 8 <= V; j += 8)
    for (int l = 0; l < 8; ++l) m[l] = x[j + l] > m[l] ? x[j + l] : m[l];  // NaN compares false
  for (; j < V; ++j) m[0] = x[j] > m[0] ? x[j] : m[0];
  float best = m[0];
  for (float v : m) best = v > best ? v : best;
  return best;
}

// Row `row`'s adjustments (its count clamped to the capacity) and whether its token mask applies.
std::int64_t adjustment_count(const SampleParams& p, std::int64_t row) {
  return p.adjust_count ? std::clamp<std::int64_t>(p.adjust_count[row], 0, p.adjust_capacity) : 0;
}
bool row_masked(const SampleParams& p, std::int64_t row) { return p.mask_on && p.mask_on[row] != 0; }

// One row of `sample` (the header's definition).
// Row `row`'s logits with its adjustment list and then its token mask applied (the header's
// definitions), in s.adjusted; or the row itself when it has neither.
const float* adjusted_row(const SampleParams& p, std::int64_t row, Scratch& s) {
  const float* x = p.logits + row * p.V;
  const std::int64_t n = adjustment_count(p, row);
  const bool masked = row_masked(p, row);
  if (n == 0 && !masked) return x;
  s.adjusted.assign(x, x + p.V);
  const std::int64_t at = row * p.adjust_capacity;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t t = p.adjust_tokens[at + i];
    if (t < 0 || t >= p.V) continue;
    float& z = s.adjusted[static_cast<std::size_t>(t)];
    const float scale = p.adjust_scale[at + i];
    z = (z > 0 ? z / scale : z * scale) + p.adjust_add[at + i];
  }
  if (masked) {
    const std::uint32_t* bits = p.mask_bits + row * p.mask_words;
    for (std::int64_t w = 0; w < p.mask_words; ++w) {
      const std::uint32_t word = bits[w];
      if (word == 0xffffffffu) continue;
      const std::int64_t end = std::min<std::int64_t>(p.V, (w + 1) * 32);
      for (std::int64_t t = w * 32; t < end; ++t)
        if (!((word >> (t & 31)) & 1u)) s.adjusted[static_cast<std::size_t>(t)] = -std::numeric_limits<float>::infinity();
    }
  }
  return s.adjusted.data();
}

std::int32_t sample_row(const SampleParams& params, std::int64_t row, Scratch& s) {
  const float* x = adjusted_row(params, row, s);
  const std::int64_t V = params.V;
  const sampling_impl::RowSampling p = sampling_impl::row_sampling(params, row);
  if (p.temperature == 0) return argmax_row(x, V);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  auto z = [&](std::int64_t j) { return std::isnan(x[j]) ? kNegInf : x[j]; };
  // z descending, then index ascending.
  auto before = [&](std::int32_t a, std::int32_t b) {
    const float za = z(a), zb = z(b);
    return za > zb || (za == zb && a < b);
  };
  const std::int64_t k = p.top_k > 0 ? std::min(p.top_k, V) : V;
  const bool all_p = p.top_p >= 1.0;
  std::vector<std::int32_t>& kept = s.idx;
  kept.clear();
  float max = kNegInf;
  if (k < V) {
    // top-k in one pass: a heap of the best k so far with its worst on top; a later index with an
    // equal z never displaces it (index ascending breaks ties), nor does a NaN (compares false).
    kept.reserve(static_cast<std::size_t>(k));
    for (std::int64_t j = 0; j < k; ++j) kept.push_back(static_cast<std::int32_t>(j));
    std::make_heap(kept.begin(), kept.end(), before);
    float worst = z(kept.front());
    for (std::int64_t j = k; j < V; ++j) {
      if (!(x[j] > worst)) continue;
      std::pop_heap(kept.begin(), kept.end(), before);
      kept.back() = static_cast<std::int32_t>(j);
      std::push_heap(kept.begin(), kept.end(), before);
      worst = z(kept.front());
    }
    for (std::int32_t j : kept) max = std::max(max, z(j));
  } else {
    max = max_of(x, V);
  }
  if (!std::isfinite(max)) return argmax_row(x, V);  // nothing finite to draw from
  const auto inv_t = static_cast<float>(1.0 / p.temperature);
  const double u = sampling_uniform(static_cast<std::uint64_t>(params.seeds[row]),
                                    static_cast<std::uint64_t>(params.steps[row]), p.counter_hi);
  if (k == V) {
    // Every token's weight; top-p (if on) marks the kept ones: the mass of each of 4096 buckets of
    // z (the top 12 bits of its order key), walked from the top to the bucket where the mass
    // reaches top_p; that bucket alone is sorted.
    s.w.resize(static_cast<std::size_t>(V));
    sampling_impl::exp_weights(x, V, max, inv_t, s.w.data());
    double total = 0;
    for (std::int64_t j = 0; j < V; ++j) total += s.w[j];
    if (!all_p) {
      s.bucket_mass.assign(4096, 0.0);
      for (std::int64_t j = 0; j < V; ++j) s.bucket_mass[order_key(z(j)) >> 20] += s.w[j];
      const double goal = p.top_p * total;
      double cum = 0;
      std::uint32_t boundary = 0;
      for (std::uint32_t b = 4096; b-- > 0;) {
        if (cum + s.bucket_mass[b] >= goal || b == 0) {
          boundary = b;
          break;
        }
        cum += s.bucket_mass[b];
      }
      std::vector<std::int32_t>& edge = kept;  // the boundary bucket, in order
      for (std::int64_t j = 0; j < V; ++j)
        if (order_key(z(j)) >> 20 == boundary) edge.push_back(static_cast<std::int32_t>(j));
      std::sort(edge.begin(), edge.end(), before);
      std::size_t n = 0;
      while (n < edge.size() && (cum < goal || n == 0)) cum += s.w[edge[n++]];
      // Dropped: lower buckets and the rest of the boundary bucket (weight 0 in the walk).
      for (std::size_t i = n; i < edge.size(); ++i) s.w[edge[i]] = 0;
      for (std::int64_t j = 0; j < V; ++j)
        if (order_key(z(j)) >> 20 < boundary) s.w[j] = 0;
      total = 0;
      for (std::int64_t j = 0; j < V; ++j) total += s.w[j];
    }
    // The draw: tokens in index order.
    const double target = u * total;
    double cum = 0;
    std::int32_t last = 0;
    for (std::int64_t j = 0; j < V; ++j) {
      if (s.w[j] == 0) continue;
      cum += s.w[j];
      last = static_cast<std::int32_t>(j);
      if (cum > target) return last;
    }
    return last;
  }
  // The weights of the top-k, in heap order first, then (with top-p) in descending order.
  if (!all_p) std::sort(kept.begin(), kept.end(), before);
  const std::size_t nk = kept.size();
  s.zk.resize(nk);
  s.wk.resize(nk);
  for (std::size_t i = 0; i < nk; ++i) s.zk[i] = x[kept[i]];
  sampling_impl::exp_weights(s.zk.data(), static_cast<std::int64_t>(nk), max, inv_t, s.wk.data());
  std::size_t n = nk;
  if (!all_p) {  // the top-p prefix of the top-k, in order
    double mass = 0;
    for (std::size_t i = 0; i < nk; ++i) mass += s.wk[i];
    double cum = 0;
    for (n = 0; n < nk;) {
      cum += s.wk[n++];
      if (cum >= p.top_p * mass) break;
    }
  }
  // The draw: the kept tokens in index order (weights carried along).
  std::vector<std::pair<std::int32_t, float>> byindex(n);
  for (std::size_t i = 0; i < n; ++i) byindex[i] = {kept[i], s.wk[i]};
  std::sort(byindex.begin(), byindex.end());
  double mass = 0;
  for (const auto& [j, wj] : byindex) mass += wj;
  const double target = u * mass;
  double cum = 0;
  for (const auto& [j, wj] : byindex) {
    cum += wj;
    if (cum > target) return j;
  }
  return byindex.back().first;
}

// Note [Greedy rows split]
// A row is one unit of `sample`, so a lone greedy row (the decode step at batch 1) ran on one thread:
// Gemma 3's 262,144 logits took ~100 us a step while the other core waited. With fewer rows than
// threads and long rows, a greedy row with no adjustments and no mask is cut into parts of at
// least kSplitMin logits, each part's argmax_row (its first NaN, else the first index of its
// maximum) computed by whoever claims it; then, in part order, the first part whose result is a
// NaN gives the row's token, else the first strictly larger maximum. That is the first NaN of the
// row, else the first index of its maximum: argmax_row's answer, whatever the parts, so the bits
// do not depend on the thread count. Other rows (sampled, adjusted, masked) stay whole, one unit
// each (their part 0).
constexpr std::int64_t kSplitMin = std::int64_t{1} << 15;  // logits per part at least
constexpr std::int64_t kSplitUnits = 64;                   // rows x parts at most (on the stack)

// Greedy on the logits as they are (adjusted_row would return the row itself).
bool plain_greedy(const SampleParams& p, std::int64_t row) {
  return adjustment_count(p, row) == 0 && !row_masked(p, row) && sampling_impl::row_sampling(p, row).temperature == 0;
}

// Note [Greedy rows split]: true when it ran the launch.
bool sample_split(const SampleParams& p, const ExecContext& ctx) {
  const std::int64_t threads = std::max(1, ctx.num_threads());
  if (p.B == 0 || p.B >= threads) return false;
  const std::int64_t parts = std::min({threads / p.B, p.V / kSplitMin, kSplitUnits / p.B});
  if (parts < 2) return false;
  std::int32_t found[kSplitUnits];
  bool plain[kSplitUnits];
  for (std::int64_t r = 0; r < p.B; ++r) plain[r] = plain_greedy(p, r);
  ctx.parallel_for(p.B * parts, 1, [&](std::int64_t b, std::int64_t e) {
    Scratch scratch;
    for (std::int64_t u = b; u < e; ++u) {
      const std::int64_t r = u / parts, k = u % parts;
      if (!plain[r]) {
        if (k == 0) p.out[r] = sample_row(p, r, scratch);
        continue;
      }
      const std::int64_t lo = p.V * k / parts, hi = p.V * (k + 1) / parts;
      found[u] = static_cast<std::int32_t>(lo) + argmax_row(p.logits + r * p.V + lo, hi - lo);
    }
  });
  for (std::int64_t r = 0; r < p.B; ++r) {
    if (plain[r]) {
      const float* x = p.logits + r * p.V;
      std::int32_t best = found[r * parts];
      for (std::int64_t k = 1; k < parts && !std::isnan(x[best]); ++k) {
        const std::int32_t i = found[r * parts + k];
        if (std::isnan(x[i]) || x[i] > x[best]) best = i;
      }
      p.out[r] = best;
    }
    if (p.advance_steps) p.steps[r] += 1;
  }
  return true;
}

void sample_cpu(const void* raw, std::size_t size, const ExecContext& ctx) {
  const auto& p = params_of<SampleParams>(raw, size, "sample");
  if (sample_split(p, ctx)) return;
  ctx.parallel_for(p.B, 1, [&](std::int64_t b, std::int64_t e) {
    Scratch scratch;
    for (std::int64_t r = b; r < e; ++r) {
      p.out[r] = sample_row(p, r, scratch);
      if (p.advance_steps) p.steps[r] += 1;
    }
  });
}

const KernelDef kArgmax{.name = "argmax", .cpu = argmax_cpu,
                        .cuda = NG_LLM_CUDA_SLOT(&sampling_impl::argmax_cuda)};
const KernelDef kSample{.name = "sample", .cpu = sample_cpu,
                        .cuda = NG_LLM_CUDA_SLOT(&sampling_impl::sample_cuda)};

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

void check_row_tensor(const char* op, const char* arg, const Tensor& t, DType dtype, const Tensor& logits) {
  NG_CHECK_ARG(t.defined(), op, ": ", arg, " is undefined");
  NG_CHECK_ARG(t.dtype() == dtype && t.is_contiguous() && t.numel() == logits.size(0), op, ": ", arg, " = ",
               t.str(), ": must be a contiguous ", dtype_name(dtype), " tensor of ", logits.size(0),
               " elements (one per row of logits = ", logits.str(), ")");
  check_same_device(op, arg, t, logits);
}

void check_i64(const char* op, const char* arg, const Tensor& t, const Tensor& logits) {
  check_row_tensor(op, arg, t, DType::i64, logits);
}

// The tensors' part of sample's / sample_rows' parameters.
SampleParams sample_params(const Tensor& logits, const Tensor& seeds, const Tensor& steps, const Tensor& out) {
  SampleParams p;
  p.logits = logits.data_ptr<float>();
  p.seeds = seeds.data_ptr<std::int64_t>();
  p.steps = steps.data_ptr<std::int64_t>();
  p.out = out.data_ptr<std::int32_t>();
  p.B = logits.size(0);
  p.V = logits.size(1);
  return p;
}

}  // namespace

const KernelDef& argmax_kernel() { return kArgmax; }
const KernelDef& sample_kernel() { return kSample; }

void argmax_out(const Tensor& logits, const Tensor& out) {
  const Stream& stream = current_stream_ref(logits.device());
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
  const Stream& stream = current_stream_ref(logits.device());
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
  if (logits.device().type() == DeviceType::cuda) {
    const std::string why = sampling_impl::sample_cuda_unsupported(options, logits.size(1), logits.device());
    if (!why.empty()) NG_THROW(UnsupportedError, why);
  }
  SampleParams p = sample_params(logits, seeds, steps, out);
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

void sample_rows_out(const Tensor& logits, const Tensor& seeds, const Tensor& steps, const SamplingRows& rows,
                     const Tensor& out) {
  const Stream& stream = current_stream_ref(logits.device());
  const UpdateErrorGuard guard(stream);
  constexpr const char* op = "sample_rows";
  check_logits(op, logits);
  check_i64(op, "seeds", seeds, logits);
  check_i64(op, "steps", steps, logits);
  check_row_tensor(op, "temperature", rows.temperature, DType::f32, logits);
  if (rows.top_k.defined()) check_row_tensor(op, "top_k", rows.top_k, DType::i64, logits);
  if (rows.top_p.defined()) check_row_tensor(op, "top_p", rows.top_p, DType::f32, logits);
  const LogitAdjustRows& a = rows.adjust;
  if (a.count.defined()) {
    check_row_tensor(op, "adjust.count", a.count, DType::i32, logits);
    NG_CHECK_ARG(a.tokens.defined() && a.tokens.dtype() == DType::i32 && a.tokens.dim() == 2 &&
                     a.tokens.is_contiguous() && a.tokens.size(0) == logits.size(0),
                 op, ": adjust.tokens = ", a.tokens.str(), ": must be a contiguous int32 [", logits.size(0),
                 ", capacity] (one list per row of logits)");
    for (const auto& [name, t] : {std::pair{"adjust.scale", &a.scale}, std::pair{"adjust.add", &a.add}})
      NG_CHECK_ARG(t->defined() && t->dtype() == DType::f32 && t->is_contiguous() && t->shape() == a.tokens.shape(), op,
                   ": ", name, " = ", t->str(), ": must be a contiguous float32 tensor shaped as adjust.tokens = ",
                   a.tokens.str());
    for (const Tensor* t : {&a.tokens, &a.scale, &a.add}) check_same_device(op, "adjust", *t, logits);
    NG_CHECK_AS(UnsupportedError, logits.device().type() != DeviceType::cuda, op, " on ", logits.device().str(),
                ": adjustment lists (penalties, logit biases) are not supported on the CUDA backend yet");
  }
  const TokenMaskRows& m = rows.mask;
  const std::int64_t words = (logits.size(1) + 31) / 32;
  if (m.on.defined()) {
    check_row_tensor(op, "mask.on", m.on, DType::i32, logits);
    const bool shaped = m.bits.defined() && m.bits.dim() == 2 && m.bits.size(0) == logits.size(0) &&
                        m.bits.size(1) == words;
    NG_CHECK_ARG(shaped && m.bits.dtype() == DType::i32 && m.bits.is_contiguous(),
                 op, ": mask.bits = ", m.bits.str(), ": must be a contiguous int32 [", logits.size(0), ", ", words,
                 "] (ceil(vocab / 32) words of allowed-token bits per row of logits)");
    check_same_device(op, "mask.bits", m.bits, logits);
    NG_CHECK_AS(UnsupportedError, logits.device().type() != DeviceType::cuda, op, " on ", logits.device().str(),
                ": token masks (structured output) are not supported on the CUDA backend yet");
  } else {
    NG_CHECK_ARG(!m.bits.defined(), op, ": mask.bits is given without mask.on (which rows are masked)");
  }
  check_out(op, out, logits);
  if (logits.device().type() == DeviceType::cuda)
    NG_CHECK_AS(UnsupportedError, !rows.top_k.defined() && !rows.top_p.defined(), op, " on ",
                logits.device().str(), ": per-row top_k / top_p are not supported on the CUDA backend yet "
                "(give temperature alone: a draw from the whole vocabulary, or greedy)");
  SampleParams p = sample_params(logits, seeds, steps, out);
  p.advance_steps = rows.advance_steps;
  p.per_row = true;
  p.row_temperature = rows.temperature.data_ptr<float>();
  if (rows.top_k.defined()) p.row_top_k = rows.top_k.data_ptr<std::int64_t>();
  if (rows.top_p.defined()) p.row_top_p = rows.top_p.data_ptr<float>();
  if (a.count.defined()) {
    p.adjust_count = a.count.data_ptr<std::int32_t>();
    p.adjust_tokens = a.tokens.data_ptr<std::int32_t>();
    p.adjust_scale = a.scale.data_ptr<float>();
    p.adjust_add = a.add.data_ptr<float>();
    p.adjust_capacity = a.tokens.size(1);
  }
  if (m.on.defined()) {
    p.mask_on = m.on.data_ptr<std::int32_t>();
    p.mask_bits = reinterpret_cast<const std::uint32_t*>(m.bits.data_ptr<std::int32_t>());
    p.mask_words = words;
  }
  const Tensor* uses[] = {&logits, &seeds, &steps, &rows.temperature, &rows.top_k, &rows.top_p,
                          &a.count, &a.tokens, &a.scale, &a.add, &m.on, &m.bits, &out};  // undefined skipped
  launch(stream, kSample, p, uses);
}

}  // namespace npugraph::ops
