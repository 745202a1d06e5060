// npugraph-serve's OpenAI wire format: a request body (JSON text) to an engine Request, or an error
// naming the field; the responses' JSON. No HTTP here (the parser is what a fuzzer feeds).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <variant>

#include <nlohmann/json.hpp>

#include "npugraph/llm/engine.hpp"
#include "serve/tools.hpp"

namespace npugraph::serve {

// A response's JSON keeps its keys in the order they were written (OpenAI's order; top_logprobs'
// alternatives most likely first). Requests are parsed into nlohmann::json (a std::map: a body of
// many keys costs log n a key, where the ordered map's would be n).
using ResponseJson = nlohmann::ordered_json;

// An OpenAI-shaped error: HTTP status, message, type, the offending field (param) and a code.
struct ApiError {
  int status = 400;
  std::string message;
  std::string param;  // "" when no field is to blame
  std::string type = "invalid_request_error";
  std::string code;   // "" for none
  ResponseJson body() const;
};

// JSON text of a response; ill-formed UTF-8 (echoed from a request, say) as U+FFFD, never a throw.
template <class Json>
std::string to_text(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

enum class Endpoint { chat, completion };

// Choices per request at most (n).
inline constexpr std::int64_t kMaxChoices = 16;

// response_format: text (none), json_object, or json_schema with its schema (JSON text) and name
// (Note [Structured output] in serve/grammar.hpp turns it into the request's constraint).
struct ResponseFormat {
  enum class Kind { text, json_object, json_schema };
  Kind kind = Kind::text;
  std::string name;    // json_schema.name
  std::string schema;  // json_schema.schema, as JSON text ("{}" when not given: any JSON value)
  bool strict = false;
};
struct ParsedRequest {
  llm::Request request;
  ResponseFormat format;  // the constraint is made from it by the server (it needs the vocabulary)
  Tools tools;            // chat: tools, tool_choice, parallel_tool_calls (Note [Tool calls])
  // Choices: n requests of the same prompt, choice i with seed + i (so sampled choices differ; with
  // temperature 0 they are the same greedy text).
  std::int64_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt before the completion (and its logprobs)
};

// Parses /v1/chat/completions (chat) or /v1/completions (completion) bodies. `model` is the served
// model's id (another is a 404 model_not_found); `vocab` its vocabulary (logit_bias's token ids).
// Fields OpenAI defines that npugraph does not implement (best_of > 1, tools, ...) and unknown
// fields are 400s naming them.
std::variant<ParsedRequest, ApiError> parse_request(Endpoint endpoint, const std::string& body,
                                                    const std::string& model, std::int64_t max_context,
                                                    std::int64_t vocab);

// Responses. `id`: "chatcmpl-N" / "cmpl-N"; `created`: the server's start (Unix seconds).
struct ResponseIds {
  std::string id, model;
  std::int64_t created = 0;
};
std::string response_id(Endpoint endpoint, llm::RequestId id);
// The usage of an answer's choices: the prompt once (each choice's last output has the same
// prompt_tokens and its own cached_tokens: the first choice's are reported), completions summed.
ResponseJson usage(const std::vector<llm::StepOutput>& lasts);
// Choice `index` of a whole answer: its text and finish reason; `logprobs`: the choice's
// (logprobs_json.hpp), null when not asked for.
// `tool_calls` (chat, a request with tools: tool_calls_json's): the message's calls; with calls its
// content is null when empty and a stop is finish_reason "tool_calls".
ResponseJson choice_body(Endpoint endpoint, std::int64_t index, const std::string& text, llm::FinishReason reason,
                         ResponseJson logprobs = nullptr, ResponseJson tool_calls = nullptr);
// Calls first.. of a choice's engine request `request` in OpenAI's shape (ids "call_<request>_<k>";
// `delta`: each with its "index", as a stream's delta lists them).
ResponseJson tool_calls_json(llm::RequestId request, std::int64_t first, const std::vector<ToolCall>& calls, bool delta);
// The whole answer: its choices (choice_body's, in index order) and usage.
ResponseJson completion_body(Endpoint endpoint, const ResponseIds& ids, ResponseJson choices, ResponseJson usage);
// Server-sent events of choice `index`: the chat stream's opening (role) chunk, a text piece, the
// finishing chunk; then the usage chunk (stream_options.include_usage) once every choice finished,
// each as "data: {...}\n\n"; then kStreamDone.
std::string event_role(const ResponseIds& ids, std::int64_t index);
// `logprobs`: the piece's tokens' (null when not asked for).
std::string event_text(Endpoint endpoint, const ResponseIds& ids, std::int64_t index, const std::string& text,
                       ResponseJson logprobs = nullptr);
// A chat stream's tool calls (tool_calls_json's with delta).
std::string event_tool_calls(const ResponseIds& ids, std::int64_t index, ResponseJson calls);
// `tool_calls`: the choice made calls (a stop is then "tool_calls").
std::string event_finish(Endpoint endpoint, const ResponseIds& ids, std::int64_t index, llm::FinishReason reason,
                         bool tool_calls = false);
std::string event_usage(Endpoint endpoint, const ResponseIds& ids, ResponseJson usage);
inline constexpr const char* kStreamDone = "data: [DONE]\n\n";
inline constexpr const char* kStreamKeepalive = ": keepalive\n\n";  // an SSE comment: clients skip it

}  // namespace npugraph::serve
