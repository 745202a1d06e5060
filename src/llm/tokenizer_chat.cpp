// Chat templates: recognising the Jinja source a GGUF file carries, and rendering it natively.
//
// Note [Recognising a chat template]
// npugraph does not run Jinja. It reduces the template to a canonical form and compares that with
// the templates it renders: whitespace inside tags is dropped (kept as one space between two words),
// string literals are decoded and re-quoted one way, comments vanish, and the raw text between tags
// is what Hugging Face's renderer would output (trim_blocks: the newline after a block tag goes;
// lstrip_blocks: blanks before a block tag at the start of a line go; '-' markers strip whitespace).
// Anything else, however small, is a different template: an ArgumentError that quotes it.
#include <optional>
#include <string>

#include "npugraph/error.hpp"
#include "npugraph/llm/tokenizer.hpp"

namespace npugraph::llm {
namespace {

bool word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// A string literal re-quoted: single quotes, with \\ and \' the only escapes.
void put_literal(std::string& out, std::string_view value) {
  out += '\'';
  for (char c : value) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  out += '\'';
}

// Reads the literal starting at src[i] (a quote); returns its value and moves i past it.
std::optional<std::string> read_literal(std::string_view src, std::size_t& i) {
  const char q = src[i++];
  std::string v;
  while (i < src.size()) {
    char c = src[i++];
    if (c == q) return v;
    if (c == '\\' && i < src.size()) {
      const char e = src[i++];
      switch (e) {
        case 'n': v += '\n'; break;
        case 't': v += '\t'; break;
        case 'r': v += '\r'; break;
        case '\\': case '\'': case '"': v += e; break;
        default: v += '\\'; v += e; break;  // kept as written, like Python for unknown escapes
      }
      continue;
    }
    v += c;
  }
  return std::nullopt;  // unterminated
}

// The canonical form (see the note), or nullopt for a template that does not even parse.
std::optional<std::string> canonical(std::string_view src) {
  std::string out;
  std::size_t i = 0;
  bool strip_leading = false;   // a '-' before the previous tag's close
  bool trim_newline = false;    // the previous tag was a block or comment tag (trim_blocks)
  while (true) {
    std::size_t open = i;
    while (open + 1 < src.size() &&
           !(src[open] == '{' && (src[open + 1] == '{' || src[open + 1] == '%' || src[open + 1] == '#')))
      ++open;
    if (open + 1 >= src.size()) open = std::string_view::npos;
    std::string raw(src.substr(i, open == std::string_view::npos ? std::string_view::npos : open - i));
    if (strip_leading) {
      std::size_t k = 0;
      while (k < raw.size() && blank(raw[k])) ++k;
      raw.erase(0, k);
    } else if (trim_newline && !raw.empty() && raw[0] == '\n') {
      raw.erase(0, 1);
    }
    if (open == std::string_view::npos) {
      if (!raw.empty()) { out += "\x01"; out += raw; out += "\x01"; }
      return out;
    }
    const char kind = src[open + 1];
    std::size_t j = open + 2;
    const char marker = j < src.size() && (src[j] == '-' || src[j] == '+') ? src[j] : 0;
    if (marker) ++j;
    if (marker == '-') {
      while (!raw.empty() && blank(raw.back())) raw.pop_back();
    } else if ((kind == '%' || kind == '#') && marker != '+') {
      // lstrip_blocks: blanks between the start of a line and a block tag
      std::size_t k = raw.size();
      while (k > 0 && (raw[k - 1] == ' ' || raw[k - 1] == '\t')) --k;
      const bool line_start = k == 0 ? (i == 0) : raw[k - 1] == '\n';
      if (line_start) raw.erase(k);
    }
    if (!raw.empty()) { out += "\x01"; out += raw; out += "\x01"; }

    const char close = kind == '{' ? '}' : kind;
    std::string body;
    bool closed = false;
    strip_leading = false;
    while (j < src.size()) {
      const char c = src[j];
      if (kind != '#' && (c == '\'' || c == '"')) {
        auto v = read_literal(src, j);
        if (!v) return std::nullopt;
        put_literal(body, *v);
        continue;
      }
      if ((c == '-' || c == '+') && j + 2 < src.size() && src[j + 1] == close && src[j + 2] == '}') {
        strip_leading = c == '-';
        j += 3;
        closed = true;
        break;
      }
      if (c == close && j + 1 < src.size() && src[j + 1] == '}') {
        j += 2;
        closed = true;
        break;
      }
      if (blank(c)) {
        std::size_t k = j;
        while (k < src.size() && blank(src[k])) ++k;
        if (!body.empty() && word_char(body.back()) && k < src.size() && word_char(src[k])) body += ' ';
        j = k;
        continue;
      }
      body += c;
      ++j;
    }
    if (!closed) return std::nullopt;
    if (kind != '#') {
      out += '{';
      out += kind;
      out += body;
      out += close;
      out += '}';
    }
    trim_newline = kind != '{';
    i = j;
  }
}

constexpr std::string_view kChatmlLoop =
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
constexpr std::string_view kForMessages = "{% for message in messages %}";
// SmolLM2's: a default system message where the conversation has none, then ChatML.
constexpr std::string_view kDefaultSystemOpen =
    "{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\n";
constexpr std::string_view kDefaultSystemClose = "<|im_end|>\\n' }}{% endif %}";

// Gemma 3's (google/gemma-3-*-it, tokenizer_config.json; the GGUF files carry it as is), with \x02
// where the separator after a system message stands ('\n\n' there; some files have '\n').
constexpr std::string_view kGemmaTemplate = R"({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
)";

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    if (s.substr(i, from.size()) == from) {
      out += to;
      i += from.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

// Jinja's trim: whitespace off both ends.
std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

std::string shorten(std::string_view s) {
  std::string out(s.substr(0, 200));
  if (s.size() > 200) out += "...";
  return out;
}

}  // namespace

ChatTemplate ChatTemplate::detect(std::string_view source, std::string_view context) {
  const auto canon = canonical(source);
  auto unsupported = [&]() -> ArgumentError {
    return ArgumentError(detail::cat(
        "GGUF file '", context, "': tokenizer.chat_template is not a template npugraph renders "
        "(it renders ChatML, optionally with a default system message as SmolLM2's, and Gemma 3's); the template "
        "begins: ", shorten(source)));
  };
  if (!canon) throw unsupported();

  const std::string plain = *canonical(std::string(kForMessages) + std::string(kChatmlLoop));
  if (*canon == plain) return ChatTemplate(Kind::chatml, "");
  for (std::string_view sep : {"\\n\\n", "\\n"})  // as the Jinja source spells them
    if (*canon == *canonical(replace_all(kGemmaTemplate, "\x02", sep)))
      return ChatTemplate(Kind::gemma, sep.size() == 4 ? "\n\n" : "\n");

  // With a default system message: everything but the message text must match. The message is the
  // rest of one literal, so compare the canonical forms around it.
  std::string marker = "\x02";
  const std::string pattern = *canonical(std::string(kForMessages) + std::string(kDefaultSystemOpen) +
                                         marker + std::string(kDefaultSystemClose) +
                                         std::string(kChatmlLoop));
  const std::size_t at = pattern.find(marker);
  const std::string_view head = std::string_view(pattern).substr(0, at);
  const std::string_view tail = std::string_view(pattern).substr(at + marker.size());
  const std::string_view c = *canon;
  if (c.size() >= head.size() + tail.size() && c.starts_with(head) && c.ends_with(tail)) {
    const std::string_view middle = c.substr(head.size(), c.size() - head.size() - tail.size());
    // `middle` is the inside of a re-quoted literal: undo its two escapes; a bare quote means the
    // literal ended early (something else is in between).
    std::string text;
    bool ok = true;
    for (std::size_t k = 0; k < middle.size(); ++k) {
      if (middle[k] == '\\' && k + 1 < middle.size()) {
        text += middle[++k];
      } else if (middle[k] == '\'' || middle[k] == '\\') {
        ok = false;
        break;
      } else {
        text += middle[k];
      }
    }
    if (ok) return ChatTemplate(Kind::chatml_default_system, std::move(text));
  }
  throw unsupported();
}

std::string ChatTemplate::apply(std::span<const ChatMessage> messages,
                                bool add_generation_prompt) const {
  std::string out;
  if (kind_ == Kind::gemma) {
    // No BOS text: the tokenizer adds BOS (add_bos_token), as llama.cpp strips the template's.
    const bool system = !messages.empty() && messages[0].role == "system";
    for (std::size_t i = system ? 1 : 0, k = 0; i < messages.size(); ++i, ++k) {
      const ChatMessage& m = messages[i];
      NG_CHECK_ARG((m.role == "user") == (k % 2 == 0), "chat template (Gemma 3): messages[", i, "].role = '", m.role,
                   "': conversation roles must alternate user/assistant/user/assistant/... (after an optional "
                   "first system message)");
      out += "<start_of_turn>";
      out += m.role == "assistant" ? "model" : m.role;
      out += '\n';
      if (k == 0 && system) {
        out += messages[0].content;
        out += default_system_;  // the separator
      }
      out += trim(m.content);
      out += "<end_of_turn>\n";
    }
    if (add_generation_prompt) out += "<start_of_turn>model\n";
    return out;
  }
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (i == 0 && kind_ == Kind::chatml_default_system && messages[0].role != "system")
      out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
    out += "<|im_start|>";
    out += messages[i].role;
    out += '\n';
    out += messages[i].content;
    out += "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace npugraph::llm
