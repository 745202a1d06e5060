// Note [Routes]
// A completion's request runs in three places: the I/O thread hands the body to a worker (never
// blocking the loop that answers /health); the worker parses it, then EngineHost::submit admits and
// tokenises it; the engine thread's sink turns outputs into bytes for the Exchange. A stream's
// 200 is sent only once the request is queued (a refusal is still a 4xx/5xx), and every byte of
// one answer is handed to the Exchange under the answer's lock, so the order the client reads is
// the order they were made, whichever thread made them. A client gone (Exchange::on_gone) cancels
// its request, whether it waits, prefills or decodes.
#include "serve/routes.hpp"

#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "npugraph/llm/model.hpp"
#include "serve/chat_page.hpp"
#include "serve/logprobs_json.hpp"

namespace npugraph::serve {
namespace {

using nlohmann::json;

// One completion request, from submit to its last output: its n choices, one engine request each.
struct Answer {
  struct Choice {
    std::optional<llm::RequestId> id;
    std::int64_t offset = 0;          // completions' text_offset: characters so far
    std::optional<std::string> echo;  // completions' echo: the prompt, until it is sent
    std::string text;                 // whole answers: the text so far
    ResponseJson body;                // whole answers: choice_body, once finished
    llm::StepOutput last;             // its finishing output's counts (usage)
    std::optional<ToolCallParser> tools;  // a request with tools (Note [Tool calls])
  };
  Answer(std::shared_ptr<http::Exchange> exchange_, Endpoint endpoint_, bool stream_, bool include_usage_,
         const llm::Tokenizer& tok_, bool logprobs_, std::int64_t n, EngineHost& host_)
      : exchange(std::move(exchange_)), endpoint(endpoint_), stream(stream_), include_usage(include_usage_),
        tok(tok_), logprobs(logprobs_), host(host_), choices(static_cast<std::size_t>(n)) {}
  std::shared_ptr<http::Exchange> exchange;
  Endpoint endpoint;
  bool stream, include_usage;
  const llm::Tokenizer& tok;
  bool logprobs;  // the request asked for them
  EngineHost& host;
  ResponseIds ids;
  std::mutex mu;
  std::vector<Choice> choices;
  std::int64_t finished = 0;
  bool gone = false, started = false;
  bool closed = false;  // answered (a refusal, a failed choice): later outputs are dropped
  std::deque<std::pair<std::size_t, llm::StepOutput>> early;  // outputs before the stream's head was sent

