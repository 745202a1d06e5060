// GGUF model files (llama.cpp's format): a read-only, bounds-checked view of one file.
//
// A model file is untrusted input. `GgufFile::open` maps the file read-only and checks every
// offset, size and count against the file before using it: the header (magic "GGUF", version 2 or
// 3), the metadata key/value pairs, the tensor infos (name, dims, type, offset) and the data section
// (aligned to general.alignment, default 32; each tensor aligned, inside the file, none overlapping).
// Any violation is an ArgumentError whose message names the file and, where there is one, the key or
// the tensor. Nothing is read from the data section until a tensor's bytes are asked for.
//
// A GgufFile is move-only and immutable once opened: its const members may be called from any number
// of threads at once, and tensor_bytes() spans stay valid while it lives.
//
// Dimensions are in ggml order: dims[0] is the contiguous (innermost) one, so a [rows, cols] weight
// has dims {cols, rows}; `row_major_shape()` gives the usual outer-to-inner order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "npugraph/ops/quant.hpp"

namespace npugraph::llm {

// ---- tensor element types (ggml's enum ggml_type; the numbers are the file format) ---------------
// One enum and one table for the reader and the ops (npugraph/ops/quant_table.hpp): a row says
// what the format is (`block` elements in `block_bytes` bytes) and whether npugraph dequantizes it.

using ops::GgmlType;
using GgmlTypeTraits = ops::QuantTraits;

// The row of a type number read from a file; nullptr for numbers that are not (or no longer) a type.
constexpr const GgmlTypeTraits* ggml_type_traits(std::uint32_t type) noexcept { return ops::find_ggml_type(type); }
constexpr const GgmlTypeTraits& ggml_type_traits(GgmlType type) noexcept { return ops::ggml_traits(type); }
constexpr std::string_view ggml_type_name(GgmlType type) noexcept { return ggml_type_traits(type).name; }

// ---- quantisation blocks, byte for byte as ggml-common.h lays them out ---------------------------
// One definition each, in the ops layer (npugraph/ops/quant_blocks.hpp).
using ops::BlockQ4_0;
using ops::BlockQ4_1;
using ops::BlockQ5_0;
using ops::BlockQ5_1;
using ops::BlockQ8_0;

// Dequantizes `dst.size()` elements (a multiple of the type's block size) from `src`, which must hold
// exactly their bytes. Types: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K; ArgumentError for other types and for sizes that do not match.
// Values are bitwise those of ggml's dequantize_row_* (float products and sums, no fused multiply-add).
void dequantize_row(GgmlType type, std::span<const std::byte> src, std::span<float> dst);

// ---- metadata --------------------------------------------------------------------------------------

enum class GgufType : std::uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8,
  array = 9, u64 = 10, i64 = 11, f64 = 12,
};
std::string_view gguf_type_name(GgufType type) noexcept;  // "u32", "string", "array"

// One metadata value: a scalar, a string, or an array of scalars or strings (arrays of arrays are
// refused at load, as llama.cpp does). Numbers are kept as read (little-endian bytes).
class GgufValue {
 public:
  GgufValue() = default;
  GgufValue(GgufType type, GgufType element_type, std::size_t count, std::vector<std::byte> raw,
            std::vector<std::string> strings)
      : type_(type), element_type_(element_type), count_(count), raw_(std::move(raw)),
        strings_(std::move(strings)) {}

  GgufType type() const noexcept { return type_; }
  // For arrays, the element type; for scalars, the type itself.
  GgufType element_type() const noexcept { return element_type_; }
  bool is_array() const noexcept { return type_ == GgufType::array; }
  std::size_t size() const noexcept { return count_; }  // array length; 1 for a scalar
  // "u32", "string", "array[string]"
  std::string type_str() const;

  // Raw element bytes (numbers) and strings; the typed accessors are GgufFile::get / find.
  std::span<const std::byte> raw() const noexcept { return raw_; }
  const std::vector<std::string>& strings() const noexcept { return strings_; }

