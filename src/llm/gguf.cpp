// GGUF parsing: the file is mapped read-only and every read goes through a bounds-checked cursor.
//
// Note [GGUF checks]
// The checks follow llama.cpp's gguf_init_from_file_impl, written afresh, with two differences: counts
// are bounded by what the rest of the file could hold (a tensor info takes at least 24 bytes, a
// key/value 13, an array element its size or 8 for a string), so no count can make us allocate more
// than the file's size; and tensor data need not be packed in file order, only aligned, inside the
// data section and non-overlapping. Every message starts with "GGUF file '<name>': ".
#include "npugraph/llm/gguf.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <unordered_map>
#include <utility>

#include "npugraph/error.hpp"

namespace npugraph::llm {
namespace {

constexpr std::uint64_t kMaxDims = 4;           // GGML_MAX_DIMS
constexpr std::size_t kMaxTensorName = 63;       // GGML_MAX_NAME - 1
constexpr std::size_t kDefaultAlignment = 32;    // GGUF_DEFAULT_ALIGNMENT
constexpr std::uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset
constexpr std::uint64_t kMinKeyValueBytes = 8 + 4 + 1;        // key length, type, a 1-byte value

std::size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::u8: case GgufType::i8: case GgufType::boolean: return 1;
    case GgufType::u16: case GgufType::i16: return 2;
    case GgufType::u32: case GgufType::i32: case GgufType::f32: return 4;
    case GgufType::u64: case GgufType::i64: case GgufType::f64: return 8;
    case GgufType::string: case GgufType::array: return 0;
  }
  return 0;
}

bool valid_type(std::uint32_t t) { return t <= static_cast<std::uint32_t>(GgufType::f64); }

