#include "serve/openai_api.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>
#include <set>
#include <utility>

namespace npugraph::serve {
namespace {

using nlohmann::json;

ApiError bad(std::string param, std::string message, std::string code = "") {
  return {.status = 400, .message = std::move(message), .param = std::move(param), .code = std::move(code)};
}

std::string kind(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

// A failure while reading one field.
struct FieldError {
  ApiError error;
};

double number(const json& body, const char* key, double lo, double hi, bool lo_open) {
  const json& v = body[key];
  if (!v.is_number())
    throw FieldError{bad(key, std::string("'") + key + "' must be a number, got " + kind(v))};
  const double x = v.get<double>();
  if (!std::isfinite(x) || (lo_open ? x <= lo : x < lo) || x > hi)
    throw FieldError{bad(key, std::string("'") + key + "' = " + v.dump() + ": must be in " + (lo_open ? "(" : "[") +
                                  json(lo).dump() + ", " + json(hi).dump() + "]")};
  return x;
}

std::int64_t integer(const json& body, const char* key, std::int64_t lo, std::int64_t hi) {
  const json& v = body[key];
  if (!v.is_number_integer() && !v.is_number_unsigned())
    throw FieldError{bad(key, std::string("'") + key + "' must be an integer, got " + kind(v))};
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    throw FieldError{bad(key, std::string("'") + key + "' = " + v.dump() + ": must be at most " + std::to_string(hi))};
  const std::int64_t x = v.get<std::int64_t>();
  if (x < lo || x > hi)
    throw FieldError{bad(key, std::string("'") + key + "' = " + v.dump() + ": must be in [" + std::to_string(lo) + ", " +
                                  std::to_string(hi) + "]")};
  return x;
}

bool boolean(const json& body, const char* key) {
  const json& v = body[key];
  if (!v.is_boolean()) throw FieldError{bad(key, std::string("'") + key + "' must be a boolean, got " + kind(v))};
  return v.get<bool>();
}

// A request's seed when it gives none: drawn from the OS's entropy per thread, so two identical
// sampled requests differ (as OpenAI's, vLLM's and llama-server's do); a request that names its
// seed is reproducible (choice i draws with seed + i).
std::uint64_t random_seed() {
  thread_local std::mt19937_64 draws{[] {
    std::random_device device;
    return (static_cast<std::uint64_t>(device()) << 32) ^ device();
  }()};
  return draws();
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts.
std::string content_of(const json& m, std::size_t i) {
  const std::string param = "messages[" + std::to_string(i) + "].content";
  if (!m.contains("content") || m["content"].is_null()) throw FieldError{bad(param, "'" + param + "' is required")};
  const json& c = m["content"];
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) throw FieldError{bad(param, "'" + param + "' must be a string or an array of text parts, got " + kind(c))};
  std::string text;
  for (std::size_t k = 0; k < c.size(); ++k) {
    const json& part = c[k];
    const std::string pp = param + "[" + std::to_string(k) + "]";
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string())
      throw FieldError{bad(pp, "'" + pp + "': only {\"type\": \"text\", \"text\": ...} parts are supported")};
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

ResponseJson ApiError::body() const {
  using J = ResponseJson;
  J e{{"message", message}, {"type", type}, {"param", param.empty() ? J(nullptr) : J(param)},
      {"code", code.empty() ? J(nullptr) : J(code)}};
  return J{{"error", e}};
}

// OpenAI's response_format: {"type": "text"}, {"type": "json_object"}, or {"type": "json_schema",
// "json_schema": {"name": ..., "schema": {...}, "strict": bool, "description": ...}}.
static ResponseFormat response_format(const json& f) {
  const auto fail = [](const std::string& param, const std::string& message) {
    return FieldError{bad(param, message)};
  };
  if (!f.is_object()) throw fail("response_format", "'response_format' must be an object, got " + kind(f));
  for (const auto& [key, value] : f.items())
    if (key != "type" && key != "json_schema")
      throw fail("response_format." + key, "'response_format." + key + "' is not a field of response_format "
                                           "(it has 'type' and, for json_schema, 'json_schema')");
  if (!f.contains("type") || !f["type"].is_string())
    throw fail("response_format.type", "'response_format.type' must be 'text', 'json_object' or 'json_schema'");
  const std::string type = f["type"].get<std::string>();
  ResponseFormat out;
  if (type == "text" || type == "json_object") {
    if (f.contains("json_schema"))
      throw fail("response_format.json_schema", "'response_format.json_schema' goes with type 'json_schema' only");
    out.kind = type == "text" ? ResponseFormat::Kind::text : ResponseFormat::Kind::json_object;
    return out;
  }
  if (type != "json_schema")
    throw fail("response_format.type", "'response_format.type' = '" + type +
                                           "': must be 'text', 'json_object' or 'json_schema'");
  if (!f.contains("json_schema") || !f["json_schema"].is_object())
    throw fail("response_format.json_schema", "'response_format.json_schema' is required with type 'json_schema': "
                                              "an object with 'name' and 'schema'");
  const json& js = f["json_schema"];
  for (const auto& [key, value] : js.items())
    if (key != "name" && key != "schema" && key != "strict" && key != "description")
      throw fail("response_format.json_schema." + key,
                 "'response_format.json_schema." + key + "' is not a field of json_schema ('name', 'schema', "
                 "'strict', 'description')");
  if (!js.contains("name") || !js["name"].is_string())
    throw fail("response_format.json_schema.name", "'response_format.json_schema.name' is required: a string");
  out.name = js["name"].get<std::string>();
  const bool name_ok = !out.name.empty() && out.name.size() <= 64 &&
                       std::all_of(out.name.begin(), out.name.end(), [](char c) {
                         return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
                       });
  if (!name_ok)
    throw fail("response_format.json_schema.name", "'response_format.json_schema.name' = " + js["name"].dump() +
                                                       ": must be 1 to 64 of a-z, A-Z, 0-9, '_' and '-'");
  if (js.contains("schema") && !js["schema"].is_null()) {
    if (!js["schema"].is_object() && !js["schema"].is_boolean())
      throw fail("response_format.json_schema.schema",
                 "'response_format.json_schema.schema' must be a JSON Schema (an object), got " + kind(js["schema"]));
    out.schema = js["schema"].dump();
  } else {
    out.schema = "{}";
  }
  if (js.contains("strict") && !js["strict"].is_null()) {
    if (!js["strict"].is_boolean())
      throw fail("response_format.json_schema.strict",
                 "'response_format.json_schema.strict' must be a boolean, got " + kind(js["strict"]));
    out.strict = js["strict"].get<bool>();
  }
  if (js.contains("description") && !js["description"].is_null() && !js["description"].is_string())
    throw fail("response_format.json_schema.description",
               "'response_format.json_schema.description' must be a string, got " + kind(js["description"]));
  out.kind = ResponseFormat::Kind::json_schema;
  return out;
}

std::variant<ParsedRequest, ApiError> parse_request(Endpoint endpoint, const std::string& text,
                                                    const std::string& model, std::int64_t max_context,
                                                    std::int64_t vocab) {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::parse_error& e) {
    return bad("", std::string("the body is not valid JSON: ") + e.what(), "invalid_json");
  } catch (const json::exception& e) {  // 1e400: a number beyond a double
    return bad("", std::string("the body has a number out of range (beyond a 64-bit float): ") + e.what(),
               "invalid_json");
  }
  if (!body.is_object()) return bad("", "the body must be a JSON object, got " + kind(body));
  const bool chat = endpoint == Endpoint::chat;
  // Fields accepted as they are; fields accepted only at their neutral value; the rest are refused.
  static const std::set<std::string> chat_fields{"model", "messages", "max_tokens", "max_completion_tokens",
                                                 "temperature", "top_p", "top_k", "seed", "stop", "stream",
                                                 "stream_options", "n", "presence_penalty", "frequency_penalty",
                                                 "logprobs", "top_logprobs", "user", "response_format",
                                                 "parallel_tool_calls", "logit_bias", "tools", "tool_choice",
                                                 "repetition_penalty"};
  static const std::set<std::string> completion_fields{"model", "prompt", "max_tokens", "temperature", "top_p",
                                                       "top_k", "seed", "stop", "stream", "stream_options", "n",
                                                       "presence_penalty", "frequency_penalty", "logprobs",
                                                       "echo", "suffix", "best_of", "user", "logit_bias",
                                                       "repetition_penalty", "response_format"};
  const auto& known = chat ? chat_fields : completion_fields;
  for (const auto& [key, value] : body.items())
    if (!known.contains(key))
      return bad(key, "'" + key + "' is not a field npugraph-serve accepts for " +
                          (chat ? "/v1/chat/completions" : "/v1/completions"),
                 "unsupported_field");
  ParsedRequest out;
  llm::Request& r = out.request;
  try {
    if (!body.contains("model")) return bad("model", "'model' is required");
    if (!body["model"].is_string()) return bad("model", "'model' must be a string, got " + kind(body["model"]));
    if (body["model"].get<std::string>() != model)
      return ApiError{.status = 404, .message = "the model '" + body["model"].get<std::string>() +
                                                "' does not exist: this server serves '" + model + "'",
                      .param = "model", .code = "model_not_found"};
    if (chat) {
      if (!body.contains("messages")) return bad("messages", "'messages' is required");
      const json& ms = body["messages"];
      if (!ms.is_array() || ms.empty()) return bad("messages", "'messages' must be a non-empty array of messages");
      for (std::size_t i = 0; i < ms.size(); ++i) {
        const json& m = ms[i];
        const std::string p = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) return bad(p, "'" + p + "' must be an object with 'role' and 'content'");
        if (!m.contains("role") || !m["role"].is_string()) return bad(p + ".role", "'" + p + ".role' must be a string");
        const std::string role = m["role"].get<std::string>();
        if (role != "system" && role != "user" && role != "assistant" && role != "developer" && role != "tool")
          return bad(p + ".role", "'" + p + ".role' = '" + role +
                                      "': must be 'system', 'developer', 'user', 'assistant' or 'tool'");
        if (role == "tool") {  // a tool's result: a user turn (Note [Tool calls]), consecutive ones in one
          if (!m.contains("tool_call_id") || !m["tool_call_id"].is_string())
            return bad(p + ".tool_call_id", "'" + p + ".tool_call_id' is required with role 'tool': a string");
          const std::string response = tool_response_text(content_of(m, i));
          if (i > 0 && ms[i - 1].is_object() && ms[i - 1].value("role", json()) == "tool")
            r.messages.back().content += "\n" + response;
          else
            r.messages.push_back({"user", response});
          continue;
        }
        const bool calls = role == "assistant" && m.contains("tool_calls") && !m["tool_calls"].is_null();
        std::string content = calls && (!m.contains("content") || m["content"].is_null()) ? "" : content_of(m, i);
        if (calls) {
          std::string calls_text;
          if (auto e = tool_calls_text(m["tool_calls"], i, calls_text)) return *e;
          content += (content.empty() ? "" : "\n") + calls_text;
        }
        r.messages.push_back({role == "developer" ? "system" : role, std::move(content)});
      }
    } else {
      if (!body.contains("prompt")) return bad("prompt", "'prompt' is required");
      const json& p = body["prompt"];
      if (p.is_array() && p.size() == 1 && p[0].is_string()) r.prompt = p[0].get<std::string>();
      else if (p.is_string()) r.prompt = p.get<std::string>();
      else return bad("prompt", "'prompt' must be a string (or an array of one string), got " + kind(p));
      if (r.prompt.empty()) return bad("prompt", "'prompt' is empty");
      r.chat = false;
    }
    r.max_tokens = chat ? max_context : 16;  // OpenAI's defaults: as long as the context allows / 16
    for (const char* key : {"max_tokens", "max_completion_tokens"})
      if (body.contains(key) && !body[key].is_null()) r.max_tokens = integer(body, key, 1, std::int64_t{1} << 40);
    if (body.contains("temperature") && !body["temperature"].is_null())
      r.temperature = number(body, "temperature", 0, 2, false);
    else
      r.temperature = 1.0;  // OpenAI's default
    if (body.contains("top_p") && !body["top_p"].is_null()) r.top_p = number(body, "top_p", 0, 1, true);
    if (body.contains("top_k") && !body["top_k"].is_null()) r.top_k = integer(body, "top_k", 0, std::int64_t{1} << 31);
    if (body.contains("seed") && !body["seed"].is_null()) {
      const json& v = body["seed"];
      if (!v.is_number_integer() && !v.is_number_unsigned())
        return bad("seed", "'seed' must be an integer, got " + kind(v));
      r.seed = v.is_number_unsigned() ? v.get<std::uint64_t>() : static_cast<std::uint64_t>(v.get<std::int64_t>());
    } else {
      r.seed = random_seed();  // OpenAI, vLLM, llama-server: without a seed, each request draws anew
    }
    if (body.contains("stop") && !body["stop"].is_null()) {
      const json& v = body["stop"];
      if (v.is_string()) {
        r.stop.push_back(v.get<std::string>());
      } else if (v.is_array()) {
        for (const json& s : v) {
          if (!s.is_string()) return bad("stop", "'stop' must be a string or an array of strings");
          r.stop.push_back(s.get<std::string>());
        }
      } else {
        return bad("stop", "'stop' must be a string or an array of strings, got " + kind(v));
      }
      for (const std::string& s : r.stop)
        if (s.empty()) return bad("stop", "'stop' has an empty string: a stop string needs at least one character");
    }
    if (body.contains("stream") && !body["stream"].is_null()) out.stream = boolean(body, "stream");
    if (body.contains("stream_options") && !body["stream_options"].is_null()) {
      const json& so = body["stream_options"];
      if (!so.is_object()) return bad("stream_options", "'stream_options' must be an object");
      for (const auto& [key, value] : so.items())
        if (key != "include_usage") return bad("stream_options." + key, "'stream_options." + key + "' is not supported");
      if (so.contains("include_usage")) {
        if (!so["include_usage"].is_boolean())
          return bad("stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
        out.include_usage = so["include_usage"].get<bool>();
      }
    }
    // Accepted only at their neutral values.
    if (body.contains("n") && !body["n"].is_null()) {
      const std::int64_t n = integer(body, "n", 1, 1 << 20);
      if (n > kMaxChoices)
        return bad("n", "'n' = " + body["n"].dump() + ": at most " + std::to_string(kMaxChoices) +
                            " choices per request", "unsupported_value");
      out.n = n;
    }
    if (body.contains("best_of") && !body["best_of"].is_null() && integer(body, "best_of", 1, 1 << 20) != 1)
      return bad("best_of", "'best_of' = " + body["best_of"].dump() + ": only 1 is supported", "unsupported_value");
    // Penalties and biases (Note [Logit adjustments] in src/llm/logit_adjust.hpp).
    for (const auto& [key, to] : {std::pair{"presence_penalty", &r.presence_penalty},
                                  std::pair{"frequency_penalty", &r.frequency_penalty}})
      if (body.contains(key) && !body[key].is_null()) *to = number(body, key, -2, 2, false);
    if (body.contains("repetition_penalty") && !body["repetition_penalty"].is_null()) {
      const json& v = body["repetition_penalty"];
      if (!v.is_number()) return bad("repetition_penalty", "'repetition_penalty' must be a number, got " + kind(v));
      r.repetition_penalty = v.get<double>();
      if (!std::isfinite(r.repetition_penalty) || r.repetition_penalty <= 0)
        return bad("repetition_penalty", "'repetition_penalty' = " + v.dump() + ": must be a finite number > 0 (1: off)");
    }
    if (body.contains("logit_bias") && !body["logit_bias"].is_null()) {
      const json& lb = body["logit_bias"];
      if (!lb.is_object())
        return bad("logit_bias", "'logit_bias' must be an object mapping token ids (strings) to numbers, got " + kind(lb));
      if (static_cast<std::int64_t>(lb.size()) > llm::kMaxLogitBias)
        return bad("logit_bias", "'logit_bias' has " + std::to_string(lb.size()) + " entries: at most " +
                                     std::to_string(llm::kMaxLogitBias));
      for (const auto& [key, value] : lb.items()) {
        const std::string p = "logit_bias." + key;
        std::int64_t id = -1;
        const bool digits = !key.empty() && key.size() <= 10 &&
                            key.find_first_not_of("0123456789") == std::string::npos;
        if (digits) id = std::stoll(key);
        if (!digits || id > vocab - 1)
          return bad("logit_bias", "'logit_bias' key '" + key + "': must be a token id in [0, " +
                                       std::to_string(vocab) + ") written as a decimal string");
        if (!value.is_number()) return bad("logit_bias", "'" + p + "' must be a number, got " + kind(value));
        const double b = value.get<double>();
        if (!std::isfinite(b) || b < -100 || b > 100)
          return bad("logit_bias", "'" + p + "' = " + value.dump() + ": must be in [-100, 100]");
        r.logit_bias[static_cast<std::int32_t>(id)] = b;
      }
    }
    // Log-probabilities: chat `logprobs` (a boolean) + `top_logprobs` (0..20), completions
    // `logprobs` (an integer, 0..5).
    if (chat) {
      const bool on = body.contains("logprobs") && !body["logprobs"].is_null() && boolean(body, "logprobs");
      if (body.contains("top_logprobs") && !body["top_logprobs"].is_null()) {
        const std::int64_t k = integer(body, "top_logprobs", 0, llm::kMaxTopLogprobs);
        if (!on) return bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        r.logprobs = k;
      } else if (on) {
        r.logprobs = 0;
      }
    } else if (body.contains("logprobs") && !body["logprobs"].is_null()) {
      r.logprobs = integer(body, "logprobs", 0, 5);
    }
    if (body.contains("echo") && !body["echo"].is_null() && boolean(body, "echo")) {
      out.echo = true;
      r.prompt_logprobs = r.logprobs;  // the prompt's tokens' (the first one's null)
    }
    if (body.contains("suffix") && !body["suffix"].is_null())
      return bad("suffix", "'suffix' is not supported", "unsupported_value");
    if (chat && (body.contains("tools") || body.contains("tool_choice") || body.contains("parallel_tool_calls"))) {
      const bool has = body.contains("tools") && !body["tools"].is_null();
      if (auto e = parse_tools(body, has ? ResponseJson::parse(text) : ResponseJson(), out.tools)) return *e;
    }
    if (body.contains("response_format") && !body["response_format"].is_null()) {
      out.format = response_format(body["response_format"]);
      // The schema's keys in the order the client wrote them (the body's map sorts them; a schema's
      // properties are generated in its order): the schema dumped again from an order-keeping parse.
      if (out.format.kind == ResponseFormat::Kind::json_schema && out.format.schema != "{}")
        out.format.schema = ResponseJson::parse(text)["response_format"]["json_schema"]["schema"].dump();
      if (out.format.kind != ResponseFormat::Kind::text && out.tools.active())
        return bad("response_format", "'response_format' " + body["response_format"]["type"].get<std::string>() +
                                          " cannot be combined with 'tools' (unless 'tool_choice' is 'none')");
    }
    if (body.contains("user") && !body["user"].is_null() && !body["user"].is_string())
      return bad("user", "'user' must be a string, got " + kind(body["user"]));
  } catch (const FieldError& e) {
    return e.error;
  } catch (const json::exception& e) {  // a type mismatch the checks above did not foresee
    return bad("", std::string("the body does not fit the request's schema: ") + e.what());
  }
  return out;
}

namespace {

ResponseJson chunk(Endpoint e, const ResponseIds& ids, ResponseJson choice) {
  const bool chat = e == Endpoint::chat;
  return ResponseJson{{"id", ids.id}, {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", ids.created}, {"model", ids.model},
              {"choices", choice.is_null() ? ResponseJson::array() : ResponseJson::array({std::move(choice)})}};
}

std::string event(const ResponseJson& j) { return "data: " + to_text(j) + "\n\n"; }

}  // namespace

std::string response_id(Endpoint endpoint, llm::RequestId id) {
  return (endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-") + std::to_string(id);
}

ResponseJson usage(const std::vector<llm::StepOutput>& lasts) {
  std::int64_t completion = 0;
  for (const llm::StepOutput& o : lasts) completion += o.completion_tokens;
  const std::int64_t prompt = lasts.empty() ? 0 : lasts.front().prompt_tokens;
  const std::int64_t cached = lasts.empty() ? 0 : lasts.front().cached_tokens;
  return ResponseJson{{"prompt_tokens", prompt}, {"completion_tokens", completion},
                      {"total_tokens", prompt + completion}, {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

ResponseJson choice_body(Endpoint endpoint, std::int64_t index, const std::string& text, llm::FinishReason reason,
                         ResponseJson logprobs, ResponseJson tool_calls) {
  const bool calls = tool_calls.is_array() && !tool_calls.empty();
  const std::string r = calls && reason == llm::FinishReason::stop ? "tool_calls" : llm::finish_reason_name(reason);
  if (endpoint != Endpoint::chat)
    return ResponseJson{{"index", index}, {"text", text}, {"finish_reason", r}, {"logprobs", std::move(logprobs)}};
  ResponseJson message{{"role", "assistant"}, {"content", calls && text.empty() ? ResponseJson(nullptr) : ResponseJson(text)}};
  if (calls) message["tool_calls"] = std::move(tool_calls);
  return ResponseJson{{"index", index}, {"message", std::move(message)}, {"finish_reason", r},
                      {"logprobs", std::move(logprobs)}};
}

ResponseJson tool_calls_json(llm::RequestId request, std::int64_t first, const std::vector<ToolCall>& calls, bool delta) {
  ResponseJson out = ResponseJson::array();
  for (std::size_t k = 0; k < calls.size(); ++k) {
    const std::int64_t n = first + static_cast<std::int64_t>(k);
    ResponseJson c;
    if (delta) c["index"] = n;
    c["id"] = "call_" + std::to_string(request) + "_" + std::to_string(n);
    c["type"] = "function";
    c["function"] = {{"name", calls[k].name}, {"arguments", calls[k].arguments}};
    out.push_back(std::move(c));
  }
  return out;
}

std::string event_tool_calls(const ResponseIds& ids, std::int64_t index, ResponseJson calls) {
  return event(chunk(Endpoint::chat, ids,
                     {{"index", index}, {"delta", {{"tool_calls", std::move(calls)}}}, {"finish_reason", nullptr}}));
}

ResponseJson completion_body(Endpoint endpoint, const ResponseIds& ids, ResponseJson choices, ResponseJson usage) {
  const bool chat = endpoint == Endpoint::chat;
  return ResponseJson{{"id", ids.id}, {"object", chat ? "chat.completion" : "text_completion"}, {"created", ids.created},
                      {"model", ids.model}, {"choices", std::move(choices)}, {"usage", std::move(usage)}};
}

std::string event_role(const ResponseIds& ids, std::int64_t index) {
  return event(chunk(Endpoint::chat, ids,
                     {{"index", index}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"finish_reason", nullptr}}));
}

std::string event_text(Endpoint endpoint, const ResponseIds& ids, std::int64_t index, const std::string& text,
                       ResponseJson logprobs) {
  ResponseJson choice = endpoint == Endpoint::chat
                            ? ResponseJson{{"index", index}, {"delta", {{"content", text}}}, {"finish_reason", nullptr}}
                            : ResponseJson{{"index", index}, {"text", text}, {"finish_reason", nullptr}};
  if (!logprobs.is_null()) choice["logprobs"] = std::move(logprobs);
  return event(chunk(endpoint, ids, std::move(choice)));
}

std::string event_finish(Endpoint endpoint, const ResponseIds& ids, std::int64_t index, llm::FinishReason reason,
                         bool tool_calls) {
  const std::string r = tool_calls && reason == llm::FinishReason::stop                          ? "tool_calls"
                        : reason == llm::FinishReason::stop || reason == llm::FinishReason::length ? llm::finish_reason_name(reason)
                                                                                                   : "error";
  return event(chunk(endpoint, ids,
                     endpoint == Endpoint::chat
                         ? ResponseJson{{"index", index}, {"delta", ResponseJson::object()}, {"finish_reason", r}}
                         : ResponseJson{{"index", index}, {"text", ""}, {"finish_reason", r}}));
}

std::string event_usage(Endpoint endpoint, const ResponseIds& ids, ResponseJson usage) {
  ResponseJson u = chunk(endpoint, ids, nullptr);
  u["usage"] = std::move(usage);
  return event(u);
}

}  // namespace npugraph::serve
