// GPT-2's pre-tokenizer regex, matched by hand over code point classes.
//
// Note [GPT-2 split without a regex engine]
// The pattern is an alternation tried in order at each position (first match wins, not longest):
//   1 's|'t|'re|'ve|'m|'ll|'d      case-sensitive contractions
//   2 ' ?\p{L}+'  3 ' ?\p{N}+'  4 ' ?[^\s\p{L}\p{N}]+'   an optional U+0020, then one class, greedy
//   5 \s+(?!\S)   a whitespace run, minus its last character when a non-space follows
//   6 \s+         a single whitespace character before a non-space (what 5 leaves)
// Alternatives 2-4 only take the space when the class run follows it; otherwise a space falls to 5/6.
// Invalid UTF-8 bytes are one code point each of class "other". This is the order Oniguruma (what
// Hugging Face tokenizers runs) and llama.cpp's unicode_regex_split_custom_gpt2 follow.
#include "llm/tokenizer_pretokenize.hpp"

#include <cstdint>

#include "llm/tokenizer_unicode.hpp"

namespace npugraph::llm {
namespace {

using unicode::CodepointClass;

struct Cp {
  std::uint32_t cp;
  CodepointClass cls;
  std::size_t offset;  // in bytes, into the text
};

std::vector<Cp> decode(std::string_view text) {
  std::vector<Cp> cps;
  cps.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const unicode::Step st = unicode::next(text, i);
    cps.push_back({st.cp, unicode::classify(st.cp), i});
    i += st.len;
  }
  return cps;
}

// The GPT-2 split of cps[begin, end).
void split_gpt2(const std::vector<Cp>& cps, std::size_t begin, std::size_t end,
                std::string_view text, std::vector<std::string_view>& out) {
  auto offset = [&](std::size_t k) { return k < cps.size() ? cps[k].offset : text.size(); };
  auto emit = [&](std::size_t a, std::size_t b) {
    out.push_back(text.substr(offset(a), offset(b) - offset(a)));
  };
  std::size_t i = begin;
  while (i < end) {
    const Cp& c = cps[i];
    // 1: contractions
    if (c.cp == '\'' && i + 1 < end) {
      const std::uint32_t c1 = cps[i + 1].cp;
      if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
        emit(i, i + 2);
        i += 2;
        continue;
      }
      if (i + 2 < end) {
        const std::uint32_t c2 = cps[i + 2].cp;
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
          emit(i, i + 3);
          i += 3;
          continue;
        }
      }
    }
    // 2-4: an optional space, then a run of one class
    std::size_t j = i;
    if (c.cp == ' ' && i + 1 < end && cps[i + 1].cls != CodepointClass::space) j = i + 1;
    const CodepointClass cls = cps[j].cls;
    if (cls != CodepointClass::space) {
      std::size_t k = j + 1;
      while (k < end && cps[k].cls == cls) ++k;
      emit(i, k);
      i = k;
      continue;
    }
    // 5-6: whitespace
    std::size_t k = i;
    while (k < end && cps[k].cls == CodepointClass::space) ++k;
    if (k < end && k - i >= 2) --k;  // leave the last one to prefix what follows
    emit(i, k);
    i = k;
  }
}

// Note [Qwen2 split]
// Qwen 2 / 2.5 / 3's pattern (llama.cpp's LLAMA_VOCAB_PRE_TYPE_QWEN2), first match wins:
//   1 (?i:'s|'t|'re|'ve|'m|'ll|'d)           contractions, any case
//   2 [^\r\n\p{L}\p{N}]?\p{L}+              letters, with one optional leading character that is
//                                           neither a newline nor a letter nor a number
//   3 \p{N}                                  one number character
//   4  ?[^\s\p{L}\p{N}]+[\r\n]*              an optional space, a run of other characters, newlines
//   5 \s*[\r\n]+                             whitespace up to and including its last newline
//   6 \s+(?!\S)  7 \s+                      as GPT-2's 5 and 6
bool newline(std::uint32_t cp) { return cp == '\r' || cp == '\n'; }
std::uint32_t lower(std::uint32_t cp) { return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp; }