// A read-only mapping of a whole file, or an owned copy of one.
class Bytes {
 public:
  Bytes() = default;
  static Bytes map(const std::string& name) {
    const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
    NG_CHECK_ARG(fd >= 0, "GGUF file '", name, "': cannot open: ", std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      NG_THROW(ArgumentError, "GGUF file '", name, "': cannot stat: ", std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      NG_THROW(ArgumentError, "GGUF file '", name, "': not a regular file");
    }
    Bytes b;
    b.size_ = static_cast<std::size_t>(st.st_size);
    if (b.size_ > 0) {
      void* p = ::mmap(nullptr, b.size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        NG_THROW(ArgumentError, "GGUF file '", name, "': cannot map ", b.size_, " bytes: ",
                 std::strerror(err));
      }
      b.mapped_ = p;
      b.data_ = static_cast<const std::byte*>(p);
    }
    ::close(fd);  // the mapping keeps the file
    return b;
  }
  static Bytes own(std::vector<std::byte> bytes) {
    Bytes b;
    b.owned_ = std::move(bytes);
    b.data_ = b.owned_.data();
    b.size_ = b.owned_.size();
    return b;
  }
  Bytes(Bytes&& o) noexcept { *this = std::move(o); }
  Bytes& operator=(Bytes&& o) noexcept {
    if (this != &o) {
      release();
      owned_ = std::move(o.owned_);
      mapped_ = std::exchange(o.mapped_, nullptr);
      size_ = std::exchange(o.size_, 0);
      data_ = mapped_ ? static_cast<const std::byte*>(mapped_) : owned_.data();
      o.data_ = nullptr;
    }
    return *this;
  }
  ~Bytes() { release(); }
  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  void release() noexcept {
    if (mapped_) ::munmap(mapped_, size_);
    mapped_ = nullptr;
  }
  std::vector<std::byte> owned_;
  void* mapped_ = nullptr;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace

struct GgufFile::State {
  std::string name;
  Bytes bytes;
  std::uint32_t version = 0;
  std::size_t alignment = kDefaultAlignment;
  std::uint64_t data_offset = 0;
  std::vector<GgufKeyValue> metadata;
  std::unordered_map<std::string, std::size_t> key_index;
  std::vector<GgufTensorInfo> tensors;
  std::unordered_map<std::string, std::size_t> tensor_index;
};

namespace {

// Every read of the header checks that the bytes are there.
class Cursor {
 public:
  Cursor(const std::string& name, const std::byte* data, std::size_t size)
      : name_(name), data_(data), size_(size) {}

  std::uint64_t pos() const { return pos_; }
  std::uint64_t remaining() const { return size_ - pos_; }

  // `what` says what is being read, for the message: "the tensor count", "key 'general.name'".
  template <class... What>
  const std::byte* take(std::uint64_t n, const What&... what) {
    if (n > remaining())
      NG_THROW(ArgumentError, "GGUF file '", name_, "': truncated: ", what..., " needs ", n,
               " bytes at offset ", pos_, " but the file has ", size_, " bytes");
    const std::byte* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  template <class T, class... What>
  T read(const What&... what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what...), sizeof(T));
    return v;
  }
  template <class... What>
  std::string read_string(const What&... what) {
    const auto n = read<std::uint64_t>(what..., " (length)");
    if (n > remaining())
      NG_THROW(ArgumentError, "GGUF file '", name_, "': truncated: ", what..., " is ", n,
               " bytes long at offset ", pos_, " but only ", remaining(), " bytes remain");
    const std::byte* p = take(n, what...);
    return std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
  }

 private:
  const std::string& name_;
  const std::byte* data_;
  std::uint64_t size_;
  std::uint64_t pos_ = 0;
};

std::string printable(std::string_view s) {
  std::string out;
  for (char c : s) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out;
}

GgufValue read_value(Cursor& cur, const std::string& file, const std::string& key) {
  const auto raw_type = cur.read<std::uint32_t>("the type of key '", key, "'");
  NG_CHECK_ARG(valid_type(raw_type), "GGUF file '", file, "': key '", key, "' has invalid type ",
               raw_type, " (valid: 0 to 12)");
  auto type = static_cast<GgufType>(raw_type);
  std::uint64_t count = 1;
  GgufType element = type;
  if (type == GgufType::array) {
    const auto raw_elem = cur.read<std::uint32_t>("the element type of key '", key, "'");
    NG_CHECK_ARG(valid_type(raw_elem), "GGUF file '", file, "': key '", key,
                 "' is an array of invalid type ", raw_elem, " (valid: 0 to 12)");
    element = static_cast<GgufType>(raw_elem);
    NG_CHECK_ARG(element != GgufType::array, "GGUF file '", file, "': key '", key,
                 "' is an array of arrays, which npugraph (like llama.cpp) does not read");
    count = cur.read<std::uint64_t>("the length of array '", key, "'");
    const std::uint64_t min_bytes = element == GgufType::string ? 8 : scalar_size(element);
    NG_CHECK_ARG(count <= cur.remaining() / min_bytes, "GGUF file '", file, "': array '", key,
                 "' claims ", count, " elements of type ", gguf_type_name(element), " but only ",
                 cur.remaining(), " bytes remain in the file");
  }
  std::vector<std::byte> raw;
  std::vector<std::string> strings;
  if (element == GgufType::string) {
    strings.reserve(static_cast<std::size_t>(count));
    for (std::uint64_t i = 0; i < count; ++i) {
      if (type == GgufType::array)
        strings.push_back(cur.read_string("element ", i, " of array '", key, "'"));
      else
        strings.push_back(cur.read_string("the value of key '", key, "'"));
    }
  } else {
    const std::uint64_t n = count * scalar_size(element);
    const std::byte* p = cur.take(n, "the value of key '", key, "'");
    raw.assign(p, p + n);
  }
  return GgufValue(type, element, static_cast<std::size_t>(count), std::move(raw),
                   std::move(strings));
}

std::uint64_t pad_to(std::uint64_t x, std::uint64_t align) {
  return x + (align - x % align) % align;
}

void parse(GgufFile::State& s) {
  const std::string& file = s.name;
  Cursor cur(file, s.bytes.data(), s.bytes.size());

  const std::byte* magic = cur.take(4, "the magic");
  if (std::memcmp(magic, "GGUF", 4) != 0)
    NG_THROW(ArgumentError, "GGUF file '", file, "': bad magic '",
             printable(std::string_view(reinterpret_cast<const char*>(magic), 4)),
             "', expected 'GGUF' (is this a GGUF model file?)");
  s.version = cur.read<std::uint32_t>("the version");
  if ((s.version & 0xffffu) == 0 && s.version != 0)
    NG_THROW(ArgumentError, "GGUF file '", file, "': version ", s.version,
             " looks byte-swapped: big-endian GGUF files are not supported");
  NG_CHECK_ARG(s.version == 2 || s.version == 3, "GGUF file '", file, "': unsupported version ",
               s.version, " (npugraph reads versions 2 and 3)");

  const auto n_tensors = cur.read<std::uint64_t>("the tensor count");
  const auto n_kv = cur.read<std::uint64_t>("the metadata count");
  NG_CHECK_ARG(n_tensors <= cur.remaining() / kMinTensorInfoBytes, "GGUF file '", file,
               "': claims ", n_tensors, " tensors but only ", cur.remaining(),
               " bytes remain for the header");
  NG_CHECK_ARG(n_kv <= cur.remaining() / kMinKeyValueBytes, "GGUF file '", file, "': claims ",
               n_kv, " metadata entries but only ", cur.remaining(), " bytes remain for the header");

  s.metadata.reserve(static_cast<std::size_t>(n_kv));
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    std::string key = cur.read_string("the key of metadata entry ", i);
    NG_CHECK_ARG(!key.empty(), "GGUF file '", file, "': metadata entry ", i, " has an empty key");
    // The format caps keys at 65535 bytes; messages show them printable and short.
    const std::string shown = printable(key.substr(0, 120)) + (key.size() > 120 ? "..." : "");
    NG_CHECK_ARG(key.size() <= 65535, "GGUF file '", file, "': metadata entry ", i, " key '", shown,
                 "' is ", key.size(), " bytes long (at most 65535)");
    NG_CHECK_ARG(!s.key_index.contains(key), "GGUF file '", file, "': duplicate key '", shown, "'");
    GgufValue value = read_value(cur, file, shown);
    s.key_index.emplace(key, s.metadata.size());
    s.metadata.push_back({std::move(key), std::move(value)});
  }

  if (auto it = s.key_index.find("general.alignment"); it != s.key_index.end()) {
    const GgufValue& v = s.metadata[it->second].value;
    NG_CHECK_ARG(v.type() == GgufType::u32, "GGUF file '", file,
                 "': key 'general.alignment' must be u32 but is ", v.type_str());
    std::uint32_t a;
    std::memcpy(&a, v.raw().data(), 4);
    NG_CHECK_ARG(a != 0 && (a & (a - 1)) == 0, "GGUF file '", file, "': general.alignment is ", a,
                 ", not a power of two");
    s.alignment = a;
  }

  s.tensors.reserve(static_cast<std::size_t>(n_tensors));
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = cur.read_string("the name of tensor ", i);
    const std::string& tn = t.name;
    NG_CHECK_ARG(tn.size() <= kMaxTensorName, "GGUF file '", file, "': tensor ", i, " name '",
                 printable(tn.substr(0, 80)), "...' is ", tn.size(), " bytes long (at most ",
                 kMaxTensorName, ")");
    NG_CHECK_ARG(!s.tensor_index.contains(tn), "GGUF file '", file, "': duplicate tensor '", tn, "'");
    const auto n_dims = cur.read<std::uint32_t>("the dimension count of tensor '", tn, "'");
    NG_CHECK_ARG(n_dims <= kMaxDims, "GGUF file '", file, "': tensor '", tn, "' has ", n_dims,
                 " dimensions (at most ", kMaxDims, ")");
    bool overflow = false, empty = false;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const auto ne = cur.read<std::int64_t>("dimension ", d, " of tensor '", tn, "'");
      NG_CHECK_ARG(ne >= 0, "GGUF file '", file, "': tensor '", tn, "' dimension ", d, " is ", ne,
                   " (negative)");
      t.dims.push_back(ne);
      empty = empty || ne == 0;
    }
    // The element count, unless it overflows int64 (a zero dimension makes any product fit).
    std::uint64_t n = 1;
    if (empty) {
      n = 0;
    } else {
      constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
      for (const std::int64_t ne : t.dims) {
        const auto une = static_cast<std::uint64_t>(ne);
        if (n > kMax / une) overflow = true;
        n *= une;
      }
    }
    NG_CHECK_ARG(!overflow, "GGUF file '", file, "': tensor '", tn,
                 "' has more elements than int64 can count");
    t.n_elements = n;

