// The pre-tokenizer splits (private to src/llm): text -> pieces that BPE encodes one by one.
#pragma once

#include <string_view>
#include <vector>

#include "npugraph/llm/tokenizer.hpp"

namespace npugraph::llm {

// Appends the pieces of `text` (views into it, in order, covering it exactly) to `out`.
//   gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   smollm: \p{N} each on its own first (Digits(individual_digits)), then gpt2 on the rest
//   qwen2:  Note [Qwen2 split] in tokenizer_pretokenize.cpp
void pre_tokenize(PreTokenizer kind, std::string_view text, std::vector<std::string_view>& out);

}  // namespace npugraph::llm