  void output(std::size_t i, llm::StepOutput o) {
    const std::lock_guard lock(mu);
    if (closed) return;
    if (stream && !started) {
      early.emplace_back(i, std::move(o));
      return;
    }
    emit(i, std::move(o));
  }
  // The stream's head, then what arrived before it.
  void start() {
    const std::lock_guard lock(mu);
    if (closed) return;
    exchange->start_stream("text/event-stream", {{"Cache-Control", "no-cache"}}, kStreamKeepalive);
    if (endpoint == Endpoint::chat)
      for (std::size_t i = 0; i < choices.size(); ++i) exchange->write(event_role(ids, static_cast<std::int64_t>(i)));
    started = true;
    for (auto& [i, o] : early) emit(i, std::move(o));
    early.clear();
  }
  // Cancels every choice submitted (under mu).
  void cancel_all() {
    for (const Choice& c : choices)
      if (c.id) host.cancel(*c.id);
  }
  // A generated token the text shows: not the end-of-generation token that ended it, which
  // OpenAI's logprobs leave out as its text does.
  bool in_text(const llm::TokenLogprob& t) const { return !tok.is_end_of_generation(t.token); }
  ResponseJson logprobs_of(Choice& c, const std::vector<llm::TokenLogprob>& tokens) {
    if (!logprobs) return nullptr;
    return endpoint == Endpoint::chat ? chat_logprobs(tok, tokens) : completion_logprobs(tok, tokens, c.offset);
  }
  ResponseJson total_usage() const {
    std::vector<llm::StepOutput> lasts;
    for (const Choice& c : choices) lasts.push_back(c.last);
    return usage(lasts);
  }
  void emit(std::size_t i, llm::StepOutput o) {  // under mu
    Choice& c = choices[i];
    const auto index = static_cast<std::int64_t>(i);
    const bool last = o.finish != llm::FinishReason::none;
    if (last) {
      c.last.prompt_tokens = o.prompt_tokens;
      c.last.completion_tokens = o.completion_tokens;
      c.last.cached_tokens = o.cached_tokens;
    }
    if (!stream) {
      c.text += o.text;
      if (!last) return;
      if (o.finish == llm::FinishReason::error || o.finish == llm::FinishReason::cancelled) {
        closed = true;  // one failed choice fails the answer; the others stop
        cancel_all();
        return exchange->respond(error_response({.status = 500, .message = "generation failed", .type = "server_error"}));
      }
      std::vector<llm::TokenLogprob> all;
      if (c.echo) {  // the prompt first
        c.text = *c.echo + c.text;
        all = std::move(o.result->prompt_logprobs);
      }
      for (llm::TokenLogprob& t : o.result->logprobs)
        if (in_text(t)) all.push_back(std::move(t));
      ResponseJson calls = nullptr;
      if (c.tools) {  // the text outside the calls, and the calls
        ToolCallParser::Piece a = c.tools->feed(c.text), b = c.tools->finish();
        a.calls.insert(a.calls.end(), b.calls.begin(), b.calls.end());
        c.text = a.text + b.text;
        calls = tool_calls_json(*c.id, 0, a.calls, /*delta=*/false);
      }
      c.body = choice_body(endpoint, index, c.text, o.finish, logprobs_of(c, all), std::move(calls));
      if (++finished < static_cast<std::int64_t>(choices.size())) return;
      ResponseJson bodies = ResponseJson::array();
      for (Choice& k : choices) bodies.push_back(std::move(k.body));
      return exchange->respond({.body = to_text(completion_body(endpoint, ids, std::move(bodies), total_usage()))});
    }
    if (c.echo) {  // the prompt as the choice's first piece, with its tokens' logprobs
      exchange->write(event_text(endpoint, ids, index, *c.echo, logprobs_of(c, o.prompt_logprobs)));
      c.echo.reset();
    }
    // Each piece with its tokens' logprobs (a step's tokens may add no text yet: still sent).
    std::erase_if(o.logprobs, [&](const llm::TokenLogprob& t) { return !in_text(t); });
    std::vector<ToolCall> calls;
    const std::int64_t first_call = c.tools ? c.tools->calls() : 0;
    if (c.tools) {  // Note [Tool calls]: text held back until it is not the start of a call
      ToolCallParser::Piece piece = c.tools->feed(o.text);
      if (last) {
        ToolCallParser::Piece rest = c.tools->finish();
        piece.text += rest.text;
        piece.calls.insert(piece.calls.end(), rest.calls.begin(), rest.calls.end());
      }
      o.text = std::move(piece.text);
      calls = std::move(piece.calls);
    }
    if (!o.text.empty() || (logprobs && !o.logprobs.empty()))
      exchange->write(event_text(endpoint, ids, index, o.text, logprobs_of(c, o.logprobs)));
    if (!calls.empty())
      exchange->write(event_tool_calls(ids, index, tool_calls_json(*c.id, first_call, calls, /*delta=*/true)));
    if (!last) return;
    exchange->write(event_finish(endpoint, ids, index, o.finish, c.tools && c.tools->calls() > 0));
    if (++finished < static_cast<std::int64_t>(choices.size())) return;
    if (include_usage) exchange->write(event_usage(endpoint, ids, total_usage()));
    exchange->write(kStreamDone);
    exchange->end();
  }
};

// The tools' section of the system message (Note [Tool calls]): appended to the conversation's
// system message, or a system message of its own — after the template's default one, which a
// system message of the conversation's would have replaced.
void with_tools(const llm::Tokenizer& tok, const Tools& tools, std::vector<llm::ChatMessage>& messages) {
  const std::string text = tools_system_text(tools.list);
  if (!messages.empty() && messages.front().role == "system") {
    messages.front().content += "\n\n" + text;
    return;
  }
  std::string system = text;
  try {
    const llm::ChatTemplate& t = tok.chat_template();
    if (t.kind() == llm::ChatTemplate::Kind::chatml_default_system) system = t.default_system() + "\n\n" + text;
  } catch (const ArgumentError&) {  // no template: the engine refuses the request with its reason
  }
  messages.insert(messages.begin(), {"system", std::move(system)});
}

void refuse(RouteContext& c, const std::shared_ptr<http::Exchange>& ex, const ApiError& e) {
  c.metrics.rejected(e.status);
  ex->respond(error_response(e));
}

void completion(RouteContext& c, Endpoint endpoint, http::Request req, std::shared_ptr<http::Exchange> ex) {
  if (c.host.draining())
    return refuse(c, ex, {.status = 503, .message = "the server is shutting down", .type = "server_error"});
  c.work([&c, endpoint, req = std::move(req), ex]() {
    const llm::Engine& engine = c.host.engine();
    auto parsed = parse_request(endpoint, req.body, c.model_id, engine.options().max_context, engine.vocab());
    if (auto* e = std::get_if<ApiError>(&parsed)) return refuse(c, ex, *e);
    ParsedRequest& p = std::get<ParsedRequest>(parsed);
    if (p.format.kind != ResponseFormat::Kind::text) {  // Note [Structured output]
      auto made = c.grammars.constraint(p.format);
      if (auto* e = std::get_if<ApiError>(&made)) return refuse(c, ex, *e);
      p.request.constraint = std::move(std::get<llm::TokenConstraintFactory>(made));
    }
    if (p.tools.active()) {  // Note [Tool calls]: the tools in the system message, the calls constrained
      with_tools(engine.model().tokenizer(), p.tools, p.request.messages);
      auto made = c.grammars.constraint(p.tools);
      if (auto* e = std::get_if<ApiError>(&made)) return refuse(c, ex, *e);
      p.request.constraint = std::move(std::get<llm::TokenConstraintFactory>(made));
    }
    auto a = std::make_shared<Answer>(ex, endpoint, p.stream, p.include_usage, engine.model().tokenizer(),
                                      p.request.logprobs.has_value(), p.n, c.host);
    if (p.echo)
      for (Answer::Choice& k : a->choices) k.echo = p.request.prompt;
    if (p.tools.active())
      for (Answer::Choice& k : a->choices) k.tools.emplace();
    a->ids.model = c.model_id;
    a->ids.created = c.created;
    ex->on_gone([a] {
      const std::lock_guard lock(a->mu);
      a->gone = true;
      a->cancel_all();
    });
    // n requests of the prompt, choice i with seed + i; a refusal of any cancels those queued.
    for (std::size_t i = 0; i < a->choices.size(); ++i) {
      llm::Request r = p.request;
      r.seed += i;
      auto submitted = c.host.submit(r, endpoint == Endpoint::chat ? "messages" : "prompt",
                                     [a, i](llm::StepOutput o) { a->output(i, std::move(o)); });
      const std::lock_guard lock(a->mu);
      if (auto* e = std::get_if<ApiError>(&submitted)) {
        a->closed = true;
        a->cancel_all();
        return refuse(c, ex, *e);
      }
      a->choices[i].id = std::get<llm::RequestId>(submitted);
      if (i == 0) a->ids.id = response_id(endpoint, *a->choices[0].id);
      if (a->gone) c.host.cancel(*a->choices[i].id);
    }
    if (p.stream) a->start();
  });
}

}  // namespace

http::Response error_response(const ApiError& e) {
  http::Response r{.status = e.status, .body = to_text(e.body())};
  if (e.status == 503) r.headers.emplace_back("Retry-After", "1");
  return r;
}

std::vector<http::Route> routes(RouteContext& c) {
  using http::Auth;
  const Auth metrics_auth = c.metrics_auth ? Auth::key : Auth::none;
  std::vector<http::Route> table{
      {"POST", "/v1/chat/completions", Auth::key,
       [&c](http::Request r, std::shared_ptr<http::Exchange> ex) { completion(c, Endpoint::chat, std::move(r), ex); }},
      {"POST", "/v1/completions", Auth::key,
       [&c](http::Request r, std::shared_ptr<http::Exchange> ex) {
         completion(c, Endpoint::completion, std::move(r), ex);
       }},
      {"GET", "/v1/models", Auth::key,
       [&c](http::Request, std::shared_ptr<http::Exchange> ex) {
         const json m{{"id", c.model_id}, {"object", "model"}, {"created", c.created}, {"owned_by", "npugraph"}};
         ex->respond({.body = to_text(json{{"object", "list"}, {"data", json::array({m})}})});
       }},
      {"GET", "/health", Auth::none,
       [&c](http::Request, std::shared_ptr<http::Exchange> ex) {
         const bool draining = c.host.draining();
         ex->respond({.status = draining ? 503 : 200,
                      .body = draining ? R"({"status":"draining"})" : R"({"status":"ok"})"});
       }},
      {"GET", "/metrics", metrics_auth,
       [&c](http::Request, std::shared_ptr<http::Exchange> ex) {
         ex->respond({.content_type = "text/plain; version=0.0.4",
                      .body = c.metrics.text(c.host.load(), std::chrono::steady_clock::now())});
       }},
  };
  if (c.webui)  // public: the page's own API calls carry the key (Note [Chat page])
    for (const char* path : {"/", "/index.html"})
      table.push_back({"GET", path, Auth::none,
                       [](http::Request r, std::shared_ptr<http::Exchange> ex) { ex->respond(chat_page(r)); }});
  return table;
}

}  // namespace npugraph::serve
