// npugraph-serve's OpenAI wire format: a request body (JSON text) to an engine Request, or an error
// naming the field; the responses' JSON. No HTTP here (the parser is what a fuzzer feeds).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "npugraph/llm/engine.hpp"

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

struct ParsedRequest {
  llm::Request request;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt before the completion (and its logprobs)
};

// Parses /v1/chat/completions (chat) or /v1/completions (completion) bodies. `model` is the served
// model's id (another is a 404 model_not_found); `vocab` its vocabulary (logit_bias's token ids).
// Fields OpenAI defines that npugraph does not implement (n > 1, echo, tools, ...) and unknown
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
ResponseJson usage(const llm::StepOutput& last);
// The whole answer: the text, the finish reason and the usage of the request's last output;
// `logprobs`: the choice's (logprobs_json.hpp), null when not asked for.
ResponseJson completion_body(Endpoint endpoint, const ResponseIds& ids, const std::string& text,
                             const llm::StepOutput& last, ResponseJson logprobs = nullptr);
// Server-sent events: the chat stream's opening (role) chunk, a text piece, the finishing chunk,
// the usage chunk (stream_options.include_usage), each as "data: {...}\n\n"; then kStreamDone.
std::string event_role(const ResponseIds& ids);
// `logprobs`: the piece's tokens' (null when not asked for).
std::string event_text(Endpoint endpoint, const ResponseIds& ids, const std::string& text,
                       ResponseJson logprobs = nullptr);
std::string event_finish(Endpoint endpoint, const ResponseIds& ids, llm::FinishReason reason);
std::string event_usage(Endpoint endpoint, const ResponseIds& ids, const llm::StepOutput& last);
inline constexpr const char* kStreamDone = "data: [DONE]\n\n";
inline constexpr const char* kStreamKeepalive = ": keepalive\n\n";  // an SSE comment: clients skip it

}  // namespace npugraph::serve
