// Small host/kernel helpers shared by the decode-engine ops (norm, rope, activation, embedding,
// kv_cache, sampling): float dtype dispatch, element loads/stores, and the argument checks whose
// messages name the op, the argument, its value and the rule.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "npugraph/dtype.hpp"
#include "npugraph/error.hpp"
#include "npugraph/tensor.hpp"

// A KernelDef's CUDA slot: the launcher when the library is built with the CUDA backend
// (cmake/Cuda.cmake defines NPUGRAPH_HAVE_CUDA), else empty (launch() then refuses the kernel).
#if NPUGRAPH_HAVE_CUDA
#define NG_LLM_CUDA_SLOT(f) (f)
#else
#define NG_LLM_CUDA_SLOT(f) nullptr
#endif

namespace npugraph::ops::detail_llm {

// f(T{}) for the storage type T of a float dtype (float, half, bfloat16).
template <class F>
decltype(auto) dispatch_float(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f16: return f(half{});
    case DType::bf16: return f(bfloat16{});
    default: return f(float{});
  }
}

template <class T>
inline float load(const void* p, std::int64_t i) {
  return static_cast<float>(static_cast<const T*>(p)[i]);
}
template <class T>
inline void store(void* p, std::int64_t i, float v) {
  static_cast<T*>(p)[i] = T(v);
}

inline std::string describe(const Tensor& t) { return t.defined() ? t.str() : "undefined"; }

// Defined, contiguous, of a float dtype.
inline void check_float(const char* op, const char* arg, const Tensor& t) {
  NG_CHECK_ARG(t.defined(), op, ": ", arg, " is undefined");
  NG_CHECK_ARG(is_floating(t.dtype()), op, ": ", arg, " = ", t.str(),
               ": must be float32, float16 or bfloat16");
  NG_CHECK_ARG(t.is_contiguous(), op, ": ", arg, " = ", t.str(), ": must be contiguous");
}

// Defined, contiguous int32 with `n` elements (a device tensor the kernel reads per launch).
inline void check_i32(const char* op, const char* arg, const Tensor& t, std::int64_t n,
                      const char* what) {
  NG_CHECK_ARG(t.defined(), op, ": ", arg, " is undefined");
  NG_CHECK_ARG(t.dtype() == DType::i32, op, ": ", arg, " = ", t.str(), ": must be int32");
  NG_CHECK_ARG(t.is_contiguous(), op, ": ", arg, " = ", t.str(), ": must be contiguous");
  NG_CHECK_ARG(t.numel() == n, op, ": ", arg, " = ", t.str(), ": must have ", n, " elements (",
               what, ")");
}

inline void check_same_device(const char* op, const char* arg, const Tensor& t, const Tensor& ref) {
  NG_CHECK_ARG(t.device() == ref.device(), op, ": ", arg, " is on ", t.device().str(),
               ": must be on ", ref.device().str());
}

// Parameter blocks are checked by size before a kernel reads them.
template <class P>
inline const P& params_of(const void* raw, std::size_t size, const char* kernel) {
  if (size != sizeof(P))
    NG_THROW(TaskError, kernel, ": parameter block of ", size, " bytes, expected ", sizeof(P));
  return *static_cast<const P*>(raw);
}

}  // namespace npugraph::ops::detail_llm
