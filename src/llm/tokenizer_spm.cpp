// Note [SentencePiece tokenizer]
// GGUF files with tokenizer.ggml.model = "llama" (Llama 2, Gemma, Mistral's early models) carry a
// SentencePiece BPE vocabulary: pieces with scores (tokenizer.ggml.scores) and types, no merge list.
// Encoding is SentencePiece's BPE encode, as llama.cpp's llm_tokenizer_spm does it:
//   - the text is split on special tokens first (Tokenizer::encode); each stretch of plain text
//     between them gets a "▁" in front when tokenizer.ggml.add_space_prefix says so (default true;
//     llama.cpp's rule: a stretch always starts the text or follows a special token), and every
//     space becomes "▁" (no other normalisation: llama.cpp applies none);
//   - the stretch is split into UTF-8 characters; repeatedly, among adjacent symbol pairs whose
//     concatenation is a normal or user-defined piece, the one with the highest score merges
//     (the leftmost on equal scores), until none is left;
//   - each remaining symbol is its piece, or — a character the vocabulary lacks — the <0xXX>
//     pieces of its UTF-8 bytes (byte fallback), or the unknown token when those are missing.
// Decoding maps "▁" back to a space and <0xXX> pieces to their bytes. A leading space the dummy
// prefix put there is kept (SentencePiece's decode strips it at the start of a sequence; the engine
// decodes generated continuations, where a leading space is the model's). Checked against Google's
// sentencepiece on a vocabulary it trained, over 1,000+ strings (tests/python/llm/test_spm_tokenizer.py).
#include "llm/tokenizer_spm.hpp"

#include <queue>

#include "llm/tokenizer_unicode.hpp"

namespace npugraph::llm::spm {
namespace {

constexpr std::string_view kSpace = "\xe2\x96\x81";  // U+2581

struct Sym {
  std::size_t start, len;
  std::int32_t prev, next;  // -1 at the ends
};

struct Bigram {
  float score;
  std::int32_t left, right;
  std::size_t len;  // the merged length when pushed (stale if it changed)
  bool operator<(const Bigram& o) const {  // std::priority_queue pops the largest
    return score != o.score ? score < o.score : left > o.left;
  }
};

bool mergeable(TokenType t) { return t == TokenType::normal || t == TokenType::user_defined; }

}  // namespace

std::string escape_whitespace(std::string_view text, bool prefix) {
  std::string out;
  out.reserve(text.size() + 3);
  if (prefix) out += kSpace;
  for (char c : text) {
    if (c == ' ') out += kSpace;
    else out += c;
  }
  return out;
}

void encode(std::string_view text, const Vocab& v, std::vector<std::int32_t>& out) {
  std::vector<Sym> syms;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t len = unicode::next(text, i).len;
    const auto idx = static_cast<std::int32_t>(syms.size());
    syms.push_back({i, len, idx - 1, idx + 1});
    i += len;
  }
  if (syms.empty()) return;
  syms.back().next = -1;
  auto piece_of = [&](std::size_t start, std::size_t len) -> std::int32_t {
    auto it = v.ids->find(std::string(text.substr(start, len)));
    if (it == v.ids->end() || !mergeable((*v.types)[it->second])) return -1;
    return it->second;
  };
  std::priority_queue<Bigram> heap;
  auto consider = [&](std::int32_t left, std::int32_t right) {
    if (left < 0 || right < 0) return;
    const std::size_t len = syms[left].len + syms[right].len;
    const std::int32_t id = piece_of(syms[left].start, len);
    if (id >= 0) heap.push({(*v.scores)[id], left, right, len});
  };
  for (std::int32_t i = 0; i + 1 < static_cast<std::int32_t>(syms.size()); ++i) consider(i, i + 1);
  while (!heap.empty()) {
    const Bigram b = heap.top();
    heap.pop();
    Sym& l = syms[b.left];
    Sym& r = syms[b.right];
    if (l.len == 0 || r.len == 0 || l.next != b.right || l.len + r.len != b.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    consider(l.prev, b.left);
    consider(b.left, l.next);
  }
  for (std::int32_t i = 0; i >= 0; i = syms[i].next) {
    const Sym& s = syms[i];
    const std::int32_t id = piece_of(s.start, s.len);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (std::size_t k = 0; k < s.len; ++k) {  // byte fallback
      const std::int32_t bt = v.byte_token[static_cast<unsigned char>(text[s.start + k])];
      if (bt >= 0) out.push_back(bt);
      else if (v.unk) out.push_back(*v.unk);
    }
  }
}

int byte_value(std::string_view piece) {
  if (piece.size() != 6 || !piece.starts_with("<0x") || piece.back() != '>') return -1;
  int v = 0;
  for (char c : piece.substr(3, 2)) {
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

void append_piece(std::string_view piece, TokenType type, std::string& out) {
  if (type == TokenType::byte) {
    if (const int b = byte_value(piece); b >= 0) {
      out += static_cast<char>(b);
      return;
    }
  }
  for (std::size_t i = 0; i < piece.size();) {
    if (piece.substr(i).starts_with(kSpace)) {
      out += ' ';
      i += kSpace.size();
    } else {
      out += piece[i++];
    }
  }
}

}  // namespace npugraph::llm::spm
