// The tokenizer on a small vocabulary the tests write: pre-tokenizer splits, BPE merge order, special
// tokens, decoding (whole and streamed), UTF-8 repair, chat templates, and malformed tokenizer metadata.
// tests/python/llm checks the same code against Hugging Face `tokenizers` on the real vocabulary.
#include <gtest/gtest.h>

#include <random>

#include "llm/gguf_writer.hpp"
#include "llm/tokenizer_file.hpp"
#include "llm/tokenizer_pretokenize.hpp"
#include "llm/tokenizer_unicode.hpp"
#include "npugraph/llm/gguf.hpp"
#include "npugraph/llm/tokenizer.hpp"
#include "npugraph/error.hpp"
#include "support/throws.hpp"

using namespace npugraph;
using namespace npugraph::llm;
using ngtest::GgufWriter;
using ngtest::byte_char;
using ngtest::kSmolTemplate;
using ngtest::small_vocab;
using ngtest::tokenizer_file;
using ngtest::Vocab;

namespace {

#define EXPECT_ARG_ERROR(stmt, ...) \
  EXPECT_TRUE(ngtest::throws<ArgumentError>([&] { (void)(stmt); }, {__VA_ARGS__}))

Tokenizer small_tokenizer(const std::string& pre = "smollm") {
  const GgufFile f = GgufFile::from_bytes(tokenizer_file(small_vocab(), pre), "tok.gguf");
  return Tokenizer::from_gguf(f);
}

std::vector<std::string> split(PreTokenizer kind, std::string_view text) {
  std::vector<std::string_view> pieces;
  pre_tokenize(kind, text, pieces);
  return {pieces.begin(), pieces.end()};
}

using Pieces = std::vector<std::string>;

}  // namespace

