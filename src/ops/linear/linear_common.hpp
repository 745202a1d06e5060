// Pieces the linear kernels share (linear_simd.cpp, linear_q8_simd.cpp, linear_packed_simd.cpp):
// the output store, the weight prefetch of the GEMV and the dispatch on the weight's row of the
// quantisation table. Plain C++, the same on every Highway target.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "hwy/cache_control.h"
#include "npugraph/dtype.hpp"
#include "npugraph/error.hpp"
#include "npugraph/ops/quant_table.hpp"
#include "ops/linear/linear_params.hpp"

namespace npugraph::ops::linear_impl {

// Bytes of weights prefetched ahead of the rows being computed (GEMV; Note [Linear kernels]).
inline constexpr std::int64_t kPrefetchAhead = 6 << 10;

// Prefetches the cache lines of [from, to).
inline void prefetch_range(const std::byte* from, const std::byte* to) {
  const auto line = reinterpret_cast<std::uintptr_t>(from) & ~std::uintptr_t{63};
  for (auto a = line; a < reinterpret_cast<std::uintptr_t>(to); a += 64)
    hwy::Prefetch(reinterpret_cast<const std::byte*>(a));
}

// y[t, n] = v + bias[n], in the output's dtype.
inline void store_out(const LinearParams& p, std::int64_t t, std::int64_t n, float v) {
  if (p.bias) v += p.bias[n];
  const std::int64_t i = t * p.y_stride + n;
  switch (p.y_dtype) {
    case DType::f16: static_cast<half*>(p.y)[i] = half(v); return;
    case DType::bf16: static_cast<bfloat16*>(p.y)[i] = bfloat16(v); return;
    default: static_cast<float*>(p.y)[i] = v; return;
  }
}

// A kernel's dispatch on the weight's type (Note [Quantisation table]): entry i is pick(I) for row
// i of kGgmlTypes, built at compile time; `pick` returns the row's kernel where the row's flag says
// it has one (static_asserting that the kernel exists) and nullptr elsewhere. A launch looks its
// type up once; nothing per element.
template <class Fn>
using KernelTable = std::array<Fn, kGgmlTypeCount>;

template <class Fn, class Pick, std::size_t... I>
constexpr KernelTable<Fn> make_kernel_table(Pick pick, std::index_sequence<I...>) {
  return {pick(std::integral_constant<std::size_t, I>{})...};
}
template <class Fn, class Pick>
constexpr KernelTable<Fn> make_kernel_table(Pick pick) {
  return make_kernel_table<Fn>(pick, std::make_index_sequence<kGgmlTypeCount>{});
}

// The kernel of `type` in `table`; InternalError naming the kernel and the type when it has none
// (the ops check the row's flags before launching, so this is a bug, never a user's error).
template <class Fn>
Fn kernel_for(const KernelTable<Fn>& table, GgmlType type, const char* kernel) {
  const auto i = static_cast<std::size_t>(type);
  const Fn fn = i < kGgmlTypeCount ? table[i] : nullptr;
  if (fn == nullptr)
    NG_THROW(InternalError, kernel, ": no kernel for weights of type ", ggml_traits(type).name, " (",
             static_cast<std::uint32_t>(type), ")");
  return fn;
}

}  // namespace npugraph::ops::linear_impl
