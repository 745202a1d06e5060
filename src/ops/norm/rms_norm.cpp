// npu_rms_norm / npu_add_rms_norm: checks, launch, and the row kernel.
#include "npugraph/ops/rms_norm.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>

#include "npugraph/memory.hpp"
#include "npugraph/ops/elementwise.hpp"
#include "npugraph/stream.hpp"
#include "ops/activation/float_io.hpp"
#include "ops/elementwise/elementwise_params.hpp"
#include "ops/norm/rms_norm_params.hpp"

namespace npugraph::ops {
namespace {

using namespace detail_llm;
using norm_impl::RmsNormParams;


// Rows per chunk: about 16K elements, a function of H only.
std::int64_t grain(std::int64_t H) { return std::max<std::int64_t>(1, (1 << 14) / std::max<std::int64_t>(H, 1)); }

// Any float dtypes; float32 rows take rms_norm_rows_f32, which gives these bits (Note [RMSNorm
// lanes] in rms_norm_simd.cpp).
template <class TX, class TG, class TY, class TO, bool kAdd>
void rows_kernel(const RmsNormParams& p, std::int64_t r0, std::int64_t r1) {
  const std::int64_t H = p.H;
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t base = r * H;
    // The row as float32 (for add: x1 + x2 rounded to x_out's dtype, written there first).
    auto xv = [&](std::int64_t i) {
      if constexpr (kAdd) return load<TO>(p.x_out, base + i);
      else return load<TX>(p.x1, base + i);
    };
    if constexpr (kAdd)
      for (std::int64_t i = 0; i < H; ++i)
        store<TO>(p.x_out, base + i, load<TX>(p.x1, base + i) + load<TX>(p.x2, base + i));
    double s[4] = {0, 0, 0, 0};
    std::int64_t i = 0;
    for (; i + 4 <= H; i += 4)
      for (int j = 0; j < 4; ++j) {
        const double v = xv(i + j);
        s[j] += v * v;
      }
    for (; i < H; ++i) {
      const double v = xv(i);
      s[0] += v * v;
    }
    const double ms = ((s[0] + s[1]) + (s[2] + s[3])) / static_cast<double>(H);
    const auto rstd = static_cast<float>(1.0 / std::sqrt(ms + p.epsilon));
    if (p.rstd) p.rstd[r] = rstd;
    for (std::int64_t k = 0; k < H; ++k) store<TY>(p.y, base + k, (xv(k) * rstd) * load<TG>(p.gamma, k));
  }
}

template <bool kAdd>
void rms_norm_cpu(const void* raw, std::size_t size, const ExecContext& ctx) {
  const auto& p = params_of<RmsNormParams>(raw, size, kAdd ? "add_rms_norm" : "rms_norm");
  if (p.x_dtype == DType::f32 && p.gamma_dtype == DType::f32 && p.y_dtype == DType::f32 &&
      (!kAdd || p.x_out_dtype == DType::f32)) {
    // The same bits, a vector at a time (Note [RMSNorm lanes] in rms_norm_simd.cpp).
    ctx.parallel_for(p.rows, grain(p.H), [&](std::int64_t b, std::int64_t e) {
      norm_impl::rms_norm_rows_f32(p, kAdd, b, e);
    });
    return;
  }
  dispatch_float(p.x_dtype, [&](auto tx) {
    dispatch_float(p.gamma_dtype, [&](auto tg) {
      dispatch_float(p.y_dtype, [&](auto ty) {
        dispatch_float(kAdd ? p.x_out_dtype : p.x_dtype, [&](auto to) {
          using TX = decltype(tx);
          using TG = decltype(tg);
          using TY = decltype(ty);
          using TO = decltype(to);
          ctx.parallel_for(p.rows, grain(p.H), [&](std::int64_t b, std::int64_t e) {
            rows_kernel<TX, TG, TY, TO, kAdd>(p, b, e);
          });
        });
      });
    });
  });
}

const KernelDef kRmsNorm{.name = "rms_norm", .cpu = rms_norm_cpu<false>,
                         .cuda = NG_LLM_CUDA_SLOT(&norm_impl::rms_norm_cuda)};
const KernelDef kAddRmsNorm{.name = "add_rms_norm", .cpu = rms_norm_cpu<true>,
                            .cuda = NG_LLM_CUDA_SLOT(&norm_impl::add_rms_norm_cuda)};

// Note [add then rms_norm]
// A graph's add(a, b -> out) followed by rms_norm(out -> y) runs as add_rms_norm (Note [Kernel
// fusion] in npugraph/kernel.hpp): as a decoder layer's residual add and the next layer's norm do.
// Float32 only, where both kernels give the scalar kernels' bits: the add is one float add per
// element either way, and add_rms_norm's rows read the sums it wrote, as rms_norm's read the add's
// (Note [RMSNorm lanes]). The fused task goes row by row (a few rows at a time) where the two
// went pass by pass, so a row may read only its own row of what the other kernel writes: out and
// y may each be a, b, each other or apart from them, and gamma and rstd apart from what is written.
struct Bytes {
  const void* p;
  std::size_t n;
};
bool apart(Bytes a, Bytes b) {
  const auto x = reinterpret_cast<std::uintptr_t>(a.p), y = reinterpret_cast<std::uintptr_t>(b.p);
  return x + a.n <= y || y + b.n <= x;
}
bool same_or_apart(Bytes a, Bytes b) { return (a.p == b.p && a.n == b.n) || apart(a, b); }

bool add_then_norm_match(std::span<const std::byte> first, std::span<const std::byte> second) {
  if (first.size() != sizeof(elementwise::BinaryParams) || second.size() != sizeof(RmsNormParams)) return false;
  elementwise::BinaryParams a;
  RmsNormParams r;
  std::memcpy(&a, first.data(), sizeof a);
  std::memcpy(&r, second.data(), sizeof r);
  if (a.dtype != DType::f32 || r.x_dtype != DType::f32 || r.gamma_dtype != DType::f32 || r.y_dtype != DType::f32)
    return false;
  if (r.x1 != a.out || r.x2 || r.H <= 0 || r.rows <= 0 || r.rows * r.H != a.n) return false;
  const auto n = static_cast<std::size_t>(a.n) * sizeof(float);
  const Bytes A{a.a, n}, B{a.b, n}, X{a.out, n}, Y{r.y, n}, G{r.gamma, static_cast<std::size_t>(r.H) * sizeof(float)};
  if (!same_or_apart(X, A) || !same_or_apart(X, B) || !same_or_apart(Y, A) || !same_or_apart(Y, B) ||
      !same_or_apart(Y, X) || !apart(G, X) || !apart(G, Y))
    return false;
  const Bytes S{r.rstd, static_cast<std::size_t>(r.rows) * sizeof(float)};
  return !r.rstd || (apart(S, A) && apart(S, B) && apart(S, X) && apart(S, Y) && apart(S, G));
}

void add_then_norm_cpu(const void* first, std::size_t first_size, const void* second, std::size_t second_size,
                       const ExecContext& ctx) {
  const auto& a = params_of<elementwise::BinaryParams>(first, first_size, "add");
  RmsNormParams p = params_of<RmsNormParams>(second, second_size, "rms_norm");
  p.x1 = a.a;
  p.x2 = a.b;
  p.x_out = a.out;
  p.x_out_dtype = DType::f32;
  rms_norm_cpu<true>(&p, sizeof p, ctx);
}

const KernelFusion kAddThenNorm{.name = "add+rms_norm", .first = &add_kernel(), .second = &kRmsNorm,
                                .match = add_then_norm_match, .cpu = add_then_norm_cpu};
const bool kAddThenNormRegistered = (register_kernel_fusion(kAddThenNorm), true);

Shape rstd_shape(const Tensor& x) {
  Shape s = x.shape();
  s[s.size() - 1] = 1;
  return s;
}

// Checks x (as `xname`), gamma, y and rstd; returns the row count.
std::int64_t check_norm(const char* op, const char* xname, const Tensor& x, const Tensor& gamma,
                        double epsilon, const Tensor& y, const Tensor& rstd) {
  check_float(op, xname, x);
  NG_CHECK_ARG(x.dim() >= 1 && x.size(-1) > 0, op, ": ", xname, " = ", x.str(),
               ": must have a last dim of positive size");
  const std::int64_t H = x.size(-1);
  check_float(op, "gamma", gamma);
  NG_CHECK_ARG(gamma.dim() == 1 && gamma.size(0) == H, op, ": gamma = ", gamma.str(),
               ": must have the hidden size ", H, " of ", xname, " = ", x.str());
  NG_CHECK_ARG(gamma.dtype() == x.dtype() || gamma.dtype() == DType::f32, op, ": gamma = ",
               gamma.str(), ": must be float32 or the dtype of ", xname, " = ", x.str());
  check_same_device(op, "gamma", gamma, x);
  NG_CHECK_ARG(std::isfinite(epsilon) && epsilon >= 0, op, ": epsilon = ", epsilon,
               ": must be finite and >= 0");
  check_float(op, "y", y);
  NG_CHECK_ARG(y.shape() == x.shape(), op, ": y = ", y.str(), ": must have the shape of ", xname,
               " = ", x.str());
  check_same_device(op, "y", y, x);
  if (rstd.defined()) {
    NG_CHECK_ARG(rstd.dtype() == DType::f32 && rstd.shape() == rstd_shape(x) && rstd.is_contiguous(),
                 op, ": rstd = ", rstd.str(), ": must be a contiguous float32", rstd_shape(x).str(),
                 " (", xname, " = ", x.str(), " with its last dim 1)");
    check_same_device(op, "rstd", rstd, x);
  }
  return x.numel() / H;
}

}  // namespace

