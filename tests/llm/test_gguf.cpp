// The GGUF reader on files the tests write: every value type, typed access, tensors, dequantisation of
// hand-checked blocks, and corrupt files (each truncation, bad fields, random damage), which must all
// be ArgumentErrors naming the file, never a crash (run under ASan by `make test-asan`).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "llm/gguf_writer.hpp"
#include "npugraph/dtype.hpp"
#include "npugraph/llm/gguf.hpp"
#include "npugraph/error.hpp"
#include "support/throws.hpp"

using namespace npugraph;
using namespace npugraph::llm;
using ngtest::Bytes;
using ngtest::GgufLayout;
using ngtest::GgufWriter;

namespace {

constexpr auto kF32 = static_cast<std::uint32_t>(GgmlType::F32);
constexpr auto kF16 = static_cast<std::uint32_t>(GgmlType::F16);
constexpr auto kQ4_1 = static_cast<std::uint32_t>(GgmlType::Q4_1);
constexpr auto kQ8_0 = static_cast<std::uint32_t>(GgmlType::Q8_0);

std::uint16_t h(float f) { return f32_to_f16_bits(f); }

Bytes q4_1_block(float d, float m, const std::uint8_t (&q)[32]) {
  BlockQ4_1 b{h(d), h(m), {}};
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>(q[j] | (q[j + 16] << 4));
  Bytes out(sizeof b);
  std::memcpy(out.data(), &b, sizeof b);
  return out;
}

// A small file with a bit of everything: the base of the corruption tests.
GgufWriter small_writer() {
  GgufWriter w;
  w.str("general.architecture", "llama");
  w.u32("llama.block_count", 2);
  w.f32("llama.rope.freq_base", 10000.0f);
  w.boolean("tokenizer.ggml.add_bos_token", false);
  w.str_array("tokenizer.ggml.tokens", {"a", "b", "ab"});
  w.array<std::int32_t>("tokenizer.ggml.token_type", GgufType::i32, {1, 1, 3});
  w.tensor("norm.weight", {4}, kF32, ngtest::as_bytes(std::vector<float>{1, 2, 3, 4}));
  std::uint8_t q[32];
  for (int j = 0; j < 32; ++j) q[j] = static_cast<std::uint8_t>(j % 16);
  Bytes blk = q4_1_block(0.5f, -1.0f, q);
  Bytes two = blk;
  two.insert(two.end(), blk.begin(), blk.end());
  w.tensor("blk.0.weight", {32, 2}, kQ4_1, two);
  w.tensor("empty", {0, 3}, kF32, {});
  return w;
}

// Runs f, which must throw ArgumentError mentioning every part.
#define EXPECT_ARG_ERROR(stmt, ...) \
  EXPECT_TRUE(ngtest::throws<ArgumentError>([&] { (void)(stmt); }, {__VA_ARGS__}))

}  // namespace

// ---- well-formed files ----------------------------------------------------------------------------

