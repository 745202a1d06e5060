// Shared by the libFuzzer harnesses: a byte reader that never fails (reads past the end give 0),
// exact-size host buffers (so ASan sees every out-of-bounds access, which the caching allocator's
// rounded blocks would hide), and the rule every harness enforces: only npugraph::Error may leave
// a library call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include "npugraph/npugraph.hpp"

namespace ngfuzz {

class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : p_(data), n_(size) {}

  std::size_t left() const { return n_ - at_; }
  std::uint8_t u8() { return at_ < n_ ? p_[at_++] : 0; }
  std::uint16_t u16() { return static_cast<std::uint16_t>(u8() | (u8() << 8)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(u16()) | (static_cast<std::uint32_t>(u16()) << 16); }
  std::uint64_t u64() { return static_cast<std::uint64_t>(u32()) | (static_cast<std::uint64_t>(u32()) << 32); }
  bool flag() { return u8() & 1; }
  // True with probability about num/256; a 0 byte (and the end of the input) reads false, so an
  // all-zero input takes every common path.
  bool chance(int num) { return u8() >= 256 - num; }
  // Uniform-ish in [lo, hi].
  std::int64_t range(std::int64_t lo, std::int64_t hi) {
    if (hi <= lo) return lo;
    const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
    const std::uint64_t r = span <= 256 ? u8() : span <= 65536 ? u16() : u32();
    return lo + static_cast<std::int64_t>(r % span);
  }
  template <class T, std::size_t N>
  const T& pick(const T (&options)[N]) { return options[u8() % N]; }
  template <class T>
  T one_of(std::initializer_list<T> options) { return options.begin()[u8() % options.size()]; }

 private:
  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t at_ = 0;
};

// A small deterministic generator for tensor contents (seeded from the input).
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  // In [-1, 1).
  double unit() { return static_cast<double>(next() >> 11) * (2.0 / 9007199254740992.0) - 1.0; }
};

// A CPU tensor over a heap buffer of exactly the bytes its shape and strides address.
inline npugraph::Tensor exact_tensor(const npugraph::Shape& shape, const npugraph::Shape& strides,
                                     npugraph::DType dtype) {
  std::int64_t extent = 1;
  bool empty = false;
  for (int i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) empty = true;
    else extent += (shape[i] - 1) * strides[i];
  }
  const std::size_t bytes = empty ? 0 : static_cast<std::size_t>(extent) * npugraph::dtype_size(dtype);
  std::shared_ptr<std::uint8_t[]> buf(new std::uint8_t[bytes ? bytes : 1]);
  std::memset(buf.get(), 0, bytes ? bytes : 1);
  void* data = buf.get();
  return npugraph::Tensor::from_blob(data, shape, strides, dtype, std::shared_ptr<void>(buf, data));
}

inline npugraph::Tensor exact_tensor(const npugraph::Shape& shape, npugraph::DType dtype) {
  return exact_tensor(shape, npugraph::contiguous_strides(shape), dtype);
}

// Writes `x` into element `i` (flat over the buffer) of a tensor's storage in its dtype.
inline void store(void* base, std::int64_t i, npugraph::DType dtype, double x) {
  using namespace npugraph;
  auto* p = static_cast<std::uint8_t*>(base) + i * static_cast<std::int64_t>(dtype_size(dtype));
  switch (dtype) {
    case DType::f32: { const float f = static_cast<float>(x); std::memcpy(p, &f, 4); break; }
    case DType::f16: { const half h(static_cast<float>(x)); std::memcpy(p, &h.bits, 2); break; }
    case DType::bf16: { const bfloat16 h(static_cast<float>(x)); std::memcpy(p, &h.bits, 2); break; }
    case DType::i8: { const auto v = static_cast<std::int8_t>(static_cast<int>(x * 100) % 128); std::memcpy(p, &v, 1); break; }
    case DType::u8: case DType::boolean: { const std::uint8_t v = x > 0 ? 1 : 0; std::memcpy(p, &v, 1); break; }
    case DType::i32: { const auto v = static_cast<std::int32_t>(x); std::memcpy(p, &v, 4); break; }
    case DType::i64: { const auto v = static_cast<std::int64_t>(x); std::memcpy(p, &v, 8); break; }
  }
}

// Fills every byte the tensor's storage holds with values from `rng` (scaled by `scale`).
inline void fill_random(const npugraph::Tensor& t, Rng& rng, double scale = 1.0) {
  if (!t.defined() || t.numel() == 0) return;  // (from_blob's storage of an empty view claims bytes)
  const std::int64_t n = static_cast<std::int64_t>(t.storage()->nbytes() / dtype_size(t.dtype()));
  for (std::int64_t i = 0; i < n; ++i) store(t.storage()->data(), i, t.dtype(), rng.unit() * scale);
}

// Only npugraph::Error may leave a library call: anything else is a finding.
[[noreturn]] inline void foreign_exception(const char* where, const char* what, const char* type) {
  std::fprintf(stderr, "FINDING: %s: a non-npugraph exception escaped (%s): %s\n", where, type, what);
  std::abort();
}

// NGFUZZ_VERBOSE=1: print every error a guarded call catches (to see what an input reaches).
inline bool verbose() {
  static const bool v = std::getenv("NGFUZZ_VERBOSE") != nullptr;
  return v;
}

// The message of the last npugraph::Error a guarded call caught.
inline std::string& last_error() {
  static std::string s;
  return s;
}

// Runs f; true when it returned, false when it threw an npugraph::Error (other than InternalError,
// which names a bug in npugraph and is a finding like any foreign exception).
template <class F>
bool guarded(const char* where, F&& f) {
  try {
    f();
    return true;
  } catch (const npugraph::Error& e) {
    if (e.kind() == npugraph::ErrorKind::internal)
      foreign_exception(where, e.what(), "npugraph::InternalError");
    last_error() = e.what();
    if (verbose()) std::fprintf(stderr, "[%s] %s\n", where, e.what());
    return false;
  } catch (const std::exception& e) {
    foreign_exception(where, e.what(), typeid(e).name());
  } catch (...) {
    foreign_exception(where, "?", "unknown");
  }
}

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n", what.c_str());
  std::abort();
}

}  // namespace ngfuzz