    const auto raw_type = cur.read<std::uint32_t>("the type of tensor '", tn, "'");
    const GgmlTypeTraits* traits = ggml_type_traits(raw_type);
    NG_CHECK_ARG(traits != nullptr, "GGUF file '", file, "': tensor '", tn,
                 "' has unknown ggml type ", raw_type);
    t.type = static_cast<GgmlType>(raw_type);
    NG_CHECK_ARG(t.row_length() % traits->block == 0, "GGUF file '", file, "': tensor '", tn,
                 "' of type ", traits->name, " has rows of ", t.row_length(),
                 " elements, not a multiple of the block size ", traits->block);
    const std::uint64_t blocks = n / static_cast<std::uint64_t>(traits->block);
    NG_CHECK_ARG(blocks <= std::numeric_limits<std::uint64_t>::max() / traits->block_bytes,
                 "GGUF file '", file, "': tensor '", tn, "' is larger than 2^64 bytes");
    t.n_bytes = blocks * traits->block_bytes;
    t.offset = cur.read<std::uint64_t>("the data offset of tensor '", tn, "'");
    NG_CHECK_ARG(t.offset % s.alignment == 0, "GGUF file '", file, "': tensor '", tn,
                 "' data offset ", t.offset, " is not a multiple of the alignment ", s.alignment);
    s.tensor_index.emplace(t.name, s.tensors.size());
    s.tensors.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment. With no tensors it may be empty
  // (and may start past the end, as a writer need not pad a file without data).
  s.data_offset = pad_to(cur.pos(), s.alignment);
  const std::uint64_t file_size = s.bytes.size();
  if (!s.tensors.empty())
    NG_CHECK_ARG(s.data_offset <= file_size, "GGUF file '", file, "': truncated: the data section "
                 "would start at offset ", s.data_offset, " but the file has ", file_size, " bytes");
  const std::uint64_t data_size = s.data_offset <= file_size ? file_size - s.data_offset : 0;