TEST(GgufReader, ReadsEveryValueType) {
  GgufWriter w;
  w.u8("k.u8", 200);
  w.i8("k.i8", -100);
  w.u16("k.u16", 60000);
  w.i16("k.i16", -30000);
  w.u32("k.u32", 4000000000u);
  w.i32("k.i32", -2000000000);
  w.u64("k.u64", 18000000000000000000ull);
  w.i64("k.i64", -9000000000000000000ll);
  w.f32("k.f32", 1.5f);
  w.f64("k.f64", -2.25);
  w.boolean("k.bool", true);
  w.str("k.str", "héllo");
  w.str_array("k.strs", {"", "x", "yz"});
  w.array<float>("k.f32s", GgufType::f32, {1.0f, -2.0f});
  w.array<std::uint8_t>("k.bools", GgufType::boolean, {1, 0, 1});
  w.array<std::uint64_t>("k.u64s", GgufType::u64, {});
  const GgufFile f = GgufFile::from_bytes(w.build(), "values.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  ASSERT_EQ(f.metadata().size(), 16u);
  EXPECT_EQ(f.metadata()[0].key, "k.u8");
  EXPECT_EQ(f.get<std::uint8_t>("k.u8"), 200);
  EXPECT_EQ(f.get<std::int8_t>("k.i8"), -100);
  EXPECT_EQ(f.get<std::uint16_t>("k.u16"), 60000);
  EXPECT_EQ(f.get<std::int16_t>("k.i16"), -30000);
  EXPECT_EQ(f.get<std::uint32_t>("k.u32"), 4000000000u);
  EXPECT_EQ(f.get<std::int32_t>("k.i32"), -2000000000);
  EXPECT_EQ(f.get<std::uint64_t>("k.u64"), 18000000000000000000ull);
  EXPECT_EQ(f.get<std::int64_t>("k.i64"), -9000000000000000000ll);
  EXPECT_EQ(f.get<float>("k.f32"), 1.5f);
  EXPECT_EQ(f.get<double>("k.f64"), -2.25);
  EXPECT_EQ(f.get<float>("k.f64"), -2.25f);
  EXPECT_TRUE(f.get<bool>("k.bool"));
  EXPECT_EQ(f.get<std::string>("k.str"), "héllo");
  EXPECT_EQ(f.get<std::vector<std::string>>("k.strs"), (std::vector<std::string>{"", "x", "yz"}));
  EXPECT_EQ(f.get<std::vector<float>>("k.f32s"), (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(f.get<std::vector<bool>>("k.bools"), (std::vector<bool>{true, false, true}));
  EXPECT_TRUE(f.get<std::vector<std::uint64_t>>("k.u64s").empty());
  EXPECT_EQ(f.value("k.strs").type_str(), "array[string]");
  EXPECT_EQ(f.value("k.strs").size(), 3u);
  EXPECT_EQ(f.value("k.u32").type(), GgufType::u32);
  EXPECT_TRUE(f.tensors().empty());
}

TEST(GgufReader, IntegersWidenWhenTheyFitAndOtherTypesAreRefusedByName) {
  GgufWriter w;
  w.u32("ctx", 8192);
  w.i32("neg", -1);
  w.str("name", "x");
  w.array<std::int32_t>("ids", GgufType::i32, {1, -5});
  const GgufFile f = GgufFile::from_bytes(w.build(), "types.gguf");
  EXPECT_EQ(f.get<std::int64_t>("ctx"), 8192);
  EXPECT_EQ(f.get<std::uint64_t>("ctx"), 8192u);
  EXPECT_EQ(f.get<std::int16_t>("ctx"), 8192);
  EXPECT_ARG_ERROR(f.get<std::int8_t>("ctx"), "types.gguf", "'ctx'", "does not fit int8");
  EXPECT_ARG_ERROR(f.get<std::uint32_t>("neg"), "types.gguf", "'neg'", "does not fit uint32");
  EXPECT_ARG_ERROR(f.get<float>("ctx"), "types.gguf", "'ctx'", "is u32", "expected float");
  EXPECT_ARG_ERROR(f.get<std::string>("ctx"), "'ctx'", "is u32", "expected string");
  EXPECT_ARG_ERROR(f.get<std::int32_t>("name"), "'name'", "is string", "expected int32");
  EXPECT_ARG_ERROR(f.get<std::vector<std::string>>("name"), "'name'", "expected an array of string");
  EXPECT_ARG_ERROR(f.get<std::int32_t>("ids"), "'ids'", "is array[i32]");
  EXPECT_ARG_ERROR(f.get<std::vector<std::uint32_t>>("ids"), "'ids'", "element 1");
  EXPECT_ARG_ERROR(f.get<std::string>("nope"), "types.gguf", "missing key 'nope'");
  EXPECT_ARG_ERROR(f.value("nope"), "missing key 'nope'");
  EXPECT_FALSE(f.find<std::string>("nope").has_value());
  EXPECT_EQ(f.find<std::uint32_t>("ctx"), 8192u);
  EXPECT_ARG_ERROR(f.find<std::string>("ctx"), "'ctx'", "is u32");
  EXPECT_EQ(f.get_or<std::string>("nope", "fallback"), "fallback");
  EXPECT_EQ(f.get_or<std::uint32_t>("ctx", 1), 8192u);
}

TEST(GgufReader, TensorsInfosBytesAndLookups) {
  GgufLayout lay;
  const Bytes bytes = small_writer().build(&lay);
  const GgufFile f = GgufFile::from_bytes(bytes, "small.gguf");
  ASSERT_EQ(f.tensors().size(), 3u);
  const GgufTensorInfo& norm = f.tensor("norm.weight");
  EXPECT_EQ(norm.dims, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(norm.type, GgmlType::F32);
  EXPECT_EQ(norm.n_elements, 4u);
  EXPECT_EQ(norm.n_bytes, 16u);
  EXPECT_EQ(norm.offset, 0u);
  EXPECT_EQ(f.data_offset(), lay.data_at);
  EXPECT_EQ(f.dequantize("norm.weight"), (std::vector<float>{1, 2, 3, 4}));

  const GgufTensorInfo& w = f.tensor("blk.0.weight");
  EXPECT_EQ(w.dims, (std::vector<std::int64_t>{32, 2}));
  EXPECT_EQ(w.row_major_shape(), (std::vector<std::int64_t>{2, 32}));
  EXPECT_EQ(w.n_rows(), 2u);
  EXPECT_EQ(w.row_bytes(), 20u);
  EXPECT_EQ(w.offset, 32u);
  EXPECT_EQ(w.n_bytes, 40u);
  const auto raw = f.tensor_bytes(w);
  ASSERT_EQ(raw.size(), 40u);
  EXPECT_EQ(raw.data(), f.tensor_bytes("blk.0.weight").data());
  EXPECT_EQ(std::memcmp(raw.data(), bytes.data() + lay.data_at + 32, 40), 0);
  const std::vector<float> v = f.dequantize(w);
  ASSERT_EQ(v.size(), 64u);
  EXPECT_EQ(v[0], -1.0f);
  EXPECT_EQ(v[15], 15 * 0.5f - 1.0f);
  EXPECT_EQ(v[47], 15 * 0.5f - 1.0f);

  const GgufTensorInfo& e = f.tensor("empty");
  EXPECT_EQ(e.n_elements, 0u);
  EXPECT_TRUE(f.dequantize(e).empty());
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
  EXPECT_ARG_ERROR(f.tensor("nope"), "small.gguf", "missing tensor 'nope'");
  std::vector<float> wrong(3);
  EXPECT_ARG_ERROR(f.dequantize(norm, wrong), "small.gguf", "'norm.weight'", "needs 4 floats");
}

TEST(GgufReader, MapsFilesFromDiskAndNamesThemInErrors) {
  const auto path = ngtest::scratch_dir() / "disk.gguf";
  ngtest::write_file(path, small_writer().build());
  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.name(), path.string());
  EXPECT_EQ(f.get<std::string>("general.architecture"), "llama");
  EXPECT_EQ(f.dequantize("norm.weight"), (std::vector<float>{1, 2, 3, 4}));
  GgufFile moved = std::move(f);
  EXPECT_EQ(moved.dequantize("norm.weight")[3], 4.0f);
  EXPECT_ARG_ERROR(moved.get<std::uint32_t>("nope"), path.string(), "missing key 'nope'");

  EXPECT_ARG_ERROR(GgufFile::open(ngtest::scratch_dir() / "absent.gguf"), "absent.gguf", "cannot open");
  EXPECT_ARG_ERROR(GgufFile::open(ngtest::scratch_dir()), "not a regular file");
  const auto empty = ngtest::scratch_dir() / "empty.gguf";
  ngtest::write_file(empty, {});
  EXPECT_ARG_ERROR(GgufFile::open(empty), "empty.gguf", "truncated", "magic");
}

TEST(GgufReader, HonoursGeneralAlignmentAndVersion2) {
  for (std::uint32_t align : {1u, 8u, 64u}) {
    GgufWriter w = small_writer();
    w.version = 2;
    w.alignment = align;
    w.u32("general.alignment", align);
    const GgufFile f = GgufFile::from_bytes(w.build(), "aligned.gguf");
    EXPECT_EQ(f.alignment(), align);
    EXPECT_EQ(f.version(), 2u);
    EXPECT_EQ(f.data_offset() % align, 0u);
    EXPECT_EQ(f.dequantize("norm.weight"), (std::vector<float>{1, 2, 3, 4}));
    EXPECT_EQ(f.dequantize("blk.0.weight")[47], 6.5f);
  }
}

// ---- corrupt files ---------------------------------------------------------------------------------

TEST(GgufCorrupt, EveryTruncationIsAnErrorNamingTheFileUnlessOnlyPaddingIsCut) {
  const Bytes full = small_writer().build();
  // The end of the last tensor (the empty one's offset counts): cutting only padding after it still
  // leaves a complete file.
  std::size_t needed = 0;
  {
    const GgufFile f = GgufFile::from_bytes(full, "full.gguf");
    for (const GgufTensorInfo& t : f.tensors())
      needed = std::max<std::size_t>(needed, f.data_offset() + t.offset + t.n_bytes);
  }
  ASSERT_LE(needed, full.size());
  for (std::size_t n = 0; n < full.size(); ++n) {
    Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    const std::string name = "cut-" + std::to_string(n) + ".gguf";
    if (n >= needed) {
      EXPECT_NO_THROW(GgufFile::from_bytes(cut, name)) << n;
      continue;
    }
    EXPECT_TRUE(ngtest::throws<ArgumentError>([&] { GgufFile::from_bytes(cut, name); },
                                                   {"GGUF file '" + name + "'"}))
        << "cut at " << n;
  }
  // The same through the mmap path, for a sample of lengths.
  for (std::size_t n = 0; n < needed; n += 13) {
    const auto path = ngtest::scratch_dir() / ("cut-" + std::to_string(n) + ".gguf");
    ngtest::write_file(path, Bytes(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n)));
    EXPECT_TRUE(ngtest::throws<ArgumentError>([&] { GgufFile::open(path); }, {path.string()}))
        << n;
  }
}

TEST(GgufCorrupt, HeaderFields) {
  GgufLayout lay;
  const Bytes good = small_writer().build(&lay);
  auto expect = [&](auto mutate, std::initializer_list<std::string> parts) {
    Bytes b = good;
    mutate(b);
    std::vector<std::string> all{"bad.gguf"};
    all.insert(all.end(), parts.begin(), parts.end());
    try {
      GgufFile::from_bytes(b, "bad.gguf");
      ADD_FAILURE() << "did not throw; wanted: " << *parts.begin();
    } catch (const ArgumentError& e) {
      for (const auto& p : all) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  };
  expect([](Bytes& b) { b[0] = std::byte{'G'}; b[3] = std::byte{'X'}; }, {"bad magic 'GGUX'"});
  expect([](Bytes& b) { ngtest::patch<std::uint32_t>(b, 4, 1); }, {"unsupported version 1"});
  expect([](Bytes& b) { ngtest::patch<std::uint32_t>(b, 4, 4); }, {"unsupported version 4"});
  expect([](Bytes& b) { ngtest::patch<std::uint32_t>(b, 4, 0x03000000); }, {"byte-swapped"});
  expect([&](Bytes& b) { ngtest::patch<std::uint64_t>(b, lay.tensor_count_at, 1ull << 60); },
         {"claims 1152921504606846976 tensors"});
  expect([&](Bytes& b) { ngtest::patch<std::uint64_t>(b, lay.kv_count_at, ~0ull); },
         {"metadata entries"});
  expect([&](Bytes& b) { ngtest::patch<std::uint64_t>(b, lay.kv_count_at, 7); },
         {"GGUF file"});  // reads the tensor infos as keys
  expect([&](Bytes& b) { ngtest::patch<std::uint64_t>(b, lay.key_at["llama.block_count"], 1ull << 62); },
         {"truncated", "metadata entry 1"});
  // array length: after type (4) and element type (4)
  expect([&](Bytes& b) {
    ngtest::patch<std::uint64_t>(b, lay.value_at["tokenizer.ggml.tokens"] + 8, 1ull << 61);
  }, {"array 'tokenizer.ggml.tokens'", "claims 2305843009213693952 elements"});
  expect([&](Bytes& b) {
    ngtest::patch<std::uint64_t>(b, lay.value_at["tokenizer.ggml.token_type"] + 8, 1000);
  }, {"array 'tokenizer.ggml.token_type'", "claims 1000 elements"});
  // a string inside the array: first element's length
  expect([&](Bytes& b) {
    ngtest::patch<std::uint64_t>(b, lay.value_at["tokenizer.ggml.tokens"] + 16, 1ull << 40);
  }, {"element 0 of array 'tokenizer.ggml.tokens'"});
  expect([&](Bytes& b) { ngtest::patch<std::uint32_t>(b, lay.value_at["llama.block_count"], 13); },
         {"key 'llama.block_count' has invalid type 13"});
  expect([&](Bytes& b) {
    ngtest::patch<std::uint32_t>(b, lay.value_at["tokenizer.ggml.tokens"] + 4, 9);
  }, {"'tokenizer.ggml.tokens' is an array of arrays"});
  expect([&](Bytes& b) {
    ngtest::patch<std::uint32_t>(b, lay.value_at["tokenizer.ggml.tokens"] + 4, 77);
  }, {"array of invalid type 77"});
}

TEST(GgufCorrupt, KeysAndAlignment) {
  auto build_err = [](GgufWriter w, std::initializer_list<std::string> parts) {
    const Bytes b = w.build();
    std::vector<std::string> all{"keys.gguf"};
    all.insert(all.end(), parts.begin(), parts.end());
    try {
      GgufFile::from_bytes(b, "keys.gguf");
      ADD_FAILURE() << "did not throw: " << *parts.begin();
    } catch (const ArgumentError& e) {
      for (const auto& p : all) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  };
  {
    GgufWriter w;
    w.u32("a", 1);
    w.u32("a", 2);
    build_err(w, {"duplicate key 'a'"});
  }
  {
    GgufWriter w;
    w.u32("", 1);
    build_err(w, {"empty key"});
  }
  {
    GgufWriter w;
    w.u32(std::string(70000, 'k'), 1);
    build_err(w, {"is 70000 bytes long (at most 65535)", "'kkkk"});
  }
  {
    GgufWriter w;
    w.u32(std::string("bad\x01key\n"), 1);
    w.u32(std::string("bad\x01key\n"), 2);
    build_err(w, {"duplicate key 'bad?key?'"});
  }
  {
    GgufWriter w;
    w.u64("general.alignment", 32);
    build_err(w, {"'general.alignment' must be u32 but is u64"});
  }
  for (std::uint32_t a : {0u, 3u, 48u}) {
    GgufWriter w;
    w.u32("general.alignment", a);
    build_err(w, {"general.alignment is " + std::to_string(a), "not a power of two"});
  }
}

TEST(GgufCorrupt, TensorInfos) {
  auto err = [](GgufWriter w, std::initializer_list<std::string> parts, auto mutate) {
    GgufLayout lay;
    Bytes b = w.build(&lay);
    mutate(b, lay);
    std::vector<std::string> all{"t.gguf"};
    all.insert(all.end(), parts.begin(), parts.end());
    try {
      GgufFile::from_bytes(b, "t.gguf");
      ADD_FAILURE() << "did not throw: " << *std::prev(parts.end());
    } catch (const ArgumentError& e) {
      for (const auto& p : all) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  };
  auto none = [](Bytes&, GgufLayout&) {};
  const Bytes f32x8 = ngtest::as_bytes(std::vector<float>(8, 1.0f));
  {
    GgufWriter w;
    w.tensor("a", {8}, kF32, f32x8);
    w.tensor("a", {8}, kF32, f32x8);
    err(w, {"duplicate tensor 'a'"}, none);
  }
  {
    GgufWriter w;
    w.tensor(std::string(64, 'n'), {8}, kF32, f32x8);
    err(w, {"is 64 bytes long (at most 63)"}, none);
  }
  {
    GgufWriter w;
    w.tensor("x", {8}, kF32, f32x8);
    err(w, {"tensor 'x' has 5 dimensions"},
        [](Bytes& b, GgufLayout& l) { ngtest::patch<std::uint32_t>(b, l.dims_at["x"], 5); });
  }
  {
    GgufWriter w;
    w.tensor("x", {8, 1}, kF32, f32x8);
    err(w, {"tensor 'x' dimension 1 is -3"},
        [](Bytes& b, GgufLayout& l) { ngtest::patch<std::int64_t>(b, l.dims_at["x"] + 12, -3); });
  }
  {
    GgufWriter w;
    w.tensor("x", {1ll << 40, 1ll << 30}, kF32, {});
    err(w, {"tensor 'x'", "more elements than int64"}, none);
  }
  {
    GgufWriter w;
    w.tensor("x", {1ll << 62}, kF32, {});
    err(w, {"tensor 'x'", "larger than 2^64 bytes"}, none);
  }
  {
    GgufWriter w;
    w.tensor("x", {1ll << 40}, kF32, {});
    err(w, {"tensor 'x'", "runs past the end of the data section"}, none);
  }
  for (std::uint32_t bad : {4u, 31u, 40u, 1000u}) {
    GgufWriter w;
    w.tensor("x", {8}, kF32, f32x8);
    err(w, {"tensor 'x' has unknown ggml type " + std::to_string(bad)},
        [bad](Bytes& b, GgufLayout& l) { ngtest::patch<std::uint32_t>(b, l.type_at["x"], bad); });
  }
  {
    GgufWriter w;
    w.tensor("q", {16}, kQ8_0, Bytes(34));
    err(w, {"tensor 'q' of type Q8_0 has rows of 16 elements", "block size 32"}, none);
  }
  {
    GgufWriter w;
    w.tensor("x", {8}, kF32, f32x8, 16);
    err(w, {"tensor 'x' data offset 16 is not a multiple of the alignment 32"}, none);
  }
  {
    GgufWriter w;
    w.tensor("x", {8}, kF32, f32x8);
    err(w, {"tensor 'x'", "runs past the end"},
        [](Bytes& b, GgufLayout& l) { ngtest::patch<std::uint64_t>(b, l.offset_at["x"], 1ull << 20); });
  }
  {
    GgufWriter w;
    w.tensor("x", {8}, kF32, f32x8);
    err(w, {"tensor 'x'", "runs past the end"},  // offset + size wraps around 2^64
        [](Bytes& b, GgufLayout& l) { ngtest::patch<std::uint64_t>(b, l.offset_at["x"], ~0ull - 31); });
  }
  {
    GgufWriter w;
    w.tensor("a", {16}, kF32, ngtest::as_bytes(std::vector<float>(16)));
    w.tensor("b", {8}, kF32, f32x8, 32);
    err(w, {"tensors 'a' [0, 64) and 'b' [32, 64) overlap"}, none);
  }
  {
    GgufWriter w;  // overlap hidden behind an empty tensor in offset order
    w.tensor("a", {16}, kF32, ngtest::as_bytes(std::vector<float>(16)));
    w.tensor("z", {0}, kF32, {}, 32);
    w.tensor("b", {8}, kF32, f32x8, 32);
    err(w, {"'a'", "'b'", "overlap"}, none);
  }
}

TEST(GgufCorrupt, UnsupportedTypesAreNamedWhenDequantized) {
  GgufWriter w;
  w.tensor("blk.0.ffn_down.weight", {256}, static_cast<std::uint32_t>(GgmlType::IQ2_XXS), Bytes(66));
  w.tensor("i32", {4}, static_cast<std::uint32_t>(GgmlType::I32), Bytes(16));
  const GgufFile f = GgufFile::from_bytes(w.build(), "k.gguf");
  EXPECT_EQ(f.tensor_bytes("blk.0.ffn_down.weight").size(), 66u);  // the raw bytes are still there
  EXPECT_ARG_ERROR(f.dequantize("blk.0.ffn_down.weight"), "k.gguf", "'blk.0.ffn_down.weight'",
                   "type IQ2_XXS", "does not dequantize");
  EXPECT_ARG_ERROR(f.dequantize("i32"), "'i32'", "type I32");
}

// Random damage anywhere in the header: an ArgumentError or a file that reads and dequantizes.
TEST(GgufCorrupt, RandomByteDamageNeverCrashes) {
  GgufLayout lay;
  const Bytes good = small_writer().build(&lay);
  std::mt19937 rng(1234);
  int accepted = 0, refused = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    Bytes b = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const std::size_t at = rng() % lay.data_at;
      const auto kind = rng() % 3;
      if (kind == 0) b[at] = static_cast<std::byte>(rng());
      else if (kind == 1) b[at] ^= std::byte{0x80};
      else if (at + 8 <= b.size()) ngtest::patch<std::uint64_t>(b, at, ~0ull >> (rng() % 64));
    }
    if (rng() % 4 == 0) b.resize(rng() % b.size());
    try {
      const GgufFile f = GgufFile::from_bytes(b, "random.gguf");
      for (const GgufTensorInfo& t : f.tensors()) {
        (void)f.tensor_bytes(t);
        if (ggml_type_traits(t.type).dequantizable() && t.n_elements < (1u << 20)) (void)f.dequantize(t);
      }
      ++accepted;
    } catch (const ArgumentError& e) {
      ASSERT_NE(std::string(e.what()).find("random.gguf"), std::string::npos) << e.what();
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(accepted, 0);  // damage inside strings and values still reads
}

// ---- dequantisation, one hand-checked block per type -------------------------------------------------

namespace {
template <class Block>
Bytes block_bytes(const Block& b) {
  Bytes out(sizeof b);
  std::memcpy(out.data(), &b, sizeof b);
  return out;
}
std::vector<float> dq(GgmlType t, const Bytes& src, std::size_t n) {
  std::vector<float> y(n);
  dequantize_row(t, src, y);
  return y;
}
}  // namespace

TEST(GgufDequant, Q4_0) {
  BlockQ4_0 b{h(2.0f), {}};
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  const auto y = dq(GgmlType::Q4_0, block_bytes(b), 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 2.0f) << j;             // low nibble: element j
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 2.0f) << j;   // high nibble: element j + 16
  }
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[16], 14.0f);
}

TEST(GgufDequant, Q4_1) {
  BlockQ4_1 b{h(0.5f), h(-1.0f), {}};
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  const auto y = dq(GgmlType::Q4_1, block_bytes(b), 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.5f - 1.0f) << j;
    EXPECT_EQ(y[j + 16], (15 - j) * 0.5f - 1.0f) << j;
  }
  EXPECT_EQ(y[1], -0.5f);
  EXPECT_EQ(y[16], 6.5f);
  // An inexact scale: product rounded, then the sum rounded (no fused multiply-add), as ggml does.
  BlockQ4_1 c{h(0.1f), h(0.3f), {}};
  for (int j = 0; j < 16; ++j) c.qs[j] = 0x7b;  // low 11, high 7
  const auto z = dq(GgmlType::Q4_1, block_bytes(c), 32);
  const float d = f16_bits_to_f32(h(0.1f)), m = f16_bits_to_f32(h(0.3f));
  const volatile float p11 = 11.0f * d, p7 = 7.0f * d;
  EXPECT_EQ(z[0], p11 + m);
  EXPECT_EQ(z[16], p7 + m);
}

TEST(GgufDequant, Q5_0AndQ5_1) {
  BlockQ5_0 b{h(1.0f), {}, {}};
  const std::uint32_t qh = 0xA5A5F00Fu;
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  const auto y = dq(GgmlType::Q5_0, block_bytes(b), 32);
  for (int j = 0; j < 32; ++j) {
    const int low = j < 16 ? j : 15 - (j - 16);
    const int q = low | static_cast<int>(((qh >> j) & 1u) << 4);
    EXPECT_EQ(y[j], static_cast<float>(q - 16)) << j;
  }
  BlockQ5_1 c{h(0.5f), h(2.0f), {}, {}};
  std::memcpy(c.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) c.qs[j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  const auto z = dq(GgmlType::Q5_1, block_bytes(c), 32);
  for (int j = 0; j < 32; ++j) {
    const int low = j < 16 ? j : 15 - (j - 16);
    const int q = low | static_cast<int>(((qh >> j) & 1u) << 4);
    EXPECT_EQ(z[j], q * 0.5f + 2.0f) << j;
  }
}

TEST(GgufDequant, Q8_0) {
  BlockQ8_0 b{h(0.25f), {}};
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<std::int8_t>(j * 8 - 128);
  const auto y = dq(GgmlType::Q8_0, block_bytes(b), 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 128) * 0.25f) << j;
  EXPECT_EQ(y[0], -32.0f);
  EXPECT_EQ(y[31], 30.0f);
}

TEST(GgufDequant, FloatFormats) {
  const std::vector<std::uint16_t> halves{0x3C00, 0xC000, 0x7BFF, 0x0001, 0x8000, 0x7C00};
  const auto y = dq(GgmlType::F16, ngtest::as_bytes(halves), halves.size());
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], 65504.0f);
  EXPECT_EQ(y[3], std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::signbit(y[4]) && y[4] == 0.0f);
  EXPECT_EQ(y[5], std::numeric_limits<float>::infinity());
  const std::vector<std::uint16_t> bf{0x3F80, 0xC0A0, 0x4049};
  const auto z = dq(GgmlType::BF16, ngtest::as_bytes(bf), bf.size());
  EXPECT_EQ(z[0], 1.0f);
  EXPECT_EQ(z[1], -5.0f);
  EXPECT_EQ(z[2], std::bit_cast<float>(0x40490000u));
  const std::vector<float> f{1.5f, -0.0f, 3e38f};
  EXPECT_EQ(dq(GgmlType::F32, ngtest::as_bytes(f), 3), f);
}

