// Byte-level BPE from GGUF metadata: vocabulary, merges, special tokens; encode and decode.
#include "npugraph/llm/tokenizer.hpp"

#include <algorithm>
#include <array>
#include <queue>
#include <unordered_map>

#include "llm/tokenizer_pretokenize.hpp"
#include "llm/tokenizer_spm.hpp"
#include "llm/tokenizer_unicode.hpp"
#include "npugraph/error.hpp"
#include "npugraph/llm/gguf.hpp"

namespace npugraph::llm {
namespace {

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes (controls,
// space, DEL, NBSP, soft hyphen...) for U+0100 onwards, in byte order.
std::array<std::uint32_t, 256> byte_to_codepoint() {
  std::array<std::uint32_t, 256> map{};
  std::uint32_t next = 256;
  for (std::uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
    map[b] = printable ? b : next++;
  }
  return map;
}

struct PairHash {
  std::size_t operator()(std::uint64_t k) const noexcept { return std::hash<std::uint64_t>{}(k * 0x9E3779B97F4A7C15ull); }
};
std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

struct Merge {
  std::int32_t rank;
  std::int32_t result;
};

}  // namespace

struct Tokenizer::State {
  std::string file;
  PreTokenizer pre = PreTokenizer::gpt2;
  std::vector<std::string> tokens;
  std::vector<TokenType> types;
  std::unordered_map<std::string, std::int32_t> ids;
  std::unordered_map<std::uint64_t, Merge, PairHash> merges;
  std::array<std::int32_t, 256> byte_token{};     // the single-character token of each byte
  std::array<std::uint32_t, 256> byte_cp{};       // byte -> its stand-in code point
  std::unordered_map<std::uint32_t, std::uint8_t> cp_byte;  // and back
  // Tokens matched in the text before BPE: by first byte, longest first.
  std::array<std::vector<std::int32_t>, 256> special_by_byte;
  std::optional<std::int32_t> bos, eos, pad, eot;
  bool add_bos = false, add_eos = false;
  std::vector<std::int32_t> end_of_generation;
  std::optional<ChatTemplate> chat;
  std::string chat_error;
  // SentencePiece ("llama"; Note [SentencePiece tokenizer]): scores instead of merges.
  bool spm = false;
  bool add_space_prefix = true;
  std::vector<float> scores;
  spm::Vocab spm_vocab;
  // Note [A token count's lower bound]: the most input bytes one token covers (the longest token's
  // bytes or text, specials included), and the bytes encode() can turn into tokens at all (a byte
  // with no single-byte token and no SentencePiece byte token may be dropped). Every token covers at
  // most max_token_bytes of the encodable bytes, so encode(text) has at least
  // ceil(encodable bytes / max_token_bytes) tokens: a prompt proved too long for the context by
  // that count is refused without tokenising it (Engine::prepare), in time linear in its bytes.
  std::size_t max_token_bytes = 1;
  std::array<bool, 256> encodable{};

  void bpe(std::string_view piece, std::vector<std::int32_t>& out) const;
  // One stretch of text between special tokens (SentencePiece: each gets the dummy prefix).
  void encode_plain(std::string_view text, std::vector<std::int32_t>& out) const;
  void append_bytes(std::int32_t id, std::string& out, const DecodeOptions& options) const;
};

Tokenizer::Tokenizer(std::unique_ptr<State> state) : state_(std::move(state)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_gguf(const GgufFile& file) {
  auto s = std::make_unique<State>();
  s->file = file.name();
  const std::string& f = s->file;

  const auto model = file.get<std::string>("tokenizer.ggml.model");
  NG_CHECK_ARG(model == "gpt2" || model == "llama", "GGUF file '", f, "': tokenizer.ggml.model is '", model,
               "'; npugraph reads byte-level BPE ('gpt2') and SentencePiece BPE ('llama') tokenizers");
  s->spm = model == "llama";
  const auto pre = file.get_or<std::string>("tokenizer.ggml.pre", "default");
  if (s->spm) s->pre = PreTokenizer::gpt2;  // not used: SentencePiece splits on nothing but specials
  else if (pre == "default" || pre == "gpt2") s->pre = PreTokenizer::gpt2;
  else if (pre == "smollm" || pre == "starcoder" || pre == "refact") s->pre = PreTokenizer::smollm;
  else if (pre == "qwen2" || pre == "deepseek-r1-qwen") s->pre = PreTokenizer::qwen2;
  else
    NG_THROW(ArgumentError, "GGUF file '", f, "': tokenizer.ggml.pre is '", pre,
             "'; npugraph implements 'gpt2', 'default', 'smollm', 'starcoder', 'refact', 'qwen2' and "
             "'deepseek-r1-qwen'");

  s->tokens = file.get<std::vector<std::string>>("tokenizer.ggml.tokens");
  const std::size_t n = s->tokens.size();
  NG_CHECK_ARG(n > 0 && n <= static_cast<std::size_t>(INT32_MAX), "GGUF file '", f,
               "': tokenizer.ggml.tokens has ", n, " tokens");
  if (auto types = file.find<std::vector<std::int32_t>>("tokenizer.ggml.token_type")) {
    NG_CHECK_ARG(types->size() == n, "GGUF file '", f, "': tokenizer.ggml.token_type has ",
                 types->size(), " entries for ", n, " tokens");
    s->types.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::int32_t t = (*types)[i];
      NG_CHECK_ARG(t >= 0 && t <= 6, "GGUF file '", f, "': token ", i, " has type ", t, " (0 to 6)");
      s->types.push_back(static_cast<TokenType>(t));
    }
  } else {
    s->types.assign(n, TokenType::normal);
  }
  s->ids.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    // Duplicates: the first id wins, as in llama.cpp.
    s->ids.emplace(s->tokens[i], static_cast<std::int32_t>(i));
  }