  std::vector<const GgufTensorInfo*> by_offset;
  by_offset.reserve(s.tensors.size());
  for (const GgufTensorInfo& t : s.tensors) {
    NG_CHECK_ARG(t.offset <= data_size && t.n_bytes <= data_size - t.offset, "GGUF file '", file,
                 "': tensor '", t.name, "' data [", t.offset, ", ", t.offset, " + ", t.n_bytes,
                 ") runs past the end of the data section (", data_size, " bytes at file offset ",
                 s.data_offset, "): the file is truncated or the offset is wrong");
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  const GgufTensorInfo* last = nullptr;  // the non-empty tensor ending last so far
  for (const GgufTensorInfo* t : by_offset) {
    if (t->n_bytes == 0) continue;
    if (last != nullptr)
      NG_CHECK_ARG(last->offset + last->n_bytes <= t->offset, "GGUF file '", file, "': tensors '",
                   last->name, "' [", last->offset, ", ", last->offset + last->n_bytes, ") and '",
                   t->name, "' [", t->offset, ", ", t->offset + t->n_bytes, ") overlap");
    last = t;
  }
}

// ---- typed access ------------------------------------------------------------------------------------

template <class T>
constexpr std::string_view wanted_name() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_same_v<T, std::string>) return "string";
  else if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, std::int8_t>) return "int8";
  else if constexpr (std::is_same_v<T, std::uint8_t>) return "uint8";
  else if constexpr (std::is_same_v<T, std::int16_t>) return "int16";
  else if constexpr (std::is_same_v<T, std::uint16_t>) return "uint16";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  else if constexpr (std::is_same_v<T, std::uint32_t>) return "uint32";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  else return "uint64";
}

bool is_integer(GgufType t) {
  switch (t) {
    case GgufType::u8: case GgufType::i8: case GgufType::u16: case GgufType::i16:
    case GgufType::u32: case GgufType::i32: case GgufType::u64: case GgufType::i64: return true;
    default: return false;
  }
}
bool is_signed(GgufType t) {
  return t == GgufType::i8 || t == GgufType::i16 || t == GgufType::i32 || t == GgufType::i64;
}

template <class T>
bool type_fits(GgufType t) {
  if constexpr (std::is_same_v<T, bool>) return t == GgufType::boolean;
  else if constexpr (std::is_same_v<T, std::string>) return t == GgufType::string;
  else if constexpr (std::is_floating_point_v<T>) return t == GgufType::f32 || t == GgufType::f64;
  else return is_integer(t);
}

