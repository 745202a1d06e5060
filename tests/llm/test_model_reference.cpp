// npugraph's reader and tokenizer against independent implementations on the real model: the files
// tests/python/llm/make_reference.py writes from llama.cpp's `gguf` package (tensors, metadata), Hugging
// Face `tokenizers` (ids, decoding) and `jinja2` (the chat template). Skipped unless
// $NPUGRAPH_LLM_REFERENCE names such a folder; tests/python/llm/test_reference.py makes one and runs
// these.
#include <gtest/gtest.h>

#include <bit>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "llm/sha256.hpp"
#include "npugraph/llm/gguf.hpp"
#include "npugraph/llm/tokenizer.hpp"

using namespace npugraph::llm;

namespace {

std::filesystem::path reference_dir() {
  const char* d = std::getenv("NPUGRAPH_LLM_REFERENCE");
  return d && *d ? std::filesystem::path(d) : std::filesystem::path();
}

#define NGTEST_REQUIRE_REFERENCE(dir)                                                           \
  const std::filesystem::path dir = reference_dir();                                            \
  if (dir.empty())                                                                              \
    GTEST_SKIP() << "NPUGRAPH_LLM_REFERENCE is not set (tests/python/llm/test_reference.py sets it)"

std::string read_all(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : line) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// Reads the little-endian records make_reference.py writes.
class Records {
 public:
  explicit Records(std::string data) : data_(std::move(data)) {}
  template <class T>
  T get() {
    if (pos_ + sizeof(T) > data_.size()) throw std::runtime_error("reference file truncated");
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    const auto n = get<std::uint64_t>();
    if (pos_ + n > data_.size()) throw std::runtime_error("reference file truncated");
    std::string s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::vector<std::int32_t> ids() {
    std::vector<std::int32_t> v(get<std::uint32_t>());
    for (auto& x : v) x = get<std::int32_t>();
    return v;
  }
  bool done() const { return pos_ == data_.size(); }

 private:
  std::string data_;
  std::size_t pos_ = 0;
};

GgufFile open_model(const std::filesystem::path& dir) {
  std::string path = read_all(dir / "model.txt");
  while (!path.empty() && (path.back() == '\n' || path.back() == '\r')) path.pop_back();
  return GgufFile::open(path);
}

std::string hex(std::string_view s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

std::string show(const std::vector<std::int32_t>& ids) {
  std::string s = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(ids[i]);
  }
  return s + "]";
}

}  // namespace

namespace {
// Compares every tensor of `f` with a tensors.tsv-style listing; returns how many were bitwise equal.
std::size_t compare_tensors(const GgufFile& f, const std::string& listing) {
  std::istringstream lines(listing);
  std::string line;
  std::size_t n = 0, equal = 0;
  std::vector<float> values;
  for (; std::getline(lines, line); ++n) {
    const auto cols = split(line, '\t');
    EXPECT_EQ(cols.size(), 6u) << line;
    if (cols.size() != 6 || n >= f.tensors().size()) break;
    const GgufTensorInfo& t = f.tensors()[n];  // same order as the file
    EXPECT_EQ(t.name, cols[0]);
    EXPECT_EQ(ggml_type_name(t.type), cols[1]) << t.name;
    std::string dims;
    for (std::size_t i = 0; i < t.dims.size(); ++i) {
      if (i) dims += ',';
      dims += std::to_string(t.dims[i]);
    }
    EXPECT_EQ(dims, cols[2]) << t.name;
    EXPECT_EQ(std::to_string(t.offset), cols[3]) << t.name;
    EXPECT_EQ(std::to_string(t.n_bytes), cols[4]) << t.name;
    values.resize(t.n_elements);
    f.dequantize(t, values);
    const std::string digest = ngtest::sha256_hex(values.data(), values.size() * sizeof(float));
    EXPECT_EQ(digest, cols[5]) << t.name << " (" << cols[1]
                               << "): dequantized values differ from gguf.quants.dequantize";
    equal += digest == cols[5];
  }
  EXPECT_EQ(n, f.tensors().size());
  return equal;
}
}  // namespace

TEST(GgufReference, TensorsMatchTheGgufPackageBitForBit) {
  NGTEST_REQUIRE_REFERENCE(dir);
  const GgufFile f = open_model(dir);
  const std::size_t equal = compare_tensors(f, read_all(dir / "tensors.tsv"));
  std::printf("[ reference] %zu of %zu tensors bitwise equal to gguf.quants.dequantize\n", equal,
              f.tensors().size());
}

// The model holds F32, Q4_1 and Q8_0 only: random blocks of every other type npugraph dequantizes.
TEST(GgufReference, EveryTypeOnRandomBlocksMatchesTheGgufPackage) {
  NGTEST_REQUIRE_REFERENCE(dir);
  const GgufFile f = GgufFile::open(dir / "synthetic.gguf");
  for (const GgufTensorInfo& t : f.tensors()) EXPECT_TRUE(ggml_type_traits(t.type).dequantizable());
  const std::size_t equal = compare_tensors(f, read_all(dir / "synthetic.tsv"));
  std::string types;
  for (const GgufTensorInfo& t : f.tensors()) {
    types += ' ';
    types += ggml_type_name(t.type);
  }
  std::printf("[ reference] %zu of %zu synthetic tensors bitwise equal:%s\n", equal,
              f.tensors().size(), types.c_str());
}

TEST(GgufReference, MetadataMatchesTheGgufPackage) {
  NGTEST_REQUIRE_REFERENCE(dir);
  const GgufFile f = open_model(dir);
  std::istringstream lines(read_all(dir / "metadata.tsv"));
  std::string line;
  std::size_t n = 0;
  for (; std::getline(lines, line); ++n) {
    const auto cols = split(line, '\t');
    ASSERT_EQ(cols.size(), 4u) << line;
    ASSERT_LT(n, f.metadata().size());
    const GgufKeyValue& kv = f.metadata()[n];
    EXPECT_EQ(kv.key, cols[0]);
    const GgufValue& v = kv.value;
    EXPECT_EQ(v.type_str(), cols[1]) << kv.key;
    EXPECT_EQ(std::to_string(v.size()), cols[2]) << kv.key;
    std::string mine;
    if (v.is_array()) {
      ngtest::Sha256 h;
      if (v.element_type() == GgufType::string) {
        for (const std::string& s : v.strings()) {
          const std::uint64_t len = s.size();
          h.update(&len, 8);
          h.update(s.data(), s.size());
        }
      } else {
        h.update(v.raw().data(), v.raw().size());
      }
      mine = h.hex();
    } else {
      switch (v.type()) {
        case GgufType::string: mine = hex(f.get<std::string>(kv.key)); break;
        case GgufType::boolean: mine = f.get<bool>(kv.key) ? "1" : "0"; break;
        case GgufType::f32: case GgufType::f64:
          // Python's float.hex: compare the values it spells exactly
          EXPECT_EQ(std::strtod(cols[3].c_str(), nullptr), f.get<double>(kv.key)) << kv.key;
          continue;
        case GgufType::i8: case GgufType::i16: case GgufType::i32: case GgufType::i64:
          mine = std::to_string(f.get<std::int64_t>(kv.key));
          break;
        default: mine = std::to_string(f.get<std::uint64_t>(kv.key)); break;
      }
    }
    EXPECT_EQ(mine, cols[3]) << kv.key;
  }
  EXPECT_EQ(n, f.metadata().size());
}

TEST(TokenizerReference, EncodeMatchesHfTokenizersAndRoundTrips) {
  NGTEST_REQUIRE_REFERENCE(dir);
  const GgufFile f = open_model(dir);
  const Tokenizer t = Tokenizer::from_gguf(f);
  Records r(read_all(dir / "encode.bin"));
  const auto count = r.get<std::uint32_t>();
  std::size_t same = 0, round_trips = 0, lossy = 0, failures = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    const bool parse_special = r.get<std::uint8_t>() != 0;
    const std::string text = r.str();
    const auto expected = r.ids();
    const std::string hf_decoded = r.str();
    const auto ids = t.encode(text, {.parse_special = parse_special});
    if (ids == expected) {
      ++same;
    } else if (++failures <= 20) {
      ADD_FAILURE() << "case " << i << " (parse_special " << parse_special << ") text hex "
                    << hex(text) << "\n  ours " << show(ids) << "\n  HF   " << show(expected);
    }
    const std::string decoded = t.decode(ids);
    EXPECT_EQ(decoded, hf_decoded) << "case " << i << " text hex " << hex(text);
    if (hf_decoded == text) {
      ++round_trips;
      EXPECT_EQ(decoded, text) << "case " << i;
    } else {
      ++lossy;  // the text holds a byte the vocabulary has no token for (dropped by both)
    }
  }
  EXPECT_TRUE(r.done());
  EXPECT_EQ(same, count);
  std::printf("[ reference] %zu of %u encodings equal to HF tokenizers; decode(encode(s)) == s for "
              "%zu, %zu hold bytes without a token\n", same, count, round_trips, lossy);
}

