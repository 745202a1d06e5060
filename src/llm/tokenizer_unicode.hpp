// Code point classes and UTF-8 stepping for the pre-tokenizer (private to src/llm).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace npugraph::llm::unicode {

enum class CodepointClass : std::uint8_t { other, letter, number, space };

struct CodepointRange {
  std::uint32_t lo, hi;  // inclusive
  CodepointClass cls;
};

// Sorted, disjoint; code points in none of them are `other` (tokenizer_unicode_data.cpp, generated).
extern const CodepointRange kRanges[];
extern const std::size_t kRangeCount;

CodepointClass classify(std::uint32_t cp) noexcept;

// One step through UTF-8: the code point at s[i] and its length in bytes. A byte that does not start
// a well-formed sequence (stray continuation, overlong form, surrogate, past U+10FFFF, cut short)
// is a sequence of its own with code point kInvalid, which classifies as `other`.
inline constexpr std::uint32_t kInvalid = 0xFFFFFFFFu;
struct Step {
  std::uint32_t cp;
  std::size_t len;
};
Step next(std::string_view s, std::size_t i) noexcept;

// The UTF-8 encoding of a valid code point.
void append_utf8(std::string& out, std::uint32_t cp);

// The length of the longest prefix of `s` made of complete, well-formed sequences, stopping before
// an incomplete sequence at the very end that more bytes could complete (for streaming).
// `needs_more` says whether such a tail exists.
std::size_t complete_prefix(std::string_view s, bool& needs_more) noexcept;

// `s` with each ill-formed part replaced by U+FFFD, one per maximal ill-formed subpart (as
// Rust's String::from_utf8_lossy and Python's errors="replace" do).
std::string to_valid_utf8(std::string_view s);

}  // namespace npugraph::llm::unicode
