// Note [Tool calls] (serve/tools.hpp).
#include "serve/tools.hpp"

#include <algorithm>
#include <cctype>
#include <set>

#include "serve/openai_api.hpp"

namespace npugraph::serve {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
constexpr std::size_t kMaxTools = 128;

ApiError bad(std::string param, std::string message) {
  return ApiError{.message = std::move(message), .param = std::move(param)};
}

std::string kind(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "a number";
  }
}

bool good_name(const std::string& n) {
  return !n.empty() && n.size() <= 64 && std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

}  // namespace

std::optional<ApiError> parse_tools(const json& body, const ordered_json& ordered, Tools& out) {
  const bool has_tools = body.contains("tools") && !body["tools"].is_null();
  if (has_tools) {
    const json& ts = body["tools"];
    if (!ts.is_array() || ts.empty() || ts.size() > kMaxTools)
      return bad("tools", "'tools' must be a non-empty array of at most " + std::to_string(kMaxTools) + " tools, got " +
                              (ts.is_array() ? std::to_string(ts.size()) + " tools" : kind(ts)));
    std::set<std::string> names;
    for (std::size_t i = 0; i < ts.size(); ++i) {
      const std::string p = "tools[" + std::to_string(i) + "]";
      const json& t = ts[i];
      if (!t.is_object() || t.value("type", json()) != "function")
        return bad(p + ".type", "'" + p + ".type' must be 'function' (the only tool type npugraph-serve has)");
      for (const auto& [key, value] : t.items())
        if (key != "type" && key != "function")
          return bad(p + "." + key, "'" + p + "." + key + "' is not a field of a tool ('type', 'function')");
      if (!t.contains("function") || !t["function"].is_object())
        return bad(p + ".function", "'" + p + ".function' is required: an object with 'name' and 'parameters'");
      const json& f = t["function"];
      for (const auto& [key, value] : f.items())
        if (key != "name" && key != "description" && key != "parameters" && key != "strict")
          return bad(p + ".function." + key, "'" + p + ".function." + key +
                                                 "' is not a field of a function ('name', 'description', "
                                                 "'parameters', 'strict')");
      Tool tool;
      if (!f.contains("name") || !f["name"].is_string() || !good_name(f["name"].get<std::string>()))
        return bad(p + ".function.name", "'" + p + ".function.name' = " + (f.contains("name") ? f["name"].dump() : "none") +
                                             ": must be 1 to 64 of a-z, A-Z, 0-9, '_' and '-'");
      tool.name = f["name"].get<std::string>();
      if (!names.insert(tool.name).second)
        return bad(p + ".function.name", "'" + p + ".function.name' = '" + tool.name + "': another tool has this name");
      if (f.contains("description") && !f["description"].is_null()) {
        if (!f["description"].is_string())
          return bad(p + ".function.description", "'" + p + ".function.description' must be a string, got " +
                                                      kind(f["description"]));
        tool.description = f["description"].get<std::string>();
      }
      if (f.contains("parameters") && !f["parameters"].is_null()) {
        if (!f["parameters"].is_object())
          return bad(p + ".function.parameters", "'" + p + ".function.parameters' must be a JSON Schema object, got " +
                                                     kind(f["parameters"]));
        tool.parameters = ordered["tools"][i]["function"]["parameters"].dump();
      } else {
        tool.parameters = R"({"type": "object", "properties": {}})";
      }
      if (f.contains("strict") && !f["strict"].is_null() && !f["strict"].is_boolean())
        return bad(p + ".function.strict", "'" + p + ".function.strict' must be a boolean, got " + kind(f["strict"]));
      out.list.push_back(std::move(tool));
    }
  }
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    const json& c = body["tool_choice"];
    if (!has_tools) return bad("tool_choice", "'tool_choice' needs 'tools'");
    if (c.is_string()) {
      const std::string s = c.get<std::string>();
      if (s == "none") out.choice.kind = ToolChoice::Kind::none;
      else if (s == "auto") out.choice.kind = ToolChoice::Kind::automatic;
      else if (s == "required") out.choice.kind = ToolChoice::Kind::required;
      else return bad("tool_choice", "'tool_choice' = '" + s + "': must be 'none', 'auto', 'required' or a function");
    } else if (c.is_object() && c.value("type", json()) == "function" && c.contains("function") &&
               c["function"].is_object() && c["function"].contains("name") && c["function"]["name"].is_string()) {
      out.choice = {ToolChoice::Kind::named, c["function"]["name"].get<std::string>()};
      if (std::none_of(out.list.begin(), out.list.end(), [&](const Tool& t) { return t.name == out.choice.name; }))
        return bad("tool_choice.function.name", "'tool_choice.function.name' = '" + out.choice.name +
                                                    "': no tool in 'tools' has this name");
    } else {
      return bad("tool_choice", "'tool_choice' must be 'none', 'auto', 'required' or {\"type\": \"function\", "
                                "\"function\": {\"name\": ...}}, got " + c.dump());
    }
  }
  if (body.contains("parallel_tool_calls") && !body["parallel_tool_calls"].is_null()) {
    if (!body["parallel_tool_calls"].is_boolean())
      return bad("parallel_tool_calls", "'parallel_tool_calls' must be a boolean, got " + kind(body["parallel_tool_calls"]));
    out.parallel = body["parallel_tool_calls"].get<bool>();
  }
  return std::nullopt;
}