  if (s->spm) {
    s->scores = file.get<std::vector<float>>("tokenizer.ggml.scores");
    NG_CHECK_ARG(s->scores.size() == n, "GGUF file '", f, "': tokenizer.ggml.scores has ", s->scores.size(),
                 " entries for ", n, " tokens");
    s->add_space_prefix = file.get_or<bool>("tokenizer.ggml.add_space_prefix", true);
    s->spm_vocab.ids = &s->ids;
    s->spm_vocab.scores = &s->scores;
    s->spm_vocab.types = &s->types;
    s->spm_vocab.byte_token.fill(-1);
    for (std::size_t i = 0; i < n; ++i)
      if (const int b = spm::byte_value(s->tokens[i]); b >= 0 && s->types[i] == TokenType::byte &&
                                                      s->spm_vocab.byte_token[b] < 0)
        s->spm_vocab.byte_token[b] = static_cast<std::int32_t>(i);
  }

  // Bytes whose token the vocabulary lacks (SmolLM2's has none for 21 bytes that text rarely or never
  // holds: 0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2, 0xF5..0xFF) are dropped by
  // encode, as Hugging Face tokenizers (with no unk token) and llama.cpp drop them. As in HF, the
  // bytes either side then become neighbours that may merge (llama.cpp keeps them apart).
  s->byte_cp = byte_to_codepoint();
  for (std::uint32_t b = 0; b < 256; ++b) {
    s->cp_byte.emplace(s->byte_cp[b], static_cast<std::uint8_t>(b));
    std::string ch;
    unicode::append_utf8(ch, s->byte_cp[b]);
    auto it = s->ids.find(ch);
    s->byte_token[b] = it == s->ids.end() ? -1 : it->second;
  }

  const auto merges = s->spm ? std::vector<std::string>{} : file.get<std::vector<std::string>>("tokenizer.ggml.merges");
  NG_CHECK_ARG(merges.size() <= static_cast<std::size_t>(INT32_MAX), "GGUF file '", f,
               "': too many merges");
  s->merges.reserve(merges.size());
  for (std::size_t r = 0; r < merges.size(); ++r) {
    const std::string& m = merges[r];
    const std::size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    NG_CHECK_ARG(sp != std::string::npos && sp + 1 < m.size(), "GGUF file '", f, "': merge ", r,
                 " '", m, "' is not two tokens separated by a space");
    const std::string left = m.substr(0, sp), right = m.substr(sp + 1);
    auto l = s->ids.find(left), rt = s->ids.find(right), res = s->ids.find(left + right);
    NG_CHECK_ARG(l != s->ids.end() && rt != s->ids.end() && res != s->ids.end(), "GGUF file '", f,
                 "': merge ", r, " '", m, "' names a token that is not in the vocabulary");
    // A repeated pair keeps its first (lowest) rank.
    s->merges.emplace(pair_key(l->second, rt->second),
                      Merge{static_cast<std::int32_t>(r), res->second});
  }

  auto special_id = [&](const char* key) -> std::optional<std::int32_t> {
    auto v = file.find<std::uint32_t>(key);
    if (!v) return std::nullopt;
    NG_CHECK_ARG(*v < n, "GGUF file '", f, "': ", key, " is ", *v, " but the vocabulary has ", n,
                 " tokens");
    return static_cast<std::int32_t>(*v);
  };
  s->bos = special_id("tokenizer.ggml.bos_token_id");
  s->eos = special_id("tokenizer.ggml.eos_token_id");
  s->pad = special_id("tokenizer.ggml.padding_token_id");
  s->eot = special_id("tokenizer.ggml.eot_token_id");
  s->spm_vocab.unk = special_id("tokenizer.ggml.unknown_token_id");
  s->add_bos = file.get_or<bool>("tokenizer.ggml.add_bos_token", s->spm);  // SentencePiece files: BOS by default
  s->add_eos = file.get_or<bool>("tokenizer.ggml.add_eos_token", false);

