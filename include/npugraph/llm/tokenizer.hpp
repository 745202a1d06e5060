// The tokenizer a GGUF file carries: byte-level BPE ("gpt2" in tokenizer.ggml.model) with its
// pre-tokenizer (tokenizer.ggml.pre), or SentencePiece BPE ("llama": pieces with scores, byte
// fallback; Note [SentencePiece tokenizer] in src/llm/tokenizer_spm.cpp); special tokens and the
// chat template. What follows describes the byte-level BPE; SentencePiece differs as that Note says.
//
// encode: the text is split on special tokens first (control and user-defined tokens, longest match
// at the leftmost position), each other part is pre-tokenized (the regex split the `pre` type names,
// implemented by hand over Unicode classes), mapped byte by byte to GPT-2's printable alphabet and
// merged by BPE in merge-rank order. The result matches Hugging Face `tokenizers` on the same
// vocabulary (tests/python/llm). Invalid UTF-8 in the input is encoded byte for byte; a byte the
// vocabulary has no token for is dropped (as HF tokenizers and llama.cpp do), so such text does
// not round-trip.
//
// decode: ids -> bytes (the inverse byte mapping; special tokens as their text). `decode` replaces
// ill-formed UTF-8 with U+FFFD; `decode_bytes` gives the raw bytes; `StreamDecoder` gives text as
// tokens arrive, holding back a UTF-8 sequence that a later token may complete.
//
// A Tokenizer copies what it needs from the file (the GgufFile may be closed afterwards) and keeps no
// caches: its const members are safe to call from several threads at once. A StreamDecoder is one
// stream's state, for one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace npugraph::llm {

class GgufFile;

// llama.cpp's token types (tokenizer.ggml.token_type).
enum class TokenType : std::int32_t {
  undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

// The pre-tokenizers npugraph implements (tokenizer.ggml.pre); other names are refused at load.
enum class PreTokenizer {
  gpt2,    // "gpt2" (and "default"): GPT-2's regex split
  smollm,  // "smollm", "starcoder", "refact": every \p{N} on its own, then GPT-2's split
  qwen2,   // "qwen2", "deepseek-r1-qwen": Qwen's regex (case-insensitive contractions, single digits,
           // newlines kept with the whitespace and punctuation before them)
};

struct EncodeOptions {
  // Split on control tokens written in the text ("<|im_start|>"); when false they are plain text.
  // User-defined tokens are always matched, as llama.cpp does.
  bool parse_special = true;
  // Add BOS (and EOS) where the file's tokenizer.ggml.add_bos_token / add_eos_token ask for them.
  bool add_special = true;
};

struct DecodeOptions {
  bool skip_special = false;  // leave out control tokens (BOS, EOS, <|im_start|>...)
};

struct ChatMessage {
  std::string role;     // "system", "user", "assistant"
  std::string content;
};

// A chat template npugraph recognises in tokenizer.chat_template and renders natively (no Jinja).
// Recognised: ChatML ("<|im_start|>{role}\n{content}<|im_end|>\n" per message, "<|im_start|>assistant\n"
// as the generation prompt), with or without a default system message inserted when the first
// message is not a system one (SmolLM2's template); and Gemma 3's ("<start_of_turn>{user|model}\n
// {trimmed content}<end_of_turn>\n", a first system message prefixed to the first user turn with a
// blank line, roles alternating user/model — an ArgumentError otherwise — and "<start_of_turn>model\n"
// as the generation prompt; its leading {{ bos_token }} is left to the tokenizer's BOS). Matching
// ignores whitespace inside tags and follows Hugging Face's trim_blocks / lstrip_blocks; any other
// template is an ArgumentError.
class ChatTemplate {
 public:
  enum class Kind { chatml, chatml_default_system, gemma };

  // `source` is the Jinja text; `context` names the file in messages.
  static ChatTemplate detect(std::string_view source, std::string_view context);

  Kind kind() const noexcept { return kind_; }
  // chatml_default_system: the default system message; gemma: what follows a system message ("\n\n").
  const std::string& default_system() const noexcept { return default_system_; }
  std::string apply(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

 private:
  ChatTemplate(Kind kind, std::string default_system)
      : kind_(kind), default_system_(std::move(default_system)) {}
  Kind kind_;
  std::string default_system_;
};

class Tokenizer {
 public:
  // ArgumentError naming the file and key for anything missing, mistyped or unsupported: a model
  // other than "gpt2" or "llama", an unknown `pre` (gpt2), scores missing or of another length (llama), token/type arrays of different lengths, a merge whose parts
  // or result are not tokens, special ids out of range.
  static Tokenizer from_gguf(const GgufFile& file);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  std::vector<std::int32_t> encode(std::string_view text, EncodeOptions options = {}) const;
  std::string decode(std::span<const std::int32_t> ids, DecodeOptions options = {}) const;
  std::string decode_bytes(std::span<const std::int32_t> ids, DecodeOptions options = {}) const;

  // A lower bound on encode(text).size() in one pass over the bytes, without tokenising (Note [A
  // token count's lower bound]): what proves a prompt too long before the work of encoding it.
  std::size_t min_tokens(std::string_view text) const noexcept;
  std::size_t vocab_size() const noexcept;
  PreTokenizer pre_tokenizer() const noexcept;
  // The token as the vocabulary spells it ("Ġthe"), and as bytes ("the" with a leading space).
  // ArgumentError for ids out of range.
  std::string_view token_text(std::int32_t id) const;
  std::string token_bytes(std::int32_t id) const;
  TokenType token_type(std::int32_t id) const;
  std::optional<std::int32_t> token_id(std::string_view text) const noexcept;

  std::optional<std::int32_t> bos_id() const noexcept;
  std::optional<std::int32_t> eos_id() const noexcept;
  std::optional<std::int32_t> pad_id() const noexcept;
  // End of generation: EOS, EOT (tokenizer.ggml.eot_token_id) and the control tokens that end a turn
  // in the common templates (<|im_end|>, <|endoftext|>, <|eot_id|>, <end_of_turn>).
  bool is_end_of_generation(std::int32_t id) const noexcept;

  // The file's chat template; ArgumentError when the file has none or one npugraph does not render.
  const ChatTemplate& chat_template() const;
  std::string apply_chat_template(std::span<const ChatMessage> messages,
                                  bool add_generation_prompt) const {
    return chat_template().apply(messages, add_generation_prompt);
  }

  struct State;

 private:
  explicit Tokenizer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Text from a stream of tokens: push() returns what became complete UTF-8 (possibly empty),
// finish() the rest (an incomplete tail as U+FFFD). Keeps a reference to the tokenizer.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, DecodeOptions options = {})
      : tokenizer_(&tokenizer), options_(options) {}
  std::string push(std::int32_t id);
  std::string finish();

 private:
  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  std::string pending_;
};

}  // namespace npugraph::llm
