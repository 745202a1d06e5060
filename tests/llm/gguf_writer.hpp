// A tiny GGUF writer for the tests: builds files the reader must accept, and records where each
// field sits so a test can corrupt exactly one of them.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "npugraph/llm/gguf.hpp"

namespace ngtest {

using Bytes = std::vector<std::byte>;

struct GgufLayout {
  std::size_t version_at = 4, tensor_count_at = 8, kv_count_at = 16;
  std::map<std::string, std::size_t> key_at;        // the key's length field
  std::map<std::string, std::size_t> value_at;      // the type field after the key
  std::map<std::string, std::size_t> tensor_at;     // the name's length field
  std::map<std::string, std::size_t> offset_at;     // the tensor's data offset field
  std::map<std::string, std::size_t> type_at;       // the tensor's type field
  std::map<std::string, std::size_t> dims_at;       // the tensor's n_dims field
  std::size_t data_at = 0;                          // start of the data section
};

class GgufWriter {
 public:
  std::uint32_t version = 3;
  std::size_t alignment = 32;  // the data layout; write general.alignment yourself to change it

  void u8(const std::string& k, std::uint8_t v) { scalar(k, npugraph::llm::GgufType::u8, &v, 1); }
  void i8(const std::string& k, std::int8_t v) { scalar(k, npugraph::llm::GgufType::i8, &v, 1); }
  void u16(const std::string& k, std::uint16_t v) { scalar(k, npugraph::llm::GgufType::u16, &v, 2); }
  void i16(const std::string& k, std::int16_t v) { scalar(k, npugraph::llm::GgufType::i16, &v, 2); }
  void u32(const std::string& k, std::uint32_t v) { scalar(k, npugraph::llm::GgufType::u32, &v, 4); }
  void i32(const std::string& k, std::int32_t v) { scalar(k, npugraph::llm::GgufType::i32, &v, 4); }
  void u64(const std::string& k, std::uint64_t v) { scalar(k, npugraph::llm::GgufType::u64, &v, 8); }
  void i64(const std::string& k, std::int64_t v) { scalar(k, npugraph::llm::GgufType::i64, &v, 8); }
  void f32(const std::string& k, float v) { scalar(k, npugraph::llm::GgufType::f32, &v, 4); }
  void f64(const std::string& k, double v) { scalar(k, npugraph::llm::GgufType::f64, &v, 8); }
  void boolean(const std::string& k, bool v) {
    const std::uint8_t b = v ? 1 : 0;
    scalar(k, npugraph::llm::GgufType::boolean, &b, 1);
  }
  void str(const std::string& k, const std::string& v) {
    Entry e{k, {}};
    put32(e.value, 8);
    put_str(e.value, v);
    kvs_.push_back(std::move(e));
  }
  void str_array(const std::string& k, const std::vector<std::string>& v) {
    Entry e{k, {}};
    put32(e.value, 9);
    put32(e.value, 8);
    put64(e.value, v.size());
    for (const auto& s : v) put_str(e.value, s);
    kvs_.push_back(std::move(e));
  }
  template <class T>
  void array(const std::string& k, npugraph::llm::GgufType element, const std::vector<T>& v) {
    Entry e{k, {}};
    put32(e.value, 9);
    put32(e.value, static_cast<std::uint32_t>(element));
    put64(e.value, v.size());
    for (const T& x : v) put_raw(e.value, &x, sizeof(T));
    kvs_.push_back(std::move(e));
  }

  // A tensor; its data offset is the next aligned one unless `offset` says otherwise.
  void tensor(const std::string& name, std::vector<std::int64_t> dims, std::uint32_t type,
              Bytes data, std::int64_t offset = -1) {
    tensors_.push_back({name, std::move(dims), type, std::move(data), offset});
  }

  Bytes build(GgufLayout* layout = nullptr) const {
    GgufLayout lay;
    Bytes out;
    put_raw(out, "GGUF", 4);
    put32(out, version);
    put64(out, tensors_.size());
    put64(out, kvs_.size());
    for (const Entry& e : kvs_) {
      lay.key_at[e.key] = out.size();
      put_str(out, e.key);
      lay.value_at[e.key] = out.size();
      out.insert(out.end(), e.value.begin(), e.value.end());
    }
    std::vector<std::uint64_t> offsets;
    std::uint64_t next = 0;
    for (const Tensor& t : tensors_) {
      const std::uint64_t off = t.offset >= 0 ? static_cast<std::uint64_t>(t.offset) : next;
      offsets.push_back(off);
      next = pad(std::max<std::uint64_t>(next, off + t.data.size()));
      lay.tensor_at[t.name] = out.size();
      put_str(out, t.name);
      lay.dims_at[t.name] = out.size();
      put32(out, static_cast<std::uint32_t>(t.dims.size()));
      for (auto d : t.dims) put64(out, static_cast<std::uint64_t>(d));
      lay.type_at[t.name] = out.size();
      put32(out, t.type);
      lay.offset_at[t.name] = out.size();
      put64(out, off);
    }
    if (!tensors_.empty()) {
      out.resize(pad(out.size()));
      lay.data_at = out.size();
      for (std::size_t i = 0; i < tensors_.size(); ++i) {
        const Tensor& t = tensors_[i];
        const std::size_t at = lay.data_at + offsets[i];
        if (out.size() < at + t.data.size()) out.resize(at + t.data.size());
        if (!t.data.empty()) std::memcpy(out.data() + at, t.data.data(), t.data.size());
      }
      out.resize(lay.data_at + pad(out.size() - lay.data_at));
    }
    if (layout) *layout = lay;
    return out;
  }

  static void put32(Bytes& b, std::uint32_t v) { put_raw(b, &v, 4); }
  static void put64(Bytes& b, std::uint64_t v) { put_raw(b, &v, 8); }
  static void put_str(Bytes& b, const std::string& s) {
    put64(b, s.size());
    put_raw(b, s.data(), s.size());
  }
  static void put_raw(Bytes& b, const void* p, std::size_t n) {
    const auto* c = static_cast<const std::byte*>(p);
    b.insert(b.end(), c, c + n);
  }

 private:
  struct Entry {
    std::string key;
    Bytes value;  // type (+ element type + count) + payload
  };
  struct Tensor {
    std::string name;
    std::vector<std::int64_t> dims;
    std::uint32_t type;
    Bytes data;
    std::int64_t offset;
  };
  void scalar(const std::string& k, npugraph::llm::GgufType t, const void* v, std::size_t n) {
    Entry e{k, {}};
    put32(e.value, static_cast<std::uint32_t>(t));
    put_raw(e.value, v, n);
    kvs_.push_back(std::move(e));
  }
  std::uint64_t pad(std::uint64_t x) const { return (x + alignment - 1) / alignment * alignment; }
  std::vector<Entry> kvs_;
  std::vector<Tensor> tensors_;
};

template <class T>
void patch(Bytes& b, std::size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof(T));
}

inline void write_file(const std::filesystem::path& p, const Bytes& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

template <class T>
Bytes as_bytes(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A scratch folder per test binary run, removed at exit.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    auto base = std::filesystem::temp_directory_path() /
                ("npugraph-llm-tests-" + std::to_string(::getpid()));
    std::filesystem::create_directories(base);
    return base;
  }();
  static const struct Cleanup {
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup;
  return dir;
}

}  // namespace ngtest