TEST(TokenizerPreSplit, Gpt2Pattern) {
  const auto g = PreTokenizer::gpt2;
  EXPECT_EQ(split(g, "Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split(g, "I'm don't we're they've I'll he'd it's"),
            (Pieces{"I", "'m", " don", "'t", " we", "'re", " they", "'ve", " I", "'ll", " he", "'d",
                    " it", "'s"}));
  EXPECT_EQ(split(g, "'S 'sound"), (Pieces{"'", "S", " '", "sound"}));  // case-sensitive; ' then s
  EXPECT_EQ(split(g, "!!'s"), (Pieces{"!!'", "s"}));                     // first alternative wins
  EXPECT_EQ(split(g, "a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(split(g, "a \n b"), (Pieces{"a", " \n", " b"}));
  EXPECT_EQ(split(g, "x   "), (Pieces{"x", "   "}));
  EXPECT_EQ(split(g, "\t\tfoo"), (Pieces{"\t", "\t", "foo"}));
  EXPECT_EQ(split(g, "\n\n\nfoo\n"), (Pieces{"\n\n", "\n", "foo", "\n"}));
  EXPECT_EQ(split(g, "12345 abc 7"), (Pieces{"12345", " abc", " 7"}));
  EXPECT_EQ(split(g, " !! ?"), (Pieces{" !!", " ?"}));
  EXPECT_EQ(split(g, "héllo wörld"), (Pieces{"héllo", " wörld"}));
  EXPECT_EQ(split(g, "日本語テキスト 中文"), (Pieces{"日本語テキスト", " 中文"}));
  EXPECT_EQ(split(g, "emoji 😀😀!"), (Pieces{"emoji", " 😀😀!"}));
  EXPECT_EQ(split(g, "a\u00a0b"), (Pieces{"a", "\u00a0", "b"}));  // NBSP is \s
  EXPECT_EQ(split(g, "a\x1c b"), (Pieces{"a", "\x1c", " b"}));     // U+001C is not
  EXPECT_EQ(split(g, "\xff\xfe" "ab"), (Pieces{"\xff\xfe", "ab"}));  // invalid bytes: "other"
  EXPECT_EQ(split(g, ""), Pieces{});
  EXPECT_EQ(split(g, " "), Pieces{" "});
}

TEST(TokenizerPreSplit, SmollmIsolatesEveryNumber) {
  const auto s = PreTokenizer::smollm;
  EXPECT_EQ(split(s, "12345 abc"), (Pieces{"1", "2", "3", "4", "5", " abc"}));
  EXPECT_EQ(split(s, " 42"), (Pieces{" ", "4", "2"}));
  EXPECT_EQ(split(s, "x1y"), (Pieces{"x", "1", "y"}));
  EXPECT_EQ(split(s, "v2.0-rc1"), (Pieces{"v", "2", ".", "0", "-", "rc", "1"}));
  EXPECT_EQ(split(s, "٣½Ⅻ"), (Pieces{"٣", "½", "Ⅻ"}));  // Nd, No, Nl
  EXPECT_EQ(split(s, "I'm 3"), (Pieces{"I", "'m", " ", "3"}));
}

TEST(TokenizerUnicode, ClassesAndUtf8Repair) {
  using unicode::CodepointClass;
  EXPECT_EQ(unicode::classify('a'), CodepointClass::letter);
  EXPECT_EQ(unicode::classify(0x4E2D), CodepointClass::letter);  // 中
  EXPECT_EQ(unicode::classify(0x0663), CodepointClass::number);  // ٣
  EXPECT_EQ(unicode::classify(0x3000), CodepointClass::space);
  EXPECT_EQ(unicode::classify(0x1F600), CodepointClass::other);  // 😀
  EXPECT_EQ(unicode::classify(0x1C), CodepointClass::other);
  EXPECT_EQ(unicode::classify(unicode::kInvalid), CodepointClass::other);
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(unicode::to_valid_utf8("ok é"), "ok é");
  EXPECT_EQ(unicode::to_valid_utf8("\xC3"), fffd);
  EXPECT_EQ(unicode::to_valid_utf8("\xE2\x82"), fffd);                 // one maximal subpart
  EXPECT_EQ(unicode::to_valid_utf8("\xE2\x82" "A"), fffd + "A");
  EXPECT_EQ(unicode::to_valid_utf8("\xED\xA0\x80"), fffd + fffd + fffd);  // a surrogate
  EXPECT_EQ(unicode::to_valid_utf8("\xC0\xAF"), fffd + fffd);          // overlong
  EXPECT_EQ(unicode::to_valid_utf8("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // > U+10FFFF
  bool more = false;
  EXPECT_EQ(unicode::complete_prefix("ab\xF0\x9F\x98", more), 2u);
  EXPECT_TRUE(more);
  EXPECT_EQ(unicode::complete_prefix("ab\xFF", more), 3u);
  EXPECT_FALSE(more);
  EXPECT_EQ(unicode::complete_prefix("\xE2\x82" "A", more), 3u);
  EXPECT_FALSE(more);
}

TEST(TokenizerBpe, MergesByRankLeftmostFirst) {
  const Tokenizer t = small_tokenizer("gpt2");
  auto text = [&](const std::vector<std::int32_t>& ids) {
    std::vector<std::string> out;
    for (auto id : ids) out.emplace_back(t.token_text(id));
    return out;
  };
  const std::string G = byte_char(' ');
  EXPECT_EQ(text(t.encode("the")), (Pieces{"t", "he"}));
  EXPECT_EQ(text(t.encode(" the")), (Pieces{G + "the"}));
  EXPECT_EQ(text(t.encode("aaa")), (Pieces{"aaa"}));     // a a (rank 3) then aa a (rank 6)
  EXPECT_EQ(text(t.encode("aaaa")), (Pieces{"aa", "aa"}));  // a a (3) at 0, then a a (3) before aa a (6)
  EXPECT_EQ(text(t.encode("abc")), (Pieces{"a", "bc"}));  // b c (rank 4) before a b (rank 5)
  EXPECT_EQ(text(t.encode("hello")), (Pieces{"he", "ll", "o"}));  // h e (1) takes the e that e ll wanted
  EXPECT_EQ(text(t.encode("héllo")), (Pieces{"h", byte_char(0xC3), byte_char(0xA9), "ll", "o"}));
  EXPECT_TRUE(t.encode("").empty());
  EXPECT_EQ(t.vocab_size(), 5u + 256u + 11u);
  EXPECT_EQ(t.pre_tokenizer(), PreTokenizer::gpt2);
}

TEST(TokenizerSpecial, ControlTokensMatchLongestFirstAndOnlyWhenAsked) {
  const Tokenizer t = small_tokenizer();
  EXPECT_EQ(t.encode("<|im_start|>"), (std::vector<std::int32_t>{1}));
  EXPECT_EQ(t.encode("<|im_start|>x"), (std::vector<std::int32_t>{3}));  // longest at the position
  const auto ids = t.encode("<|im_start|>user<|im_end|><|endoftext|>");
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids[ids.size() - 2], 2);
  EXPECT_EQ(ids.back(), 0);
  EXPECT_EQ(t.decode(ids), "<|im_start|>user<|im_end|><|endoftext|>");
  EXPECT_EQ(t.decode(ids, {.skip_special = true}), "user");
  const auto plain = t.encode("<|im_end|>", {.parse_special = false});
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(t.decode(plain), "<|im_end|>");
  // user-defined tokens are matched either way, and decode to their text
  EXPECT_EQ(t.encode("<user>", {.parse_special = false}), (std::vector<std::int32_t>{4}));
  EXPECT_EQ(t.decode(std::vector<std::int32_t>{4}, {.skip_special = true}), "<user>");
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_EQ(t.pad_id(), 2);
  EXPECT_TRUE(t.is_end_of_generation(2));
  EXPECT_TRUE(t.is_end_of_generation(0));   // <|endoftext|>
  EXPECT_FALSE(t.is_end_of_generation(1));
  EXPECT_EQ(t.token_type(1), TokenType::control);
  EXPECT_EQ(t.token_id("<|im_end|>"), 2);
  EXPECT_FALSE(t.token_id("nope").has_value());
  EXPECT_ARG_ERROR(t.token_text(-1), "token id -1");
  EXPECT_ARG_ERROR(t.decode(std::vector<std::int32_t>{100000}), "token id 100000", "tok.gguf");
}

TEST(TokenizerDecode, RoundTripsAnyBytes) {
  const Tokenizer t = small_tokenizer();
  for (std::string s : {std::string("hello world"), std::string(" the  aaa\t\n12 3"),
                        std::string("naïve café 日本語 😀👨‍👩‍👧"),
                        std::string("\x00\x01\x7f\xff\xc3", 5), std::string("<|im_start|>a<|im_end|>\n")}) {
    const auto ids = t.encode(s);
    EXPECT_EQ(t.decode_bytes(ids), s);
    if (s.find('\xff') == std::string::npos) {
      EXPECT_EQ(t.decode(ids), s);
    }
  }
  EXPECT_EQ(t.decode(t.encode(std::string("a\xff", 2))), "a\xEF\xBF\xBD");
  EXPECT_EQ(t.token_bytes(*t.token_id(byte_char(' ') + "the")), " the");
}

// Note [A token count's lower bound]: min_tokens never exceeds what encode() gives, on text of every
// kind (pieces of the vocabulary, specials, bytes the vocabulary drops, random bytes), and it grows
// with the text (what lets a server refuse a 4 MB prompt without tokenising it).
void expect_min_tokens_bound(const Tokenizer& t, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<std::string> parts{"the", " the", "aaa", "12 3", "<|im_start|>", "<|im_end|>", "\n",
                                       "caf\xc3\xa9", std::string("\x00\x04\xff", 3), "\xe6\x97\xa5", " "};
  for (int trial = 0; trial < 300; ++trial) {
    std::string s;
    const int n = static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) {
      if (rng() % 4 == 0) s.push_back(static_cast<char>(rng() % 256));
      else s += parts[rng() % parts.size()];
    }
    const std::size_t at_least = t.min_tokens(s), encoded = t.encode(s, {.add_special = false}).size();
    EXPECT_LE(at_least, encoded) << "text of " << s.size() << " bytes, seed " << seed << " trial " << trial;
  }
  const std::string long_text(100000, 'a');
  EXPECT_GE(t.min_tokens(long_text), 1000u);  // no token here is longer than 100 bytes
  EXPECT_LE(t.min_tokens(long_text), t.encode(long_text).size());
}

TEST(TokenizerBound, MinTokensIsALowerBoundOfEncode) {
  expect_min_tokens_bound(small_tokenizer(), 1);
  expect_min_tokens_bound(small_tokenizer("gpt2"), 2);
}

TEST(TokenizerDecode, StreamingHoldsIncompleteUtf8) {
  const Tokenizer t = small_tokenizer();
  const std::string text = "é😀x";
  const auto ids = t.encode(text);  // one token per byte: no merges cover these
  ASSERT_EQ(ids.size(), 7u);
  StreamDecoder d(t);
  std::vector<std::string> out;
  for (auto id : ids) out.push_back(d.push(id));
  EXPECT_EQ(out, (std::vector<std::string>{"", "é", "", "", "", "😀", "x"}));
  EXPECT_EQ(d.finish(), "");
  // a cut-off sequence comes out as U+FFFD at the end; a byte that can never start one at once
  StreamDecoder e(t);
  EXPECT_EQ(e.push(ids[2]), "");
  EXPECT_EQ(e.push(ids[3]), "");
  EXPECT_EQ(e.finish(), "\xEF\xBF\xBD");
  const auto bad = t.encode(std::string("\xff", 1));
  EXPECT_EQ(e.push(bad[0]), "\xEF\xBF\xBD");
  StreamDecoder s(t, {.skip_special = true});
  EXPECT_EQ(s.push(1), "");
  EXPECT_EQ(s.push(ids[6]), "x");
}

TEST(TokenizerChat, SmolLM2TemplateIsRecognisedAndRendered) {
  const Tokenizer t = small_tokenizer();
  const ChatTemplate& c = t.chat_template();
  EXPECT_EQ(c.kind(), ChatTemplate::Kind::chatml_default_system);
  EXPECT_EQ(c.default_system(), "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  const std::vector<ChatMessage> user{{"user", "Hi!"}};
  EXPECT_EQ(t.apply_chat_template(user, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<ChatMessage> convo{{"system", "Be brief."}, {"user", "2+2?"}, {"assistant", "4"}};
  EXPECT_EQ(t.apply_chat_template(convo, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n4<|im_end|>\n");
  EXPECT_EQ(t.apply_chat_template({}, true), "<|im_start|>assistant\n");
  EXPECT_EQ(t.apply_chat_template({}, false), "");
}

// Gemma 3's template (google/gemma-3-4b-it's tokenizer_config.json), here on one line with
// single-quoted strings; rendered as Hugging Face's Jinja renders it, less the leading BOS text
// (the tokenizer adds BOS).
std::string gemma_template(const std::string& sep) {
  return "{{ bos_token }} {%- if messages[0]['role'] == 'system' -%} {%- if messages[0]['content'] is string -%} "
         "{%- set first_user_prefix = messages[0]['content'] + '" + sep + "' -%} {%- else -%} {%- set "
         "first_user_prefix = messages[0]['content'][0]['text'] + '" + sep + "' -%} {%- endif -%} {%- set "
         "loop_messages = messages[1:] -%} {%- else -%} {%- set first_user_prefix = '' -%} {%- set loop_messages = "
         "messages -%} {%- endif -%} {%- for message in loop_messages -%} {%- if (message['role'] == 'user') != "
         "(loop.index0 % 2 == 0) -%} {{ raise_exception('Conversation roles must alternate "
         "user/assistant/user/assistant/...') }} {%- endif -%} {%- if (message['role'] == 'assistant') -%} {%- set "
         "role = 'model' -%} {%- else -%} {%- set role = message['role'] -%} {%- endif -%} {{ '<start_of_turn>' + "
         "role + '\\n' + (first_user_prefix if loop.first else '') }} {%- if message['content'] is string -%} {{ "
         "message['content'] | trim }} {%- elif message['content'] is iterable -%} {%- for item in "
         "message['content'] -%} {%- if item['type'] == 'image' -%} {{ '<start_of_image>' }} {%- elif "
         "item['type'] == 'text' -%} {{ item['text'] | trim }} {%- endif -%} {%- endfor -%} {%- else -%} {{ "
         "raise_exception('Invalid content type') }} {%- endif -%} {{ '<end_of_turn>\\n' }} {%- endfor -%} {%- if "
         "add_generation_prompt -%} {{'<start_of_turn>model\\n'}} {%- endif -%}";
}

TEST(TokenizerChat, GemmaTemplateRendersTurnsAndRefusesNonAlternatingRoles) {
  const ChatTemplate g = ChatTemplate::detect(gemma_template("\\n\\n"), "gemma-3-1b-it.gguf");
  ASSERT_EQ(g.kind(), ChatTemplate::Kind::gemma);
  const std::vector<ChatMessage> convo{{"system", "Be brief."},
                                       {"user", "  Hi there \n"},
                                       {"assistant", "Hello!"},
                                       {"user", "Colors?"}};
  EXPECT_EQ(g.apply(convo, true),
            "<start_of_turn>user\nBe brief.\n\nHi there<end_of_turn>\n"
            "<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nColors?<end_of_turn>\n<start_of_turn>model\n");
  const std::vector<ChatMessage> user{{"user", "Hi"}};
  EXPECT_EQ(g.apply(user, false), "<start_of_turn>user\nHi<end_of_turn>\n");
  EXPECT_EQ(g.apply({}, true), "<start_of_turn>model\n");
  // The variant with one newline after the system message.
  const ChatTemplate g1 = ChatTemplate::detect(gemma_template("\\n"), "g.gguf");
  ASSERT_EQ(g1.kind(), ChatTemplate::Kind::gemma);
  const std::vector<ChatMessage> sys_user{{"system", "S"}, {"user", "U"}};
  EXPECT_EQ(g1.apply(sys_user, true), "<start_of_turn>user\nS\nU<end_of_turn>\n<start_of_turn>model\n");
  // Roles must alternate user / assistant (the template's raise_exception).
  const std::vector<ChatMessage> two_users{{"user", "a"}, {"user", "b"}};
  EXPECT_ARG_ERROR(g.apply(two_users, true), "chat template (Gemma 3): messages[1].role = 'user'",
                   "conversation roles must alternate user/assistant");
  const std::vector<ChatMessage> assistant_first{{"system", "s"}, {"assistant", "a"}};
  EXPECT_ARG_ERROR(g.apply(assistant_first, true), "messages[1].role = 'assistant'");
  // Another separator is another template.
  EXPECT_ARG_ERROR(ChatTemplate::detect(gemma_template("\\n\\n\\n"), "g.gguf"), "not a template npugraph renders");
}

TEST(TokenizerChat, DetectionIgnoresLayoutButNotMeaning) {
  const ChatTemplate plain = ChatTemplate::detect(
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
      "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' "
      "}}{% endif %}",
      "x.gguf");
  EXPECT_EQ(plain.kind(), ChatTemplate::Kind::chatml);
  const std::vector<ChatMessage> user{{"user", "Hi"}};
  EXPECT_EQ(plain.apply(user, true), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // Same template laid out on lines, double quotes, escapes, whitespace control and a comment.
  const ChatTemplate spaced = ChatTemplate::detect(
      "{# SmolLM2 #}\n{%- for message in messages -%}\n  {%- if loop.first and messages[0]['role'] "
      "!= \"system\" %}\n{{ \"<|im_start|>system\\nBe nice, \\\"friend\\\"<|im_end|>\\n\" }}\n  {%- "
      "endif %}\n{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
      "'\\n' -}}\n{% endfor %}\n{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% "
      "endif %}",
      "x.gguf");
  EXPECT_EQ(spaced.kind(), ChatTemplate::Kind::chatml_default_system);
  EXPECT_EQ(spaced.default_system(), "Be nice, \"friend\"");
  // Output text between tags changes what renders: not the same template.
  EXPECT_ARG_ERROR(ChatTemplate::detect(
                       "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                       "message['content'] + '<|im_end|>' + '\\n'}}\n{% endfor %}{% if "
                       "add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
                       "x.gguf"),
                   "x.gguf", "not a template npugraph renders");
  EXPECT_ARG_ERROR(ChatTemplate::detect("{{ bos_token }}{% for message in messages %}{{ "
                                        "'<|start_header_id|>' + message['role'] }}{% endfor %}",
                                        "llama3.gguf"),
                   "llama3.gguf", "tokenizer.chat_template", "<|start_header_id|>");
  EXPECT_ARG_ERROR(ChatTemplate::detect("{{ 'unterminated }}", "x.gguf"), "not a template");
}

TEST(TokenizerChat, MissingOrUnsupportedTemplateIsReportedOnUse) {
  const GgufFile f = GgufFile::from_bytes(tokenizer_file(small_vocab(), "smollm", ""), "nochat.gguf");
  const Tokenizer t = Tokenizer::from_gguf(f);
  EXPECT_FALSE(t.encode("works anyway").empty());
  EXPECT_ARG_ERROR(t.chat_template(), "nochat.gguf", "no tokenizer.chat_template");
  const GgufFile g =
      GgufFile::from_bytes(tokenizer_file(small_vocab(), "smollm", "{{ messages }}"), "odd.gguf");
  EXPECT_ARG_ERROR(Tokenizer::from_gguf(g).chat_template(), "odd.gguf", "{{ messages }}");
}

// SentencePiece BPE (Note [SentencePiece tokenizer]) on a hand-made vocabulary: the highest score
// merges first, a character without a piece falls back to its <0xXX> byte token or to <unk>.
TEST(TokenizerSpm, HandMadeVocabulary) {
  GgufWriter w;
  w.str("tokenizer.ggml.model", "llama");
  w.str_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "<0x7A>", "\xe2\x96\x81", "a", "b",
                                        "\xe2\x96\x81" "a", "ab", "\xe2\x96\x81" "ab"});
  w.array<float>("tokenizer.ggml.scores", GgufType::f32, {0, 0, 0, 0, -10, -1, -2, -5, -3, -4});
  w.array<std::int32_t>("tokenizer.ggml.token_type", GgufType::i32, {2, 3, 3, 6, 1, 1, 1, 1, 1, 1});
  w.u32("tokenizer.ggml.bos_token_id", 1);
  w.u32("tokenizer.ggml.eos_token_id", 2);
  w.u32("tokenizer.ggml.unknown_token_id", 0);
  const Tokenizer t = Tokenizer::from_gguf(GgufFile::from_bytes(w.build(), "spm.gguf"));
  using Ids = std::vector<std::int32_t>;
  const EncodeOptions plain{.add_special = false};
  EXPECT_EQ(t.encode("ab", plain), (Ids{9}));  // "ab" (-3) before "▁a" (-5), then "▁ab" (-4)
  EXPECT_EQ(t.encode("ba", plain), (Ids{4, 6, 5}));
  EXPECT_EQ(t.encode("az", plain), (Ids{7, 3}));  // z: byte fallback
  EXPECT_EQ(t.encode("\xc3\xa4", plain), (Ids{4, 0, 0}));  // no byte tokens for C3 A4: <unk> each
  EXPECT_EQ(t.encode("ab</s>ba"), (Ids{1, 9, 2, 4, 6, 5}));  // BOS by default; a prefix per stretch
  EXPECT_EQ(t.decode(Ids{7, 3, 2, 9}), " az</s> ab");
  EXPECT_EQ(t.decode(Ids{7, 3, 2, 9}, {.skip_special = true}), " az ab");
  for (const std::string text : {"ab", "ba", "az", "\xc3\xa4", "ab</s>ba", "abababab zzz"})
    EXPECT_LE(t.min_tokens(text), t.encode(text, plain).size()) << text;
  // 'z' is encodable (<0x7A>); the longest token is the 6 bytes of "<0x7A>" (spelled, not meant: a
  // safe over-estimate of what one token covers), so 100 z's are at least ceil(100 / 6) tokens.
  EXPECT_EQ(t.min_tokens(std::string(100, 'z')), 17u);
}

TEST(TokenizerLoad, MalformedMetadataIsNamed) {
  auto load = [](const ngtest::Bytes& b) { return Tokenizer::from_gguf(GgufFile::from_bytes(b, "bad.gguf")); };
  {
    GgufWriter w;
    w.str("tokenizer.ggml.model", "bert");
    EXPECT_ARG_ERROR(load(w.build()), "bad.gguf", "tokenizer.ggml.model is 'bert'",
                     "byte-level BPE ('gpt2') and SentencePiece BPE ('llama')");
  }
  {  // SentencePiece: scores for every token
    GgufWriter w;
    w.str("tokenizer.ggml.model", "llama");
    w.str_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "a"});
    w.array<float>("tokenizer.ggml.scores", GgufType::f32, {0.0f, 0.0f});
    EXPECT_ARG_ERROR(load(w.build()), "bad.gguf", "tokenizer.ggml.scores has 2 entries for 3 tokens");
  }
  EXPECT_ARG_ERROR(load(tokenizer_file(small_vocab(), "falcon")), "bad.gguf",
                   "tokenizer.ggml.pre is 'falcon'");
  {
    GgufWriter w;
    w.str("tokenizer.ggml.model", "gpt2");
    EXPECT_ARG_ERROR(load(w.build()), "missing key 'tokenizer.ggml.tokens'");
  }
  {
    Vocab v = small_vocab();
    v.types.pop_back();
    EXPECT_ARG_ERROR(load(tokenizer_file(v)), "tokenizer.ggml.token_type has 271 entries for 272");
  }
  {
    Vocab v = small_vocab();
    v.merges.push_back("zz qq");
    EXPECT_ARG_ERROR(load(tokenizer_file(v)), "merge 11 'zz qq'", "not in the vocabulary");
    v.merges.back() = "nospace";
    EXPECT_ARG_ERROR(load(tokenizer_file(v)), "merge 11 'nospace'", "two tokens");
  }
  EXPECT_ARG_ERROR(load(tokenizer_file(small_vocab(), "smollm", kSmolTemplate,
                                       [](GgufWriter& w) { w.u32("tokenizer.ggml.eot_token_id", 999); })),
                   "tokenizer.ggml.eot_token_id is 999", "272 tokens");
  EXPECT_ARG_ERROR(load(tokenizer_file(small_vocab(), "smollm", kSmolTemplate,
                                       [](GgufWriter& w) { w.str("tokenizer.ggml.eot_token_id", "x"); })),
                   "'tokenizer.ggml.eot_token_id' is string");
}

TEST(TokenizerBpe, BytesWithoutATokenAreDropped) {
  Vocab v = small_vocab();
  v.tokens[5] = "not-a-byte";  // the token for byte 0x00: now absent
  v.tokens[5 + 'z'] = "not-z";
  const GgufFile f = GgufFile::from_bytes(tokenizer_file(v, "gpt2"), "holes.gguf");
  const Tokenizer t = Tokenizer::from_gguf(f);
  EXPECT_EQ(t.decode(t.encode(std::string("\0a\0", 3))), "a");
  // the neighbours of a dropped byte become adjacent and may merge (as in HF tokenizers)
  const auto ids = t.encode("aza");  // z gone: a a, merged
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(t.token_text(ids[0]), "aa");
  EXPECT_TRUE(t.encode(std::string("\0", 1)).empty());
}

TEST(TokenizerLoad, AddsBosWhenTheFileSaysSo) {
  const GgufFile f = GgufFile::from_bytes(
      tokenizer_file(small_vocab(), "smollm", kSmolTemplate, nullptr, /*add_bos=*/true),
      "bos.gguf");
  const Tokenizer t = Tokenizer::from_gguf(f);
  EXPECT_EQ(t.encode("a").front(), 1);
  EXPECT_EQ(t.encode("a", {.add_special = false}).size(), 1u);
}