const KernelDef& rms_norm_kernel() { return kRmsNorm; }
const KernelDef& add_rms_norm_kernel() { return kAddRmsNorm; }

void rms_norm_out(const Tensor& x, const Tensor& gamma, double epsilon, const Tensor& y,
                  const Tensor& rstd) {
  const Stream& stream = current_stream_ref(x.device());
  const UpdateErrorGuard guard(stream);
  RmsNormParams p;
  p.rows = check_norm("rms_norm", "x", x, gamma, epsilon, y, rstd);
  p.H = x.size(-1);
  p.x1 = x.data();
  p.gamma = gamma.data();
  p.y = y.data();
  p.rstd = rstd.defined() ? rstd.data_ptr<float>() : nullptr;
  p.epsilon = epsilon;
  p.x_dtype = x.dtype();
  p.gamma_dtype = gamma.dtype();
  p.y_dtype = y.dtype();
  const Tensor* uses[] = {&x, &gamma, &y, &rstd};
  launch(stream, kRmsNorm, p, uses);
}

RmsNormResult npu_rms_norm(const Tensor& x, const Tensor& gamma, double epsilon) {
  check_float("rms_norm", "x", x);
  NG_CHECK_ARG(x.dim() >= 1, "rms_norm: x = ", x.str(), ": must have at least one dim");
  RmsNormResult r{empty(x.shape(), x.dtype(), x.device()), empty(rstd_shape(x), DType::f32, x.device())};
  rms_norm_out(x, gamma, epsilon, r.y, r.rstd);
  return r;
}

