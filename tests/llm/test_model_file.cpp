// The real model, SmolLM2-135M-Instruct Q4_1 (tools/fetch_model.py): header, metadata, every tensor
// dequantized, the tokenizer and chat template. Skipped when the file has not been fetched.
// Bitwise comparisons with llama.cpp's gguf package and HF tokenizers: test_model_reference.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

#include "llm/model_path.hpp"
#include "npugraph/llm/gguf.hpp"
#include "npugraph/llm/tokenizer.hpp"

using namespace npugraph::llm;

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

TEST(GgufModel, HeaderMetadataAndTensorTypes) {
  NGTEST_REQUIRE_MODEL(path);
  const auto t0 = std::chrono::steady_clock::now();
  const GgufFile f = GgufFile::open(path);
  const double load_ms = ms_since(t0);
  std::printf("[ model    ] opened and parsed %s in %.2f ms\n", path.c_str(), load_ms);
  RecordProperty("load_ms", std::to_string(load_ms));

  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.file_size(), ngtest::kModelFileSize);
  EXPECT_EQ(f.metadata().size(), 33u);
  EXPECT_EQ(f.tensors().size(), 272u);
  EXPECT_EQ(f.get<std::string>("general.architecture"), "llama");
  EXPECT_EQ(f.get<std::uint32_t>("llama.block_count"), 30u);
  EXPECT_EQ(f.get<std::uint32_t>("llama.embedding_length"), 576u);
  EXPECT_EQ(f.get<std::uint32_t>("llama.feed_forward_length"), 1536u);
  EXPECT_EQ(f.get<std::uint32_t>("llama.attention.head_count"), 9u);
  EXPECT_EQ(f.get<std::uint32_t>("llama.attention.head_count_kv"), 3u);
  EXPECT_EQ(f.get<std::uint32_t>("llama.context_length"), 8192u);
  EXPECT_EQ(f.get<std::uint32_t>("llama.rope.dimension_count"), 64u);
  EXPECT_EQ(f.get<float>("llama.rope.freq_base"), 100000.0f);
  EXPECT_EQ(f.get<float>("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_EQ(f.get<std::uint32_t>("general.file_type"), 3u);  // MOSTLY_Q4_1
  EXPECT_EQ(f.get<std::vector<std::string>>("general.languages"), std::vector<std::string>{"en"});

  std::map<std::string, int> counts;
  for (const GgufTensorInfo& t : f.tensors()) ++counts[std::string(ggml_type_name(t.type))];
  EXPECT_EQ(counts, (std::map<std::string, int>{{"F32", 61}, {"Q4_1", 210}, {"Q8_0", 1}}));
  const GgufTensorInfo& emb = f.tensor("token_embd.weight");
  EXPECT_EQ(emb.type, GgmlType::Q8_0);
  EXPECT_EQ(emb.dims, (std::vector<std::int64_t>{576, 49152}));
  EXPECT_EQ(emb.row_bytes(), 576u / 32 * 34);
  const GgufTensorInfo& down = f.tensor("blk.29.ffn_down.weight");
  EXPECT_EQ(down.type, GgmlType::Q4_1);
  EXPECT_EQ(down.row_major_shape(), (std::vector<std::int64_t>{576, 1536}));
  EXPECT_EQ(f.tensor("output_norm.weight").type, GgmlType::F32);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);  // tied to token_embd
}

TEST(GgufModel, EveryTensorDequantizesToFiniteValues) {
  NGTEST_REQUIRE_MODEL(path);
  const GgufFile f = GgufFile::open(path);
  std::uint64_t elements = 0;
  std::vector<float> buf;
  const auto t0 = std::chrono::steady_clock::now();
  for (const GgufTensorInfo& t : f.tensors()) {
    buf.resize(t.n_elements);
    f.dequantize(t, buf);
    elements += t.n_elements;
  }
  const double ms = ms_since(t0);
  std::printf("[ model    ] dequantized %llu values of %zu tensors in %.1f ms\n",
              static_cast<unsigned long long>(elements), f.tensors().size(), ms);
  RecordProperty("dequantize_ms", std::to_string(ms));
  EXPECT_EQ(elements, 134515008u);
  for (const GgufTensorInfo& t : f.tensors()) {
    const auto v = f.dequantize(t);
    std::size_t bad = 0;
    for (float x : v) bad += !std::isfinite(x);
    EXPECT_EQ(bad, 0u) << t.name;
  }
  const auto norm = f.dequantize("blk.0.attn_norm.weight");
  const auto raw = f.tensor_bytes("blk.0.attn_norm.weight");
  EXPECT_EQ(std::memcmp(norm.data(), raw.data(), raw.size()), 0);
}

TEST(TokenizerModel, EncodesDecodesAndRendersChat) {
  NGTEST_REQUIRE_MODEL(path);
  const GgufFile f = GgufFile::open(path);
  const auto t0 = std::chrono::steady_clock::now();
  const Tokenizer t = Tokenizer::from_gguf(f);
  std::printf("[ model    ] tokenizer built in %.1f ms\n", ms_since(t0));
  EXPECT_EQ(t.vocab_size(), 49152u);
  EXPECT_EQ(t.pre_tokenizer(), PreTokenizer::smollm);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_EQ(t.pad_id(), 2);
  EXPECT_EQ(t.token_text(1), "<|im_start|>");
  EXPECT_TRUE(t.is_end_of_generation(2));
  EXPECT_TRUE(t.is_end_of_generation(0));
  // ids as Hugging Face tokenizers gives them on this vocabulary (make_reference.py's tokenizer)
  EXPECT_EQ(t.encode("Hello, world!"), (std::vector<std::int32_t>{19556, 28, 905, 17}));
  EXPECT_EQ(t.encode(" 2024 naïve 日本 😀"),
            (std::vector<std::int32_t>{216, 34, 32, 34, 36, 15486, 46494, 17097, 241, 115, 40993,
                                       40303, 218}));
  const std::vector<ChatMessage> msgs{{"user", "What is 2+2?"}};
  const std::string prompt = t.apply_chat_template(msgs, true);
  EXPECT_EQ(prompt,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
  const auto ids = t.encode(prompt);
  EXPECT_EQ(t.decode(ids), prompt);
  const std::vector<std::int32_t> tail(ids.end() - 16, ids.end());
  EXPECT_EQ(tail, (std::vector<std::int32_t>{1, 4093, 198, 1780, 314, 216, 34, 27, 34, 47, 2, 198, 1,
                                             520, 9531, 198}));
  StreamDecoder d(t);
  std::string streamed;
  for (auto id : t.encode("streamed 日本語 text 😀!")) streamed += d.push(id);
  streamed += d.finish();
  EXPECT_EQ(streamed, "streamed 日本語 text 😀!");
}
