// npugraph-serve's tool calls: OpenAI's `tools` / `tool_choice` / `parallel_tool_calls`, the
// conversation's tool calls and results as the text the chat template renders, the grammar that
// constrains a call (Note [Structured output] in serve/grammar.hpp) and the calls parsed out of the
// generated text, whole or streamed.
//
// Note [Tool calls]
// The format is the one Qwen 2.5 and Hermes models are trained on, for every template npugraph
// renders (ChatML with or without its default system message, Gemma 3's, which defines none of
// its own): the tools listed in the system message as JSON inside <tools></tools>, each call the
// model makes a line of JSON between <tool_call> and </tool_call>:
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
// and each tool's result given back in a user turn between <tool_response> and </tool_response>
// (consecutive tool messages in one turn). An assistant message's tool_calls are rendered the
// same way after its content, so a conversation round-trips through the template.
// The call is constrained by an xgrammar structural tag: each tool a tag whose begin is
// `<tool_call>\n{"name": "<name>", "arguments": `, whose content is the tool's parameters' JSON
// schema (whitespace runs of at most one character) and whose end is `}\n</tool_call>`:
//   - tool_choice "auto": free text, and any number of calls where the model writes <tool_call>
//     (xgrammar's triggered_tags); one call at most with parallel_tool_calls false;
//   - "required": one or more calls separated by newlines and nothing else (tags_with_separator);
//   - a named function: exactly one call of it;
//   - "none": no tools in the prompt and no constraint (the request is a plain chat).
// The text is then parsed back: a complete, well-formed <tool_call> block becomes a tool call
// (OpenAI's shape, arguments as JSON text, id "call_<request>_<k>"), what is outside the blocks the
// message's content (null when only whitespace), and finish_reason "tool_calls" when there is a
// call and the text ended on its own. Streamed, text that could start "<tool_call>" is held back
// until it is decided, a block is sent as one tool_calls delta once its end arrives, and whitespace
// is held until text that is not whitespace follows it (trailing whitespace is dropped), so a
// streamed answer's content and calls are the whole answer's. A block cut short (max_tokens) is
// given back as text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace npugraph::serve {

struct ApiError;

struct Tool {
  std::string name, description;
  std::string parameters;  // its JSON schema's text, keys in the client's order
};

struct ToolChoice {
  enum class Kind { none, automatic, required, named };
  Kind kind = Kind::automatic;
  std::string name;  // named
};

struct Tools {
  std::vector<Tool> list;
  ToolChoice choice;
  bool parallel = true;
  // Whether the request's output may hold calls (the prompt lists the tools, the output is parsed).
  bool active() const { return !list.empty() && choice.kind != ToolChoice::Kind::none; }
};

struct ToolCall {
  std::string name, arguments;  // arguments: JSON text
};

// The body's tools, tool_choice and parallel_tool_calls (`body`; `ordered`: the same body parsed
// keeping keys in order, for the parameters' text). An error names the field.
std::optional<ApiError> parse_tools(const nlohmann::json& body, const nlohmann::ordered_json& ordered, Tools& out);

// An assistant message's tool_calls (messages[i].tool_calls) as the text rendered after its content.
std::optional<ApiError> tool_calls_text(const nlohmann::json& calls, std::size_t i, std::string& out);
// A tool message's content as the user turn's text.
std::string tool_response_text(const std::string& content);

// The system message's tools section (appended to the system message, or the whole of one).
std::string tools_system_text(const std::vector<Tool>& tools);

// The structural tag (xgrammar's JSON) that constrains an active request's output.
std::string tools_structural_tag(const Tools& tools);

// The calls in generated text (Note [Tool calls]): feed the text as it comes; each call once, and
// the text outside the calls that is ready to be sent.
class ToolCallParser {
 public:
  struct Piece {
    std::string text;
    std::vector<ToolCall> calls;
  };
  Piece feed(const std::string& text);
  Piece finish();  // what is left at the end (a cut-off block as text)
  std::int64_t calls() const { return calls_; }

 private:
  Piece drain(bool end);
  std::string pending_;  // not yet decided
  std::string space_;    // whitespace held back
  bool in_block_ = false;
  bool any_text_ = false;
  std::int64_t calls_ = 0;
};

}  // namespace npugraph::serve