void split_qwen2(const std::vector<Cp>& cps, std::string_view text, std::vector<std::string_view>& out) {
  const std::size_t end = cps.size();
  auto offset = [&](std::size_t k) { return k < end ? cps[k].offset : text.size(); };
  auto emit = [&](std::size_t a, std::size_t b) { out.push_back(text.substr(offset(a), offset(b) - offset(a))); };
  auto is = [&](std::size_t k, CodepointClass c) { return k < end && cps[k].cls == c; };
  std::size_t i = 0;
  while (i < end) {
    const Cp& c = cps[i];
    // 1: contractions, case-insensitive
    if (c.cp == '\'' && i + 1 < end) {
      const std::uint32_t c1 = lower(cps[i + 1].cp);
      if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
        emit(i, i + 2);
        i += 2;
        continue;
      }
      if (i + 2 < end) {
        const std::uint32_t c2 = lower(cps[i + 2].cp);
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
          emit(i, i + 3);
          i += 3;
          continue;
        }
      }
    }
    // 2: letters, with an optional leading non-newline, non-letter, non-number character
    {
      std::size_t j = i;
      if (!newline(c.cp) && c.cls != CodepointClass::letter && c.cls != CodepointClass::number &&
          is(i + 1, CodepointClass::letter))
        j = i + 1;
      if (is(j, CodepointClass::letter)) {
        std::size_t k = j + 1;
        while (is(k, CodepointClass::letter)) ++k;
        emit(i, k);
        i = k;
        continue;
      }
    }
    // 3: one number
    if (c.cls == CodepointClass::number) {
      emit(i, i + 1);
      ++i;
      continue;
    }
    // 4: an optional space, other characters, then newlines
    {
      std::size_t j = i;
      if (c.cp == ' ' && is(i + 1, CodepointClass::other)) j = i + 1;
      if (is(j, CodepointClass::other)) {
        std::size_t k = j + 1;
        while (is(k, CodepointClass::other)) ++k;
        while (k < end && newline(cps[k].cp)) ++k;
        emit(i, k);
        i = k;
        continue;
      }
    }
    // 5-7: whitespace
    std::size_t k = i;
    while (is(k, CodepointClass::space)) ++k;
    std::size_t last_newline = k;
    for (std::size_t m = i; m < k; ++m)
      if (newline(cps[m].cp)) last_newline = m;
    if (last_newline < k) {  // 5
      emit(i, last_newline + 1);
      i = last_newline + 1;
      continue;
    }
    if (k < end && k - i >= 2) --k;  // 6: leave the last one to prefix what follows
    if (k == i) k = i + 1;           // not whitespace after all (cannot happen: the classes cover all)
    emit(i, k);
    i = k;
  }
}

}  // namespace

void pre_tokenize(PreTokenizer kind, std::string_view text, std::vector<std::string_view>& out) {
  if (text.empty()) return;
  const std::vector<Cp> cps = decode(text);
  if (kind == PreTokenizer::gpt2) {
    split_gpt2(cps, 0, cps.size(), text, out);
    return;
  }
  if (kind == PreTokenizer::qwen2) {
    split_qwen2(cps, text, out);
    return;
  }
  // smollm: numbers one by one, the stretches between them through GPT-2's split
  std::size_t run = 0;
  for (std::size_t i = 0; i < cps.size(); ++i) {
    if (cps[i].cls != CodepointClass::number) continue;
    if (run < i) split_gpt2(cps, run, i, text, out);
    out.push_back(text.substr(cps[i].offset, (i + 1 < cps.size() ? cps[i + 1].offset : text.size()) -
                                                 cps[i].offset));
    run = i + 1;
  }
  if (run < cps.size()) split_gpt2(cps, run, cps.size(), text, out);
}

}  // namespace npugraph::llm