  for (std::size_t i = 0; i < n; ++i) {
    const TokenType t = s->types[i];
    const std::string& text = s->tokens[i];
    if ((t == TokenType::control || t == TokenType::user_defined) && !text.empty())
      s->special_by_byte[static_cast<unsigned char>(text[0])].push_back(static_cast<std::int32_t>(i));
    if (t == TokenType::control &&
        (text == "<|im_end|>" || text == "<|endoftext|>" || text == "<|eot_id|>" ||
         text == "<end_of_turn>"))
      s->end_of_generation.push_back(static_cast<std::int32_t>(i));
  }
  for (auto& bucket : s->special_by_byte)
    std::stable_sort(bucket.begin(), bucket.end(), [&](std::int32_t a, std::int32_t b) {
      return s->tokens[a].size() > s->tokens[b].size();
    });
  for (auto id : {s->eos, s->eot})
    if (id) s->end_of_generation.push_back(*id);

  if (auto source = file.find<std::string>("tokenizer.chat_template")) {
    try {
      s->chat = ChatTemplate::detect(*source, f);
    } catch (const ArgumentError& e) {
      s->chat_error = e.what();  // the tokenizer works without it; chat_template() reports it
    }
  } else {
    s->chat_error = "GGUF file '" + f + "': no tokenizer.chat_template";
  }
  for (std::size_t i = 0; i < n; ++i) {
    std::string bytes;
    s->append_bytes(static_cast<std::int32_t>(i), bytes, {});
    s->max_token_bytes = std::max({s->max_token_bytes, bytes.size(), s->tokens[i].size()});
  }
  for (std::size_t b = 0; b < 256; ++b)
    s->encodable[b] = s->byte_token[b] >= 0 || (s->spm && s->spm_vocab.byte_token[b] >= 0);
  return Tokenizer(std::move(s));
}

// ---- encode -------------------------------------------------------------------------------------------

// BPE over one piece: start from its bytes' tokens, merge the lowest-ranked adjacent pair (leftmost
// on ties) until no pair merges; a heap of candidate pairs keeps that O(n log n).
void Tokenizer::State::bpe(std::string_view piece, std::vector<std::int32_t>& out) const {
  struct Sym {
    std::int32_t id;
    std::int32_t prev, next;  // -1 at the ends
  };
  struct Cand {
    std::int32_t rank, left, left_id, right_id, result;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::vector<Sym> syms;
  syms.reserve(piece.size());
  for (char c : piece) {
    const std::int32_t id = byte_token[static_cast<unsigned char>(c)];
    if (id < 0) continue;  // no token for this byte: dropped (see from_gguf)
    const auto i = static_cast<std::int32_t>(syms.size());
    syms.push_back({id, i - 1, i + 1});
  }
  if (syms.empty()) return;
  syms.back().next = -1;
  const auto n = static_cast<std::int32_t>(syms.size());
  if (n == 1) {
    out.push_back(syms[0].id);
    return;
  }
  std::priority_queue<Cand, std::vector<Cand>, std::greater<>> heap;
  auto consider = [&](std::int32_t left) {
    if (left < 0) return;
    const std::int32_t right = syms[left].next;
    if (right < 0) return;
    auto it = merges.find(pair_key(syms[left].id, syms[right].id));
    if (it != merges.end())
      heap.push({it->second.rank, left, syms[left].id, syms[right].id, it->second.result});
  };
  for (std::int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    Sym& l = syms[c.left];
    if (l.id != c.left_id || l.next < 0 || syms[l.next].id != c.right_id) continue;  // stale
    const std::int32_t right = l.next;
    l.id = c.result;
    l.next = syms[right].next;
    if (l.next >= 0) syms[l.next].prev = c.left;
    syms[right].id = -1;  // dead
    consider(l.prev);
    consider(c.left);
  }
  for (std::int32_t i = 0; i >= 0; i = syms[i].next) out.push_back(syms[i].id);
}

void Tokenizer::State::encode_plain(std::string_view text, std::vector<std::int32_t>& out) const {
  if (text.empty()) return;
  if (spm) return spm::encode(spm::escape_whitespace(text, add_space_prefix), spm_vocab, out);
  std::vector<std::string_view> pieces;
  pre_tokenize(pre, text, pieces);
  for (std::string_view p : pieces) bpe(p, out);
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, EncodeOptions options) const {
  const State& s = *state_;
  std::vector<std::int32_t> out;
  if (options.add_special && s.add_bos && s.bos) out.push_back(*s.bos);
  std::size_t seg = 0;
  for (std::size_t i = 0; i < text.size();) {
    std::int32_t match = -1;
    for (std::int32_t id : s.special_by_byte[static_cast<unsigned char>(text[i])]) {
      if (!options.parse_special && s.types[id] == TokenType::control) continue;
      if (text.substr(i).starts_with(s.tokens[id])) {
        match = id;
        break;  // longest first
      }
    }
    if (match < 0) {
      ++i;
      continue;
    }
    s.encode_plain(text.substr(seg, i - seg), out);
    out.push_back(match);
    i += s.tokens[match].size();
    seg = i;
  }
  s.encode_plain(text.substr(seg), out);
  if (options.add_special && s.add_eos && s.eos) out.push_back(*s.eos);
  return out;
}

// ---- decode -------------------------------------------------------------------------------------------

void Tokenizer::State::append_bytes(std::int32_t id, std::string& out,
                                    const DecodeOptions& options) const {
  NG_CHECK_ARG(id >= 0 && static_cast<std::size_t>(id) < tokens.size(), "decode: token id ", id,
               " is outside the vocabulary of ", tokens.size(), " tokens (", file, ")");
  const TokenType t = types[id];
  const std::string& text = tokens[id];
  if (t == TokenType::control) {
    if (!options.skip_special) out += text;
    return;
  }
  if (t == TokenType::user_defined) {
    out += text;
    return;
  }
  if (spm) return spm::append_piece(text, t, out);
  // Byte-level: each code point of the token stands for one byte; any other is kept as UTF-8.
  for (std::size_t i = 0; i < text.size();) {
    const unicode::Step st = unicode::next(text, i);
    auto it = st.cp == unicode::kInvalid ? cp_byte.end() : cp_byte.find(st.cp);
    if (it != cp_byte.end()) out += static_cast<char>(it->second);
    else out.append(text, i, st.len);
    i += st.len;
  }
}

std::string Tokenizer::decode_bytes(std::span<const std::int32_t> ids, DecodeOptions options) const {
  std::string out;
  for (std::int32_t id : ids) state_->append_bytes(id, out, options);
  return out;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, DecodeOptions options) const {
  return unicode::to_valid_utf8(decode_bytes(ids, options));
}

std::string StreamDecoder::push(std::int32_t id) {
  const std::int32_t one[] = {id};
  pending_ += tokenizer_->decode_bytes(one, options_);
  bool needs_more = false;
  const std::size_t n = unicode::complete_prefix(pending_, needs_more);
  std::string ready = unicode::to_valid_utf8(std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  return ready;
}

std::string StreamDecoder::finish() {
  std::string rest = unicode::to_valid_utf8(pending_);
  pending_.clear();
  return rest;
}

// ---- vocabulary ---------------------------------------------------------------------------------------

std::size_t Tokenizer::min_tokens(std::string_view text) const noexcept {
  std::size_t bytes = 0;
  for (const char c : text) bytes += state_->encodable[static_cast<unsigned char>(c)] ? 1 : 0;
  return (bytes + state_->max_token_bytes - 1) / state_->max_token_bytes;
}

std::size_t Tokenizer::vocab_size() const noexcept { return state_->tokens.size(); }
PreTokenizer Tokenizer::pre_tokenizer() const noexcept { return state_->pre; }

std::string_view Tokenizer::token_text(std::int32_t id) const {
  NG_CHECK_ARG(id >= 0 && static_cast<std::size_t>(id) < state_->tokens.size(), "token id ", id,
               " is outside the vocabulary of ", state_->tokens.size(), " tokens");
  return state_->tokens[id];
}

std::string Tokenizer::token_bytes(std::int32_t id) const {
  std::string out;
  state_->append_bytes(id, out, {});
  return out;
}

TokenType Tokenizer::token_type(std::int32_t id) const {
  (void)token_text(id);  // range check
  return state_->types[id];
}

std::optional<std::int32_t> Tokenizer::token_id(std::string_view text) const noexcept {
  auto it = state_->ids.find(std::string(text));
  if (it == state_->ids.end()) return std::nullopt;
  return it->second;
}

std::optional<std::int32_t> Tokenizer::bos_id() const noexcept { return state_->bos; }
std::optional<std::int32_t> Tokenizer::eos_id() const noexcept { return state_->eos; }
std::optional<std::int32_t> Tokenizer::pad_id() const noexcept { return state_->pad; }

bool Tokenizer::is_end_of_generation(std::int32_t id) const noexcept {
  const auto& e = state_->end_of_generation;
  return std::find(e.begin(), e.end(), id) != e.end();
}

const ChatTemplate& Tokenizer::chat_template() const {
  if (!state_->chat) NG_THROW(ArgumentError, state_->chat_error);
  return *state_->chat;
}

}  // namespace npugraph::llm
