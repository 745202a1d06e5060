// A tokenizer's metadata written by the tests: GPT-2's byte alphabet, a small vocabulary with
// control tokens and merges, SmolLM2's chat template (test_tokenizer.cpp, tiny_model.hpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "llm/gguf_writer.hpp"
#include "llm/tokenizer_unicode.hpp"
#include "npugraph/llm/gguf.hpp"

namespace ngtest {

using npugraph::llm::GgufType;
namespace unicode = npugraph::llm::unicode;

// GPT-2's byte alphabet, as the file spells each byte.
inline std::string byte_char(unsigned b) {
  unsigned cp = b;
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
  if (!printable) {
    unsigned n = 256;
    for (unsigned x = 0; x < b; ++x)
      if (!((x >= '!' && x <= '~') || (x >= 0xa1 && x <= 0xac) || x >= 0xae)) ++n;
    cp = n;
  }
  std::string s;
  unicode::append_utf8(s, cp);
  return s;
}

inline const std::string kSmolTemplate =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] "
    "+ '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' "
    "}}{% endif %}";

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<std::int32_t> types;
  std::vector<std::string> merges;
  void add(const std::string& t, int type = 1) {
    tokens.push_back(t);
    types.push_back(type);
  }
};

// Ids: 0 <|endoftext|>, 1 <|im_start|>, 2 <|im_end|>, 3 <|im_start|>x (longer control token),
// 4 <user> (user-defined), then the 256 byte tokens, then the merge results.
inline Vocab small_vocab() {
  Vocab v;
  v.add("<|endoftext|>", 3);
  v.add("<|im_start|>", 3);
  v.add("<|im_end|>", 3);
  v.add("<|im_start|>x", 3);
  v.add("<user>", 4);
  for (unsigned b = 0; b < 256; ++b) v.add(byte_char(b));
  const std::string G = byte_char(' ');
  for (const auto& [l, r] : std::vector<std::pair<std::string, std::string>>{
           {G, "t"}, {"h", "e"}, {G + "t", "he"}, {"a", "a"}, {"b", "c"}, {"a", "b"}, {"aa", "a"},
           {"l", "l"}, {"e", "ll"}, {"h", "ell"}, {"hell", "o"}}) {
    v.merges.push_back(l + " " + r);
    v.add(l + r);
  }
  return v;
}

inline Bytes tokenizer_file(const Vocab& v, const std::string& pre = "smollm",
                             const std::string& chat = kSmolTemplate,
                             void (*extra)(GgufWriter&) = nullptr, bool add_bos = false) {
  GgufWriter w;
  w.str("tokenizer.ggml.model", "gpt2");
  w.str("tokenizer.ggml.pre", pre);
  w.str_array("tokenizer.ggml.tokens", v.tokens);
  w.array<std::int32_t>("tokenizer.ggml.token_type", GgufType::i32, v.types);
  w.str_array("tokenizer.ggml.merges", v.merges);
  w.u32("tokenizer.ggml.bos_token_id", 1);
  w.u32("tokenizer.ggml.eos_token_id", 2);
  w.u32("tokenizer.ggml.padding_token_id", 2);
  w.boolean("tokenizer.ggml.add_bos_token", add_bos);
  if (!chat.empty()) w.str("tokenizer.chat_template", chat);
  if (extra) extra(w);
  return w.build();
}

}  // namespace ngtest