 private:
  GgufType type_ = GgufType::u8;
  GgufType element_type_ = GgufType::u8;
  std::size_t count_ = 0;
  std::vector<std::byte> raw_;
  std::vector<std::string> strings_;
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

namespace detail {
template <class T> struct is_std_vector : std::false_type {};
template <class T> struct is_std_vector<std::vector<T>> : std::true_type {};
template <class T>
concept GgufScalar = std::is_same_v<T, bool> || std::is_same_v<T, std::string> ||
                     std::is_same_v<T, float> || std::is_same_v<T, double> ||
                     std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::uint8_t> ||
                     std::is_same_v<T, std::int16_t> || std::is_same_v<T, std::uint16_t> ||
                     std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::uint32_t> ||
                     std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint64_t>;
}  // namespace detail

// What get<T> accepts: the scalars above, or std::vector of them (arrays).
//   integers: any integer-typed value (or array) whose values fit T;
//   float / double: f32 or f64 values;  bool: boolean;  std::string: string.
template <class T>
concept GgufReadable = detail::GgufScalar<T> ||
                       (detail::is_std_vector<T>::value && detail::GgufScalar<typename T::value_type>);

// ---- tensors ----------------------------------------------------------------------------------------

struct GgufTensorInfo {
  std::string name;
  std::vector<std::int64_t> dims;  // ggml order: dims[0] innermost; 0 to 4 entries as the file has them
  GgmlType type = GgmlType::F32;
  std::uint64_t offset = 0;        // from the start of the data section; a multiple of the alignment
  std::uint64_t n_elements = 0;
  std::uint64_t n_bytes = 0;

  std::vector<std::int64_t> row_major_shape() const { return {dims.rbegin(), dims.rend()}; }
  std::int64_t row_length() const { return dims.empty() ? 1 : dims[0]; }  // elements per row
  std::uint64_t n_rows() const {
    return row_length() == 0 ? 0 : n_elements / static_cast<std::uint64_t>(row_length());
  }
  std::uint64_t row_bytes() const { return n_rows() == 0 ? 0 : n_bytes / n_rows(); }
};

// ---- the file ---------------------------------------------------------------------------------------

class GgufFile {
 public:
  // Maps `path` read-only and parses it. ArgumentError for anything malformed (see the top).
  static GgufFile open(const std::filesystem::path& path);
  // Parses a copy held in memory; `name` stands for the file in messages (tests, fuzzers).
  static GgufFile from_bytes(std::vector<std::byte> bytes, std::string name);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;
  ~GgufFile();

  const std::string& name() const noexcept;  // the path, as given
  std::uint32_t version() const noexcept;
  std::size_t alignment() const noexcept;
  std::uint64_t data_offset() const noexcept;  // where the data section starts in the file
  std::uint64_t file_size() const noexcept;

  // Metadata in file order, and by key.
  const std::vector<GgufKeyValue>& metadata() const noexcept;
  bool has(std::string_view key) const noexcept;
  const GgufValue* find_value(std::string_view key) const noexcept;
  const GgufValue& value(std::string_view key) const;  // ArgumentError naming the key when missing

  // Typed values: `get` throws when the key is missing or has another type (the message names the
  // file, the key, its type and what was asked for); `find` gives nullopt for a missing key and
  // throws for a wrong type; `get_or` gives `fallback` for a missing key.
  template <GgufReadable T> T get(std::string_view key) const;
  template <GgufReadable T> std::optional<T> find(std::string_view key) const;
  template <GgufReadable T> T get_or(std::string_view key, T fallback) const {
    auto v = find<T>(key);
    return v ? std::move(*v) : std::move(fallback);
  }

  // Tensors in file order, and by name.
  std::span<const GgufTensorInfo> tensors() const noexcept;
  const GgufTensorInfo* find_tensor(std::string_view name) const noexcept;
  const GgufTensorInfo& tensor(std::string_view name) const;  // ArgumentError naming it when missing

  // The tensor's bytes inside the mapping (valid while this GgufFile lives).
  std::span<const std::byte> tensor_bytes(const GgufTensorInfo& info) const;
  std::span<const std::byte> tensor_bytes(std::string_view name) const { return tensor_bytes(tensor(name)); }

  // The whole tensor as float32 (n_elements values, in storage order). ArgumentError naming the
  // tensor and its type for types npugraph does not dequantize; `out` must hold n_elements.
  std::vector<float> dequantize(const GgufTensorInfo& info) const;
  std::vector<float> dequantize(std::string_view name) const { return dequantize(tensor(name)); }
  void dequantize(const GgufTensorInfo& info, std::span<float> out) const;

  struct State;  // opaque

 private:
  explicit GgufFile(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace npugraph::llm