TEST(TokenizerReference, DecodeMatchesHfTokenizers) {
  NGTEST_REQUIRE_REFERENCE(dir);
  const GgufFile f = open_model(dir);
  const Tokenizer t = Tokenizer::from_gguf(f);
  Records r(read_all(dir / "decode.bin"));
  const auto count = r.get<std::uint32_t>();
  std::size_t same = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    const auto ids = r.ids();
    const std::string expected = r.str();
    const std::string got = t.decode(ids);
    EXPECT_EQ(hex(got), hex(expected)) << "case " << i << " ids " << show(ids);
    same += got == expected;
    // Streaming gives the same text, whatever the token boundaries.
    StreamDecoder d(t);
    std::string streamed;
    for (auto id : ids) streamed += d.push(id);
    streamed += d.finish();
    EXPECT_EQ(hex(streamed), hex(expected)) << "streamed case " << i;
  }
  EXPECT_TRUE(r.done());
  std::printf("[ reference] %zu of %u decodes equal to HF tokenizers\n", same, count);
}

TEST(TokenizerReference, ChatTemplateMatchesJinja) {
  NGTEST_REQUIRE_REFERENCE(dir);
  const GgufFile f = open_model(dir);
  const Tokenizer t = Tokenizer::from_gguf(f);
  Records r(read_all(dir / "chat.bin"));
  const auto count = r.get<std::uint32_t>();
  std::size_t same = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    const bool add_gen = r.get<std::uint8_t>() != 0;
    std::vector<ChatMessage> msgs(r.get<std::uint32_t>());
    for (auto& m : msgs) {
      m.role = r.str();
      m.content = r.str();
    }
    const std::string expected = r.str();
    const std::string got = t.apply_chat_template(msgs, add_gen);
    EXPECT_EQ(got, expected) << "case " << i;
    same += got == expected;
  }
  EXPECT_TRUE(r.done());
  std::printf("[ reference] %zu of %u chat renders equal to jinja2\n", same, count);
}