TEST(GgufDequant, SizesAreChecked) {
  std::vector<float> y(32);
  EXPECT_ARG_ERROR(dequantize_row(GgmlType::Q8_0, Bytes(33), y), "Q8_0", "take 34 bytes",
                   "source has 33");
  std::vector<float> odd(31);
  EXPECT_ARG_ERROR(dequantize_row(GgmlType::Q4_1, Bytes(20), odd), "31 elements of Q4_1",
                   "32-element blocks");
  EXPECT_ARG_ERROR(dequantize_row(GgmlType::IQ4_NL, Bytes(18), y), "IQ4_NL", "not one npugraph");
}

TEST(GgufTypes, TraitsMatchTheFormat) {
  EXPECT_EQ(ggml_type_name(GgmlType::Q4_1), "Q4_1");
  EXPECT_EQ(ggml_type_traits(GgmlType::Q4_1).block_bytes, 20u);
  EXPECT_EQ(ggml_type_traits(GgmlType::Q8_0).block_bytes, 34u);
  EXPECT_EQ(ggml_type_traits(GgmlType::Q6_K).block, 256);
  EXPECT_EQ(ggml_type_traits(GgmlType::BF16).block_bytes, 2u);
  EXPECT_EQ(ggml_type_traits(4u), nullptr);   // Q4_2, removed
  EXPECT_EQ(ggml_type_traits(33u), nullptr);
  EXPECT_EQ(ggml_type_traits(40u), nullptr);
  EXPECT_NE(ggml_type_traits(39u), nullptr);  // MXFP4
}