std::optional<ApiError> tool_calls_text(const json& calls, std::size_t i, std::string& out) {
  const std::string p = "messages[" + std::to_string(i) + "].tool_calls";
  if (!calls.is_array()) return bad(p, "'" + p + "' must be an array of tool calls, got " + kind(calls));
  for (std::size_t k = 0; k < calls.size(); ++k) {
    const std::string pk = p + "[" + std::to_string(k) + "]";
    const json& c = calls[k];
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
      return bad(pk + ".function", "'" + pk + ".function' is required: an object with 'name' and 'arguments'");
    const json& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string())
      return bad(pk + ".function.name", "'" + pk + ".function.name' must be a string");
    if (!f.contains("arguments") || !f["arguments"].is_string())
      return bad(pk + ".function.arguments", "'" + pk + ".function.arguments' must be a string (JSON text)");
    ordered_json args;
    try {
      args = ordered_json::parse(f["arguments"].get<std::string>());
    } catch (const ordered_json::exception&) {
      return bad(pk + ".function.arguments", "'" + pk + ".function.arguments' is not valid JSON");
    }
    const ordered_json call{{"name", f["name"].get<std::string>()}, {"arguments", std::move(args)}};
    if (!out.empty()) out += "\n";
    out += std::string(kOpen) + "\n" + call.dump(-1, ' ', false, ordered_json::error_handler_t::replace) + "\n" +
           std::string(kClose);
  }
  return std::nullopt;
}

std::string tool_response_text(const std::string& content) {
  return "<tool_response>\n" + content + "\n</tool_response>";
}

std::string tools_system_text(const std::vector<Tool>& tools) {
  std::string s =
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
  for (const Tool& t : tools) {
    ordered_json f{{"name", t.name}};
    if (!t.description.empty()) f["description"] = t.description;
    f["parameters"] = ordered_json::parse(t.parameters);
    s += '\n';
    s += ordered_json{{"type", "function"}, {"function", std::move(f)}}.dump(-1, ' ', false,
                                                                            ordered_json::error_handler_t::replace);
  }
  s += "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
       "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
       "<args-json-object>}\n</tool_call>";
  return s;
}

std::string tools_structural_tag(const Tools& tools) {
  ordered_json tags = ordered_json::array();
  for (const Tool& t : tools.list) {
    if (tools.choice.kind == ToolChoice::Kind::named && t.name != tools.choice.name) continue;
    tags.push_back({{"type", "tag"},
                    {"begin", std::string(kOpen) + "\n{\"name\": " + json(t.name).dump() + ", \"arguments\": "},
                    {"content", {{"type", "json_schema"}, {"json_schema", ordered_json::parse(t.parameters)},
                                 {"max_whitespace_cnt", 1}}},
                    {"end", "}\n" + std::string(kClose)}});
  }
  ordered_json format;
  if (tools.choice.kind == ToolChoice::Kind::automatic)
    format = {{"type", "triggered_tags"}, {"triggers", {std::string(kOpen)}}, {"tags", std::move(tags)},
              {"at_least_one", false}, {"stop_after_first", !tools.parallel}};
  else
    format = {{"type", "tags_with_separator"}, {"tags", std::move(tags)}, {"separator", "\n"}, {"at_least_one", true},
              {"stop_after_first", !tools.parallel || tools.choice.kind == ToolChoice::Kind::named}};
  return ordered_json{{"type", "structural_tag"}, {"format", std::move(format)}}.dump();
}

ToolCallParser::Piece ToolCallParser::feed(const std::string& text) {
  pending_ += text;
  return drain(false);
}

ToolCallParser::Piece ToolCallParser::finish() { return drain(true); }

ToolCallParser::Piece ToolCallParser::drain(bool end) {
  Piece out;
  // Text outside blocks: whitespace held until text follows it, leading whitespace dropped.
  auto text = [&](std::string_view s) {
    for (char ch : s) {
      if (std::isspace(static_cast<unsigned char>(ch))) {
        if (any_text_) space_ += ch;
        continue;
      }
      out.text += space_;
      space_.clear();
      out.text += ch;
      any_text_ = true;
    }
  };
  for (;;) {
    if (!in_block_) {
      const std::size_t at = pending_.find(kOpen);
      if (at != std::string::npos) {
        text(std::string_view(pending_).substr(0, at));
        pending_.erase(0, at + kOpen.size());
        in_block_ = true;
        continue;
      }
      // Keep what could be the start of "<tool_call>" (unless this is the end).
      std::size_t keep = 0;
      if (!end)
        for (std::size_t k = std::min(kOpen.size() - 1, pending_.size()); k > 0; --k)
          if (pending_.compare(pending_.size() - k, k, kOpen.substr(0, k)) == 0) {
            keep = k;
            break;
          }
      text(std::string_view(pending_).substr(0, pending_.size() - keep));
      pending_.erase(0, pending_.size() - keep);
      break;
    }
    const std::size_t close = pending_.find(kClose);
    if (close == std::string::npos) {
      if (end) {  // cut short: given back as text
        text(std::string(kOpen) + pending_);
        pending_.clear();
        in_block_ = false;
      }
      break;
    }
    const std::string inner = pending_.substr(0, close);
    pending_.erase(0, close + kClose.size());
    in_block_ = false;
    bool ok = false;
    try {
      const ordered_json j = ordered_json::parse(inner);
      if (j.is_object() && j.size() == 2 && j.contains("name") && j["name"].is_string() && j.contains("arguments") &&
          j["arguments"].is_object()) {
        out.calls.push_back({j["name"].get<std::string>(), j["arguments"].dump()});
        ++calls_;
        ok = true;
      }
    } catch (const ordered_json::exception&) {
    }
    if (!ok) text(std::string(kOpen) + inner + std::string(kClose));
  }
  if (end) space_.clear();
  return out;
}

}  // namespace npugraph::serve
