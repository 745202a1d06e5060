// Code point classes and UTF-8 stepping (tokenizer_unicode.hpp).
#include "llm/tokenizer_unicode.hpp"

#include <algorithm>
#include <array>

namespace npugraph::llm::unicode {
namespace {

const std::array<CodepointClass, 128> kAscii = [] {
  std::array<CodepointClass, 128> t{};
  for (std::uint32_t c = 0; c < 128; ++c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) t[c] = CodepointClass::letter;
    else if (c >= '0' && c <= '9') t[c] = CodepointClass::number;
    else if (c == ' ' || (c >= 0x09 && c <= 0x0d)) t[c] = CodepointClass::space;
    else t[c] = CodepointClass::other;
  }
  return t;
}();

bool continuation(unsigned char b) { return (b & 0xc0) == 0x80; }

}  // namespace

CodepointClass classify(std::uint32_t cp) noexcept {
  if (cp < 128) return kAscii[cp];
  const CodepointRange* end = kRanges + kRangeCount;
  const CodepointRange* it = std::upper_bound(
      kRanges, end, cp, [](std::uint32_t c, const CodepointRange& r) { return c < r.lo; });
  if (it == kRanges) return CodepointClass::other;
  --it;
  return cp <= it->hi ? it->cls : CodepointClass::other;
}

// Well-formed sequences (Unicode Table 3-7): the second byte's range depends on the first.
Step next(std::string_view s, std::size_t i) noexcept {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {b0, 1};
  std::size_t len;
  unsigned char lo = 0x80, hi = 0xbf;
  std::uint32_t cp;
  if (b0 >= 0xc2 && b0 <= 0xdf) { len = 2; cp = b0 & 0x1fu; }
  else if (b0 >= 0xe0 && b0 <= 0xef) {
    len = 3; cp = b0 & 0x0fu;
    if (b0 == 0xe0) lo = 0xa0;
    if (b0 == 0xed) hi = 0x9f;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    len = 4; cp = b0 & 0x07u;
    if (b0 == 0xf0) lo = 0x90;
    if (b0 == 0xf4) hi = 0x8f;
  } else {
    return {kInvalid, 1};
  }
  for (std::size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) return {kInvalid, k};  // cut short: the maximal subpart so far
    const auto b = static_cast<unsigned char>(s[i + k]);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xbf;
    if (b < l || b > h) return {kInvalid, k};
    cp = (cp << 6) | (b & 0x3fu);
  }
  return {cp, len};
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

std::size_t complete_prefix(std::string_view s, bool& needs_more) noexcept {
  needs_more = false;
  std::size_t i = 0;
  while (i < s.size()) {
    const Step st = next(s, i);
    if (st.cp == kInvalid && i + st.len == s.size() && !continuation(static_cast<unsigned char>(s[i]))) {
      // An ill-formed part reaching the end may be a sequence cut short: hold it if the lead byte
      // promises more bytes than are there.
      const auto b0 = static_cast<unsigned char>(s[i]);
      const std::size_t want = b0 >= 0xf0 ? 4 : b0 >= 0xe0 ? 3 : b0 >= 0xc2 ? 2 : 1;
      if (b0 <= 0xf4 && st.len < want) {
        needs_more = true;
        return i;
      }
    }
    i += st.len;
  }
  return i;
}

std::string to_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const Step st = next(s, i);
    if (st.cp == kInvalid) out += "\xEF\xBF\xBD";
    else out.append(s.substr(i, st.len));
    i += st.len;
  }
  return out;
}

}  // namespace npugraph::llm::unicode