// K-quants: one super-block each, filled element by element from the layout ggml's
// dequantize_row_q*_K loops describe, with scales past 15 where the format packs high bits apart.
namespace {
void set_bits(std::uint8_t& byte, int shift, int width, int value) {
  const int mask = ((1 << width) - 1) << shift;
  byte = static_cast<std::uint8_t>((byte & ~mask) | ((value << shift) & mask));
}
// The 12-byte scale/min packing of Q4_K and Q5_K.
void pack_k4(std::uint8_t (&sc)[12], const int (&scale)[8], const int (&min)[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = static_cast<std::uint8_t>((scale[j] & 63) | ((scale[j + 4] >> 4) << 6));
    sc[j + 4] = static_cast<std::uint8_t>((min[j] & 63) | ((min[j + 4] >> 4) << 6));
    sc[j + 8] = static_cast<std::uint8_t>((scale[j + 4] & 0xf) | ((min[j + 4] & 0xf) << 4));
  }
}
}  // namespace

TEST(GgufDequant, Q2_K) {
  struct { std::uint8_t scales[16]; std::uint8_t qs[64]; std::uint16_t d, dmin; } b{};
  static_assert(sizeof b == 84);
  b.d = h(0.25f);
  b.dmin = h(1.0f);
  for (int k = 0; k < 16; ++k) b.scales[k] = static_cast<std::uint8_t>((15 - k) | ((k % 5) << 4));
  for (int e = 0; e < 256; ++e) set_bits(b.qs[32 * (e / 128) + e % 32], 2 * ((e % 128) / 32), 2, e % 4);
  const auto y = dq(GgmlType::Q2_K, block_bytes(b), 256);
  for (int e = 0; e < 256; ++e) {
    const int k = e / 16;
    EXPECT_EQ(y[e], 0.25f * (15 - k) * (e % 4) - 1.0f * (k % 5)) << e;
  }
}

