#include "serve/logprobs_json.hpp"

#include <cmath>
#include <string>

namespace npugraph::serve {
namespace {

using json = ResponseJson;

// Whether `s` is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool valid_utf8(const std::string& s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0, min = 0;
    if (c < 0x80) n = 0, cp = c;
    else if ((c & 0xE0) == 0xC0) n = 1, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) n = 2, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) n = 3, cp = c & 0x07, min = 0x10000;
    else return false;
    if (i + n >= s.size()) return false;  // the character's bytes run past the end
    for (std::size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if (n > 0 && (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) return false;
    i += n + 1;
  }
  return true;
}

std::string token_string(const std::string& bytes) {
  if (valid_utf8(bytes)) return bytes;
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x80) {
      out += ch;
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

json byte_list(const std::string& bytes) {
  json out = json::array();
  for (char c : bytes) out.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return out;
}

// A logprob as JSON: -inf (a token the model rules out) has no JSON number; OpenAI's floor is
// -9999.0 for such tokens, which is what clients see. NaN: none (an echoed prompt's first token).
json number(double lp) { return std::isnan(lp) ? json(nullptr) : std::isfinite(lp) ? json(lp) : json(-9999.0); }

}  // namespace

json chat_logprobs(const llm::Tokenizer& tok, std::span<const llm::TokenLogprob> tokens) {
  json content = json::array();
  for (const llm::TokenLogprob& t : tokens) {
    json top = json::array();
    for (const auto& [id, lp] : t.top) {
      const std::string b = tok.token_bytes(id);
      top.push_back({{"token", token_string(b)}, {"logprob", number(lp)}, {"bytes", byte_list(b)}});
    }
    const std::string b = tok.token_bytes(t.token);
    content.push_back(
        {{"token", token_string(b)}, {"logprob", number(t.logprob)}, {"bytes", byte_list(b)}, {"top_logprobs", top}});
  }
  return json{{"content", content}, {"refusal", nullptr}};
}

json completion_logprobs(const llm::Tokenizer& tok, std::span<const llm::TokenLogprob> tokens, std::int64_t& offset) {
  json names = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const llm::TokenLogprob& t : tokens) {
    const std::string b = tok.token_bytes(t.token);
    names.push_back(token_string(b));
    lps.push_back(number(t.logprob));
    json top = json::object();
    for (const auto& [id, lp] : t.top) top[token_string(tok.token_bytes(id))] = number(lp);
    top[token_string(b)] = number(t.logprob);
    tops.push_back(std::isnan(t.logprob) ? json(nullptr) : std::move(top));
    offsets.push_back(offset);
    if (!tok.is_end_of_generation(t.token) && tok.token_type(t.token) != llm::TokenType::control)  // in the text
      for (char c : b) offset += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  }
  return json{{"tokens", names}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

}  // namespace npugraph::serve