// Element i of a numeric value as T; integers range-checked (the caller names the key).
template <class T>
std::optional<T> element(const GgufValue& v, std::size_t i) {
  const std::byte* p = v.raw().data() + i * scalar_size(v.element_type());
  auto load = [p]<class U>(U) { U u; std::memcpy(&u, p, sizeof(U)); return u; };
  const GgufType t = v.element_type();
  if constexpr (std::is_same_v<T, bool>) {
    return load(std::uint8_t{}) != 0;
  } else if constexpr (std::is_floating_point_v<T>) {
    if (t == GgufType::f32) return static_cast<T>(load(float{}));
    return static_cast<T>(load(double{}));
  } else {
    if (is_signed(t)) {
      std::int64_t x = 0;
      switch (t) {
        case GgufType::i8: x = load(std::int8_t{}); break;
        case GgufType::i16: x = load(std::int16_t{}); break;
        case GgufType::i32: x = load(std::int32_t{}); break;
        default: x = load(std::int64_t{}); break;
      }
      if (!std::in_range<T>(x)) return std::nullopt;
      return static_cast<T>(x);
    }
    std::uint64_t x = 0;
    switch (t) {
      case GgufType::u8: x = load(std::uint8_t{}); break;
      case GgufType::u16: x = load(std::uint16_t{}); break;
      case GgufType::u32: x = load(std::uint32_t{}); break;
      default: x = load(std::uint64_t{}); break;
    }
    if (!std::in_range<T>(x)) return std::nullopt;
    return static_cast<T>(x);
  }
}

template <class T>
T convert(const GgufValue& v, const std::string& file, std::string_view key) {
  if constexpr (detail::is_std_vector<T>::value) {
    using E = typename T::value_type;
    NG_CHECK_ARG(v.is_array() && type_fits<E>(v.element_type()), "GGUF file '", file, "': key '",
                 key, "' is ", v.type_str(), ", expected an array of ", wanted_name<E>());
    if constexpr (std::is_same_v<E, std::string>) {
      return v.strings();
    } else {
      T out;
      out.reserve(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) {
        auto e = element<E>(v, i);
        NG_CHECK_ARG(e.has_value(), "GGUF file '", file, "': key '", key, "' element ", i,
                     " does not fit ", wanted_name<E>());
        out.push_back(*e);
      }
      return out;
    }
  } else {
    NG_CHECK_ARG(!v.is_array() && type_fits<T>(v.type()), "GGUF file '", file, "': key '", key,
                 "' is ", v.type_str(), ", expected ", wanted_name<T>());
    if constexpr (std::is_same_v<T, std::string>) {
      return v.strings().front();
    } else {
      auto e = element<T>(v, 0);
      NG_CHECK_ARG(e.has_value(), "GGUF file '", file, "': key '", key, "' value does not fit ",
                   wanted_name<T>());
      return *e;
    }
  }
}

}  // namespace

std::string_view gguf_type_name(GgufType type) noexcept {
  switch (type) {
    case GgufType::u8: return "u8";
    case GgufType::i8: return "i8";
    case GgufType::u16: return "u16";
    case GgufType::i16: return "i16";
    case GgufType::u32: return "u32";
    case GgufType::i32: return "i32";
    case GgufType::f32: return "f32";
    case GgufType::boolean: return "bool";
    case GgufType::string: return "string";
    case GgufType::array: return "array";
    case GgufType::u64: return "u64";
    case GgufType::i64: return "i64";
    case GgufType::f64: return "f64";
  }
  return "?";
}

std::string GgufValue::type_str() const {
  if (!is_array()) return std::string(gguf_type_name(type_));
  return "array[" + std::string(gguf_type_name(element_type_)) + "]";
}

GgufFile::GgufFile(std::unique_ptr<State> state) : state_(std::move(state)) {}
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile GgufFile::open(const std::filesystem::path& path) {
  auto s = std::make_unique<State>();
  s->name = path.string();
  s->bytes = Bytes::map(s->name);
  parse(*s);
  return GgufFile(std::move(s));
}

GgufFile GgufFile::from_bytes(std::vector<std::byte> bytes, std::string name) {
  auto s = std::make_unique<State>();
  s->name = std::move(name);
  s->bytes = Bytes::own(std::move(bytes));
  parse(*s);
  return GgufFile(std::move(s));
}

const std::string& GgufFile::name() const noexcept { return state_->name; }
std::uint32_t GgufFile::version() const noexcept { return state_->version; }
std::size_t GgufFile::alignment() const noexcept { return state_->alignment; }
std::uint64_t GgufFile::data_offset() const noexcept { return state_->data_offset; }
std::uint64_t GgufFile::file_size() const noexcept { return state_->bytes.size(); }
const std::vector<GgufKeyValue>& GgufFile::metadata() const noexcept { return state_->metadata; }