TEST(GgufDequant, Q3_K) {
  struct { std::uint8_t hmask[32]; std::uint8_t qs[64]; std::uint8_t scales[12]; std::uint16_t d; } b{};
  static_assert(sizeof b == 110);
  b.d = h(2.0f);
  int raw[16];
  for (int k = 0; k < 16; ++k) {
    raw[k] = (k * 4 + 1) & 63;  // 6 bits, minus 32 when used
    set_bits(b.scales[k % 8], k < 8 ? 0 : 4, 4, raw[k] & 0xf);
    set_bits(b.scales[8 + k % 4], 2 * (k / 4), 2, raw[k] >> 4);
  }
  for (int e = 0; e < 256; ++e) {
    set_bits(b.qs[32 * (e / 128) + e % 32], 2 * ((e % 128) / 32), 2, e % 4);
    set_bits(b.hmask[e % 32], e / 32, 1, (e / 7) % 2);
  }
  const auto y = dq(GgmlType::Q3_K, block_bytes(b), 256);
  for (int e = 0; e < 256; ++e) {
    const int q = e % 4 - ((e / 7) % 2 ? 0 : 4);  // a clear high bit subtracts 4
    EXPECT_EQ(y[e], 2.0f * (raw[e / 16] - 32) * q) << e;
  }
}

