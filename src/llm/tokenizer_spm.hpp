// SentencePiece BPE (tokenizer.ggml.model = "llama"): the merge loop over one stretch of text.
// Note [SentencePiece tokenizer] in tokenizer_spm.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "npugraph/llm/tokenizer.hpp"

namespace npugraph::llm::spm {

struct Vocab {
  const std::unordered_map<std::string, std::int32_t>* ids = nullptr;
  const std::vector<float>* scores = nullptr;
  const std::vector<TokenType>* types = nullptr;
  std::array<std::int32_t, 256> byte_token{};  // "<0xXX>" of each byte, -1 when missing
  std::optional<std::int32_t> unk;
};

// " " -> "▁" (U+2581), with one "▁" in front when `prefix` (the dummy prefix).
std::string escape_whitespace(std::string_view text, bool prefix);

// Appends the ids of `escaped` (already escaped): its characters merged pairwise, the pair whose
// concatenation is the highest-scoring piece first (leftmost on ties), until no pair is a piece;
// characters that are not pieces become their UTF-8 bytes' <0xXX> tokens (else unk, else nothing).
void encode(std::string_view escaped, const Vocab& vocab, std::vector<std::int32_t>& out);

// The byte of a "<0xXX>" piece, -1 for any other text.
int byte_value(std::string_view piece);

// A piece's text as bytes: "▁" -> " ", "<0xXX>" byte tokens -> the byte.
void append_piece(std::string_view piece, TokenType type, std::string& out);

}  // namespace npugraph::llm::spm
