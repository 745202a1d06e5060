// rotary_embedding: checks, launch, and the kernel (Note [RoPE pairing] in rope.hpp).
#include "npugraph/ops/rope.hpp"

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "npugraph/memory.hpp"
#include "npugraph/stream.hpp"
#include "ops/activation/float_io.hpp"
#include "ops/rope/rope_params.hpp"

namespace npugraph::ops {
namespace {

using namespace detail_llm;

using rope_impl::kMaxHeadDim;
using rope_impl::RopeParams;

// Note [RoPE angle cache]
// A position's cos and sin (float64 trig, rounded to float) were once computed for every call:
// the decode step's q and k of every layer share the step's positions, and for Gemma 3's 128
// pairs per token the trig was most of the op (1 ms of a 55 ms B8 step; bench_profile). Each
// thread now keeps the last rows it computed, 64 sets chosen by position, two rows in each (the
// least recently used one is replaced), each tagged with the position and everything the angles
// depend on (rot, theta, freq_scale, the frequency factors' values, hashed and compared through
// the hash): a hit reads the same floats the computation gives, so results are bitwise what they
// were, and a miss (a new position, other parameters, three rows on one set) computes them as
// before. Two ways, because Gemma 3 alternates two rope bases (local and global layers) at the
// same positions: with one row per slot each switch of base recomputed the step's angles. The
// cache is the thread's own: no locks.
struct AngleKey {
  std::int64_t rot = -1;
  double theta = 0, freq_scale = 0;
  std::uint64_t factors = 0;  // FNV-1a of the factors' bits; 0: none
  bool operator==(const AngleKey&) const = default;
};

struct AngleRow {
  std::int64_t position = -1;
  AngleKey key;
  std::vector<float> cs;  // cos of pairs 0..half-1, then their sin
};

AngleKey angle_key(const RopeParams& p) {
  AngleKey k{.rot = p.rot, .theta = p.theta, .freq_scale = p.freq_scale};
  if (p.freq_factors != nullptr) {
    std::uint64_t h = 1469598103934665603ull;
    for (std::int64_t i = 0; i < p.rot / 2; ++i) {
      std::uint32_t bits;
      std::memcpy(&bits, &p.freq_factors[i], sizeof bits);
      h = (h ^ bits) * 1099511628211ull;
    }
    k.factors = h | 1;  // never 0
  }
  return k;
}

// The cos and sin of every pair at `position` (Note [RoPE angle cache]).
const float* angles(const RopeParams& p, const AngleKey& key, std::int64_t position) {
  constexpr std::size_t kSets = 64;
  thread_local std::vector<AngleRow> cache(2 * kSets);
  thread_local std::vector<std::uint8_t> victim(kSets);
  const std::size_t set = static_cast<std::size_t>(position) % kSets;
  for (std::size_t way = 0; way < 2; ++way) {
    AngleRow& hit = cache[2 * set + way];
    if (hit.position == position && hit.key == key) {
      victim[set] = static_cast<std::uint8_t>(1 - way);  // keep the row just used
      return hit.cs.data();
    }
  }
  AngleRow& row = cache[2 * set + victim[set]];
  victim[set] = static_cast<std::uint8_t>(1 - victim[set]);
  const std::int64_t half = p.rot / 2;
  row.cs.resize(static_cast<std::size_t>(2 * half));
  const auto pos = static_cast<double>(position);
  for (std::int64_t i = 0; i < half; ++i) {
    const double a = pos * rope_impl::inv_freq(p, i);
    row.cs[static_cast<std::size_t>(i)] = static_cast<float>(std::cos(a));
    row.cs[static_cast<std::size_t>(half + i)] = static_cast<float>(std::sin(a));
  }
  row.position = position;
  row.key = key;
  return row.cs.data();
}

template <class TX, class TO>
void rope_tokens(const RopeParams& p, std::int64_t t0, std::int64_t t1) {
  const std::int64_t half = p.rot / 2;
  const AngleKey key = angle_key(p);
  const bool in_place = p.x == p.out;
  for (std::int64_t t = t0; t < t1; ++t) {
    const float* c = angles(p, key, p.positions[t]);
    if constexpr (std::is_same_v<TX, float> && std::is_same_v<TO, float>) {
      rope_impl::rope_token_f32(p, t, c);  // the same bits, a vector at a time
      continue;
    }
    const float* s = c + half;
    for (std::int64_t h = 0; h < p.heads; ++h) {
      const std::int64_t base = (t * p.heads + h) * p.D;
      for (std::int64_t i = 0; i < half; ++i) {
        const std::int64_t ia = base + (p.neox ? i : 2 * i);
        const std::int64_t ib = base + (p.neox ? i + half : 2 * i + 1);
        const float a = load<TX>(p.x, ia), b = load<TX>(p.x, ib);
        store<TO>(p.out, ia, a * c[i] - b * s[i]);
        store<TO>(p.out, ib, b * c[i] + a * s[i]);
      }
      if (!in_place)
        for (std::int64_t d = p.rot; d < p.D; ++d) store<TO>(p.out, base + d, load<TX>(p.x, base + d));
    }
  }
}

void rope_cpu(const void* raw, std::size_t size, const ExecContext& ctx) {
  const auto& p = params_of<RopeParams>(raw, size, "rotary_embedding");
  const std::int64_t grain = std::max<std::int64_t>(1, 8192 / std::max<std::int64_t>(1, p.heads * p.D));
  dispatch_float(p.x_dtype, [&](auto tx) {
    dispatch_float(p.out_dtype, [&](auto to) {
      ctx.parallel_for(p.T, grain, [&](std::int64_t b, std::int64_t e) {
        rope_tokens<decltype(tx), decltype(to)>(p, b, e);
      });
    });
  });
}

const KernelDef kRope{.name = "rotary_embedding", .cpu = rope_cpu,
                      .cuda = NG_LLM_CUDA_SLOT(&rope_impl::rope_cuda)};

}  // namespace

const KernelDef& rotary_embedding_kernel() { return kRope; }

void rotary_embedding_out(const Tensor& positions, const Tensor& x, const Tensor& out,
                          const RopeOptions& options) {
  const Stream& stream = current_stream_ref(x.device());
  const UpdateErrorGuard guard(stream);
  constexpr const char* op = "rotary_embedding";
  check_float(op, "x", x);
  NG_CHECK_ARG(x.dim() == 3, op, ": x = ", x.str(), ": must be [tokens, heads, head_dim]");
  const std::int64_t T = x.size(0), D = x.size(2);
  NG_CHECK_ARG(D > 0 && D <= kMaxHeadDim, op, ": x = ", x.str(), ": head_dim must be in [1, ",
               kMaxHeadDim, "]");
  const std::int64_t rot = options.rotary_dim == 0 ? D : options.rotary_dim;
  NG_CHECK_ARG(rot > 0 && rot <= D && rot % 2 == 0, op, ": rotary_dim = ", options.rotary_dim,
               ": must be 0 (the head dim) or an even number in [2, ", D, "] (x = ", x.str(), ")");
  NG_CHECK_ARG(std::isfinite(options.theta) && options.theta > 0, op, ": theta = ", options.theta,
               ": must be positive and finite");
  NG_CHECK_ARG(std::isfinite(options.freq_scale) && options.freq_scale > 0, op, ": freq_scale = ",
               options.freq_scale, ": must be positive and finite");
  if (options.freq_factors.defined()) {
    const Tensor& ff = options.freq_factors;
    NG_CHECK_ARG(ff.dtype() == DType::f32 && ff.dim() == 1 && ff.size(0) == rot / 2 && ff.is_contiguous(), op,
                 ": freq_factors = ", ff.str(), ": must be a contiguous float32 [", rot / 2,
                 "] (one divisor per rotated pair of x = ", x.str(), ")");
    check_same_device(op, "freq_factors", ff, x);
  }
  NG_CHECK_ARG(options.style == RopeStyle::neox || options.style == RopeStyle::norm, op,
               ": style = ", static_cast<int>(options.style), ": must be RopeStyle::neox or ::norm");
  check_i32(op, "positions", positions, T, "one per token of x");
  check_same_device(op, "positions", positions, x);
  check_float(op, "out", out);
  NG_CHECK_ARG(out.shape() == x.shape(), op, ": out = ", out.str(), ": must have the shape of x = ",
               x.str());
  check_same_device(op, "out", out, x);
  NG_CHECK_ARG(out.data() != x.data() || out.dtype() == x.dtype(), op, ": out = ", out.str(),
               ": in place (out is x) needs the dtype of x = ", x.str());
  RopeParams p;
  p.positions = positions.data_ptr<std::int32_t>();
  p.x = x.data();
  p.out = out.data();
  p.T = T;
  p.heads = x.size(1);
  p.D = D;
  p.rot = rot;
  p.theta = options.theta;
  p.freq_scale = options.freq_scale;
  p.freq_factors = options.freq_factors.defined() ? options.freq_factors.data_ptr<float>() : nullptr;
  p.neox = options.style == RopeStyle::neox;
  p.x_dtype = x.dtype();
  p.out_dtype = out.dtype();
  const Tensor* uses[] = {&positions, &x, &out, &options.freq_factors};
  launch(stream, kRope, p, uses);
}

Tensor rotary_embedding(const Tensor& positions, const Tensor& x, const RopeOptions& options,
                        DType out_dtype) {
  check_float("rotary_embedding", "x", x);
  Tensor out = empty(x.shape(), out_dtype, x.device());
  rotary_embedding_out(positions, x, out, options);
  return out;
}

}  // namespace npugraph::ops