TEST(GgufDequant, Q4_KAndQ5_K) {
  const int scale[8] = {1, 2, 3, 4, 5, 37, 7, 63};
  const int min[8] = {0, 1, 2, 3, 4, 5, 50, 17};
  struct { std::uint16_t d, dmin; std::uint8_t scales[12]; std::uint8_t qs[128]; } b4{};
  struct { std::uint16_t d, dmin; std::uint8_t scales[12]; std::uint8_t qh[32]; std::uint8_t qs[128]; } b5{};
  static_assert(sizeof b4 == 144 && sizeof b5 == 176);
  b4.d = b5.d = h(1.0f);
  b4.dmin = b5.dmin = h(0.5f);
  pack_k4(b4.scales, scale, min);
  pack_k4(b5.scales, scale, min);
  for (int e = 0; e < 256; ++e) {
    const int sub = e / 32, l = e % 32;
    set_bits(b4.qs[32 * (sub / 2) + l], 4 * (sub % 2), 4, l % 16);
    set_bits(b5.qs[32 * (sub / 2) + l], 4 * (sub % 2), 4, l % 16);
    set_bits(b5.qh[l], sub, 1, (l + sub) % 2);
  }
  const auto y4 = dq(GgmlType::Q4_K, block_bytes(b4), 256);
  const auto y5 = dq(GgmlType::Q5_K, block_bytes(b5), 256);
  for (int e = 0; e < 256; ++e) {
    const int sub = e / 32, l = e % 32;
    EXPECT_EQ(y4[e], 1.0f * scale[sub] * (l % 16) - 0.5f * min[sub]) << e;
    EXPECT_EQ(y5[e], 1.0f * scale[sub] * ((l % 16) | ((l + sub) % 2) << 4) - 0.5f * min[sub]) << e;
  }
}

TEST(GgufDequant, Q6_K) {
  struct { std::uint8_t ql[128]; std::uint8_t qh[64]; std::int8_t scales[16]; std::uint16_t d; } b{};
  static_assert(sizeof b == 210);
  b.d = h(0.5f);
  for (int k = 0; k < 16; ++k) b.scales[k] = static_cast<std::int8_t>(k * 9 - 70);
  for (int e = 0; e < 256; ++e) {
    const int hh = e / 128, r = e % 128, q = (e * 5) % 64;
    set_bits(b.ql[64 * hh + r % 64], 4 * (r / 64), 4, q & 0xf);
    set_bits(b.qh[32 * hh + r % 32], 2 * (r / 32), 2, q >> 4);
  }
  const auto y = dq(GgmlType::Q6_K, block_bytes(b), 256);
  for (int e = 0; e < 256; ++e)
    EXPECT_EQ(y[e], 0.5f * ((e / 16) * 9 - 70) * ((e * 5) % 64 - 32)) << e;
}