const GgufValue* GgufFile::find_value(std::string_view key) const noexcept {
  auto it = state_->key_index.find(std::string(key));
  return it == state_->key_index.end() ? nullptr : &state_->metadata[it->second].value;
}
bool GgufFile::has(std::string_view key) const noexcept { return find_value(key) != nullptr; }

const GgufValue& GgufFile::value(std::string_view key) const {
  const GgufValue* v = find_value(key);
  NG_CHECK_ARG(v != nullptr, "GGUF file '", state_->name, "': missing key '", key, "'");
  return *v;
}

template <GgufReadable T>
T GgufFile::get(std::string_view key) const {
  return convert<T>(value(key), state_->name, key);
}

template <GgufReadable T>
std::optional<T> GgufFile::find(std::string_view key) const {
  const GgufValue* v = find_value(key);
  if (v == nullptr) return std::nullopt;
  return convert<T>(*v, state_->name, key);
}

#define NPUGRAPH_GGUF_INSTANTIATE(T)                                                   \
  template T GgufFile::get<T>(std::string_view) const;                                 \
  template std::optional<T> GgufFile::find<T>(std::string_view) const;                 \
  template std::vector<T> GgufFile::get<std::vector<T>>(std::string_view) const;       \
  template std::optional<std::vector<T>> GgufFile::find<std::vector<T>>(std::string_view) const;
NPUGRAPH_GGUF_INSTANTIATE(bool)
NPUGRAPH_GGUF_INSTANTIATE(std::string)
NPUGRAPH_GGUF_INSTANTIATE(float)
NPUGRAPH_GGUF_INSTANTIATE(double)
NPUGRAPH_GGUF_INSTANTIATE(std::int8_t)
NPUGRAPH_GGUF_INSTANTIATE(std::uint8_t)
NPUGRAPH_GGUF_INSTANTIATE(std::int16_t)
NPUGRAPH_GGUF_INSTANTIATE(std::uint16_t)
NPUGRAPH_GGUF_INSTANTIATE(std::int32_t)
NPUGRAPH_GGUF_INSTANTIATE(std::uint32_t)
NPUGRAPH_GGUF_INSTANTIATE(std::int64_t)
NPUGRAPH_GGUF_INSTANTIATE(std::uint64_t)
#undef NPUGRAPH_GGUF_INSTANTIATE

std::span<const GgufTensorInfo> GgufFile::tensors() const noexcept { return state_->tensors; }

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const noexcept {
  auto it = state_->tensor_index.find(std::string(name));
  return it == state_->tensor_index.end() ? nullptr : &state_->tensors[it->second];
}

const GgufTensorInfo& GgufFile::tensor(std::string_view name) const {
  const GgufTensorInfo* t = find_tensor(name);
  NG_CHECK_ARG(t != nullptr, "GGUF file '", state_->name, "': missing tensor '", name, "'");
  return *t;
}

std::span<const std::byte> GgufFile::tensor_bytes(const GgufTensorInfo& info) const {
  // Checked again: `info` may come from another file.
  const std::uint64_t size = state_->bytes.size();
  const std::uint64_t data = state_->data_offset;
  NG_CHECK_ARG(data <= size && info.offset <= size - data && info.n_bytes <= size - data - info.offset,
               "GGUF file '", state_->name, "': tensor '", info.name,
               "' is not inside this file's data section");
  return {state_->bytes.data() + data + info.offset, static_cast<std::size_t>(info.n_bytes)};
}

void GgufFile::dequantize(const GgufTensorInfo& info, std::span<float> out) const {
  const GgmlTypeTraits& traits = ggml_type_traits(info.type);
  NG_CHECK_ARG(traits.dequantizable(), "GGUF file '", state_->name, "': tensor '", info.name,
               "' has type ", traits.name, ", which npugraph does not dequantize (it reads F32, "
               "F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q2_K to Q6_K)");
  NG_CHECK_ARG(out.size() == info.n_elements, "GGUF file '", state_->name, "': dequantizing tensor '",
               info.name, "' needs ", info.n_elements, " floats, got ", out.size());
  dequantize_row(info.type, tensor_bytes(info), out);
}

std::vector<float> GgufFile::dequantize(const GgufTensorInfo& info) const {
  std::vector<float> out(static_cast<std::size_t>(info.n_elements));
  dequantize(info, out);
  return out;
}

}  // namespace npugraph::llm