void add_rms_norm_out(const Tensor& x1, const Tensor& x2, const Tensor& gamma, double epsilon,
                      const Tensor& y, const Tensor& rstd, const Tensor& x_out) {
  const Stream& stream = current_stream_ref(x1.device());
  const UpdateErrorGuard guard(stream);
  constexpr const char* op = "add_rms_norm";
  check_float(op, "x1", x1);
  check_float(op, "x2", x2);
  NG_CHECK_ARG(x2.dtype() == x1.dtype() && x2.shape() == x1.shape(), op, ": x2 = ", x2.str(),
               ": must have the dtype and shape of x1 = ", x1.str());
  check_same_device(op, "x2", x2, x1);
  check_float(op, "x", x_out);
  NG_CHECK_ARG(x_out.shape() == x1.shape(), op, ": x = ", x_out.str(),
               ": must have the shape of x1 = ", x1.str());
  check_same_device(op, "x", x_out, x1);
  RmsNormParams p;
  p.rows = check_norm(op, "x1", x1, gamma, epsilon, y, rstd);
  p.H = x1.size(-1);
  p.x1 = x1.data();
  p.x2 = x2.data();
  p.gamma = gamma.data();
  p.y = y.data();
  p.rstd = rstd.defined() ? rstd.data_ptr<float>() : nullptr;
  p.x_out = x_out.data();
  p.epsilon = epsilon;
  p.x_dtype = x1.dtype();
  p.gamma_dtype = gamma.dtype();
  p.y_dtype = y.dtype();
  p.x_out_dtype = x_out.dtype();
  const Tensor* uses[] = {&x1, &x2, &gamma, &y, &rstd, &x_out};
  launch(stream, kAddRmsNorm, p, uses);
}

AddRmsNormResult npu_add_rms_norm(const Tensor& x1, const Tensor& x2, const Tensor& gamma,
                                  double epsilon) {
  check_float("add_rms_norm", "x1", x1);
  NG_CHECK_ARG(x1.dim() >= 1, "add_rms_norm: x1 = ", x1.str(), ": must have at least one dim");
  AddRmsNormResult r{empty(x1.shape(), x1.dtype(), x1.device()),
                     empty(rstd_shape(x1), DType::f32, x1.device()),
                     empty(x1.shape(), x1.dtype(), x1.device())};
  add_rms_norm_out(x1, x2, gamma, epsilon, r.y, r.rstd, r.x);
  return r;
}

}  // namespace npugraph::ops
