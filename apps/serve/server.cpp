// npugraph-serve: an OpenAI-compatible HTTP server on the step-level engine.
//
// Note [Serving]
// One engine thread owns step(): it sleeps while the engine is idle, else steps and hands each
// request's outputs to that request's channel. HTTP threads (cpp-httplib's pool) only parse, submit
// (Engine::submit is thread-safe and tokenises on the caller's thread), wait on their channel and
// write: a whole response, or server-sent events as the tokens come. A stream whose client has gone
// (a write fails) cancels its request, which frees its KV blocks at the next step. Submitting and
// registering the channel happen under the channel lock that delivery takes, so no output can
// arrive for a request before its channel exists. Requests beyond --max-waiting queued ones get
// 503 with Retry-After (running + waiting >= max_batch + max_waiting); SIGTERM / SIGINT stop new requests (503), let the running ones finish,
// then close the listener.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kv_dtype_flag.hpp"
#include "model_names.hpp"
#include "npugraph/error.hpp"
#include "npugraph/llm/engine.hpp"
#include "serve/metrics.hpp"
#include "serve/openai_api.hpp"

namespace {

namespace llm = npugraph::llm;
namespace serve = npugraph::serve;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop.store(true); }

struct Options {
  std::string model = npugraph::apps::default_model();
  std::string model_id;  // default: the file's stem
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  int threads = 0;
  std::int64_t max_batch = 16, max_context = 0, max_waiting = 64;
  std::string mode = "graph";
  std::int64_t max_seconds = 0;  // 0: run until a signal
  std::int64_t min_step_ms = 0;  // pace the engine (tests: keep a request running long enough to see)
  npugraph::DType kv_dtype = npugraph::DType::f32;  // --kv-dtype (EngineOptions::kv_dtype)
};

[[noreturn]] void usage(const std::string& error) {
  std::fprintf(stderr,
               "%s%susage: npugraph-serve [--model PATH|smollm2|gemma3] [--model-id NAME] [--host ADDR] [--port N]\n"
               "                      [--api-key KEY] [--threads N] [--max-batch N] [--max-context N]\n"
               "                      [--max-waiting N] [--mode graph|eager] [--kv-dtype f32|f16|bf16]\n"
               "                      [--max-seconds N]\n"
               "  An OpenAI-compatible server: POST /v1/chat/completions, /v1/completions (stream or not),\n"
               "  GET /v1/models, /health, /metrics (Prometheus). Listens on 127.0.0.1:8000 unless told.\n"
               "  --port 0 picks a free port (printed as 'listening on http://HOST:PORT').\n"
               "  --api-key: /v1/* then need 'Authorization: Bearer KEY'.\n"
               "  --max-waiting: requests queued beyond the batch's rows; more get 503 with Retry-After (default 64).\n"
               "  --kv-dtype: the KV cache's elements: f32 (default), f16 or bf16 (half the memory per\n"
               "  sequence, as llama.cpp's default f16 cache).\n"
               "  --max-seconds N: drain and exit after N seconds (a safeguard for tests; default: never).\n"
               "  --min-step-ms N: at least N ms per engine step (paces a tiny model so tests see it run).\n",
               error.c_str(), error.empty() ? "" : "\n\n");
  std::exit(2);
}

Options parse_args(int argc, char** argv) {
  Options o;
  auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) usage(std::string(argv[i]) + " needs a value");
    return argv[++i];
  };
  auto number = [&](int& i) -> std::int64_t {
    const std::string flag = argv[i], v = value(i);
    try {
      std::size_t used = 0;
      const long long n = std::stoll(v, &used);
      if (used != v.size()) throw std::invalid_argument(v);
      return n;
    } catch (const std::exception&) {
      usage(flag + " = '" + v + "': must be an integer");
    }
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model") o.model = npugraph::apps::model_named(value(i));
    else if (a == "--model-id") o.model_id = value(i);
    else if (a == "--host") o.host = value(i);
    else if (a == "--port") o.port = static_cast<int>(number(i));
    else if (a == "--api-key") o.api_key = value(i);
    else if (a == "--threads") o.threads = static_cast<int>(number(i));
    else if (a == "--max-batch") o.max_batch = number(i);
    else if (a == "--max-context") o.max_context = number(i);
    else if (a == "--max-waiting") o.max_waiting = number(i);
    else if (a == "--mode") o.mode = value(i);
    else if (a == "--kv-dtype") {
      const std::string v = value(i);
      const auto dt = npugraph::apps::kv_dtype_named(v);
      if (!dt) usage("--kv-dtype = '" + v + "': must be " + npugraph::apps::kKvDtypeNames);
      o.kv_dtype = *dt;
    }
    else if (a == "--max-seconds") o.max_seconds = number(i);
    else if (a == "--min-step-ms") o.min_step_ms = number(i);
    else if (a == "-h" || a == "--help") usage("");
    else usage("unknown argument '" + a + "'");
  }
  if (o.port < 0 || o.port > 65535) usage("--port = " + std::to_string(o.port) + ": must be in [0, 65535]");
  if (o.max_waiting < 0) usage("--max-waiting = " + std::to_string(o.max_waiting) + ": must be >= 0");
  if (o.mode != "graph" && o.mode != "eager") usage("--mode = '" + o.mode + "': must be graph or eager");
  if (o.model_id.empty()) o.model_id = std::filesystem::path(o.model).stem().string();
  return o;
}

// What the engine thread hands one request's HTTP thread.
struct Channel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<llm::StepOutput> outputs;
  Clock::time_point arrived, last_token;
  bool first = true;
};

class Server {
 public:
  Server(Options o, std::unique_ptr<llm::Engine> engine)
      : o_(std::move(o)), engine_(std::move(engine)), created_(std::time(nullptr)) {}

  void run();

 private:
  void engine_loop();
  void deliver(std::vector<llm::StepOutput> outs);
  // Submits a parsed request and registers its channel; an ApiError if the engine refuses it.
  std::variant<std::pair<llm::RequestId, std::shared_ptr<Channel>>, serve::ApiError> start(const llm::Request& r,
                                                                                          serve::Endpoint e);
  void finish(llm::RequestId id);
  void error(httplib::Response& res, const serve::ApiError& e);
  bool authorised(const httplib::Request& req, httplib::Response& res);
  void completion(const httplib::Request& req, httplib::Response& res, serve::Endpoint endpoint);
  json chunk(serve::Endpoint e, const std::string& id, const json& choice) const;

  Options o_;
  std::unique_ptr<llm::Engine> engine_;
  std::time_t created_;
  httplib::Server http_;
  serve::Metrics metrics_;
  std::mutex chan_mu_;
  std::map<llm::RequestId, std::shared_ptr<Channel>> channels_;
  std::mutex wake_mu_;
  std::condition_variable wake_;
  std::atomic<bool> draining_{false}, done_{false};
};

void Server::deliver(std::vector<llm::StepOutput> outs) {
  const auto now = Clock::now();
  std::int64_t tokens = 0;
  const std::lock_guard lock(chan_mu_);
  for (llm::StepOutput& out : outs) {
    tokens += static_cast<std::int64_t>(out.tokens.size());
    if (out.finish != llm::FinishReason::none) metrics_.finished(llm::finish_reason_name(out.finish));
    const auto it = channels_.find(out.id);
    if (it == channels_.end()) continue;  // its client has gone (cancelled)
    Channel& c = *it->second;
    {
      const std::lock_guard cl(c.mu);
      if (!out.tokens.empty()) {
        if (c.first) {
          metrics_.first_token(std::chrono::duration<double>(now - c.arrived).count());
          c.first = false;
          for (std::size_t k = 1; k < out.tokens.size(); ++k) metrics_.inter_token(0);
        } else {
          const double gap = std::chrono::duration<double>(now - c.last_token).count();
          for (std::size_t k = 0; k < out.tokens.size(); ++k) metrics_.inter_token(gap / static_cast<double>(out.tokens.size()));
        }
        c.last_token = now;
      }
      c.outputs.push_back(std::move(out));
    }
    c.cv.notify_all();
  }
  metrics_.tokens(tokens, now);
}

void Server::engine_loop() {
  std::int64_t steps = 0;
  while (!done_.load()) {
    if (++steps % 4096 == 0) engine_->reset_stats();  // RunStats keeps a batch size per step
    {
      std::unique_lock lock(wake_mu_);
      wake_.wait_for(lock, std::chrono::milliseconds(200), [&] { return !engine_->idle() || done_.load(); });
    }
    if (engine_->idle()) continue;
    const auto t = Clock::now();
    try {
      deliver(engine_->step());
      if (o_.min_step_ms > 0) std::this_thread::sleep_until(t + std::chrono::milliseconds(o_.min_step_ms));
    } catch (const std::exception& e) {  // the running requests are reported 'error' by the next step
      std::cerr << "npugraph-serve: a step failed: " << e.what() << '\n';
    }
  }
}

std::variant<std::pair<llm::RequestId, std::shared_ptr<Channel>>, serve::ApiError> Server::start(
    const llm::Request& r, serve::Endpoint e) {
  if (draining_.load())
    return serve::ApiError{.status = 503, .message = "the server is shutting down", .type = "server_error"};
  const llm::EngineLoad load = engine_->load();
  if (load.running + load.waiting >= o_.max_batch + o_.max_waiting)
    return serve::ApiError{.status = 503,
                           .message = "the server is full (" + std::to_string(load.running) + " running, " +
                                      std::to_string(load.waiting) + " waiting; --max-waiting " +
                                      std::to_string(o_.max_waiting) + "): retry later",
                           .type = "server_error", .code = "queue_full"};
  auto c = std::make_shared<Channel>();
  c->arrived = Clock::now();
  llm::RequestId id = 0;
  try {
    const std::lock_guard lock(chan_mu_);
    id = engine_->submit(r);
    channels_[id] = c;
  } catch (const llm::ContextLengthError& err) {
    return serve::ApiError{.message = err.what(), .param = e == serve::Endpoint::chat ? "messages" : "prompt",
                           .code = "context_length_exceeded"};
  } catch (const npugraph::Error& err) {
    return serve::ApiError{.message = err.what()};
  }
  wake_.notify_one();
  return std::pair{id, c};
}

void Server::finish(llm::RequestId id) {
  const std::lock_guard lock(chan_mu_);
  channels_.erase(id);
}

void Server::error(httplib::Response& res, const serve::ApiError& e) {
  metrics_.rejected(e.status);
  res.status = e.status;
  if (e.status == 503) res.set_header("Retry-After", "1");
  res.set_content(serve::to_text(e.body()), "application/json");
}

bool Server::authorised(const httplib::Request& req, httplib::Response& res) {
  if (o_.api_key.empty() || req.get_header_value("Authorization") == "Bearer " + o_.api_key) return true;
  error(res, {.status = 401, .message = "a valid API key is required: 'Authorization: Bearer <key>'",
              .type = "invalid_request_error", .code = "invalid_api_key"});
  return false;
}

json Server::chunk(serve::Endpoint e, const std::string& id, const json& choice) const {
  const bool chat = e == serve::Endpoint::chat;
  return json{{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created_},
              {"model", o_.model_id}, {"choices", json::array({choice})}};
}

json usage_of(const llm::StepOutput& o) {
  return json{{"prompt_tokens", o.prompt_tokens}, {"completion_tokens", o.completion_tokens},
              {"total_tokens", o.prompt_tokens + o.completion_tokens}};
}

void Server::completion(const httplib::Request& req, httplib::Response& res, serve::Endpoint endpoint) {
  if (!authorised(req, res)) return;
  auto parsed = serve::parse_request(endpoint, req.body, o_.model_id, engine_->options().max_context);
  if (auto* e = std::get_if<serve::ApiError>(&parsed)) return error(res, *e);
  const serve::ParsedRequest p = std::move(std::get<serve::ParsedRequest>(parsed));
  auto started = start(p.request, endpoint);
  if (auto* e = std::get_if<serve::ApiError>(&started)) return error(res, *e);
  const auto [id, channel] = std::get<0>(started);
  const bool chat = endpoint == serve::Endpoint::chat;
  const std::string rid = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(id);
  // The next outputs of the request (blocking until there are some).
  auto next = [c = channel] {
    std::unique_lock lock(c->mu);
    c->cv.wait(lock, [&] { return !c->outputs.empty(); });
    std::deque<llm::StepOutput> outs;
    outs.swap(c->outputs);
    return outs;
  };
  if (!p.stream) {
    std::string text;
    llm::StepOutput last;
    while (last.finish == llm::FinishReason::none)
      for (llm::StepOutput& o : next()) {
        text += o.text;
        last = std::move(o);
      }
    finish(id);
    if (last.finish == llm::FinishReason::error || last.finish == llm::FinishReason::cancelled)
      return error(res, {.status = 500, .message = "generation failed", .type = "server_error"});
    const std::string reason = llm::finish_reason_name(last.finish);
    json choice = chat ? json{{"index", 0}, {"message", {{"role", "assistant"}, {"content", text}}},
                              {"finish_reason", reason}, {"logprobs", nullptr}}
                       : json{{"index", 0}, {"text", text}, {"finish_reason", reason}, {"logprobs", nullptr}};
    json body{{"id", rid}, {"object", chat ? "chat.completion" : "text_completion"}, {"created", created_},
              {"model", o_.model_id}, {"choices", json::array({choice})}, {"usage", usage_of(last)}};
    res.set_content(serve::to_text(body), "application/json");
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, id, rid, chat, endpoint, include_usage = p.include_usage, next](std::size_t, httplib::DataSink& sink) {
        auto send = [&](const json& j) {
          const std::string event = "data: " + serve::to_text(j) + "\n\n";
          return sink.write(event.data(), event.size());
        };
        auto gone = [&] {  // the client closed the stream: cancel, free the blocks at the next step
          finish(id);
          engine_->cancel(id);
          return false;
        };
        if (chat && !send(chunk(endpoint, rid, {{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}},
                                                {"finish_reason", nullptr}})))
          return gone();
        for (;;) {
          for (const llm::StepOutput& o : next()) {
            if (!o.text.empty()) {
              const json choice = chat ? json{{"index", 0}, {"delta", {{"content", o.text}}}, {"finish_reason", nullptr}}
                                       : json{{"index", 0}, {"text", o.text}, {"finish_reason", nullptr}};
              if (!send(chunk(endpoint, rid, choice))) return gone();
            }
            if (o.finish == llm::FinishReason::none) continue;
            finish(id);
            const std::string reason = o.finish == llm::FinishReason::stop || o.finish == llm::FinishReason::length
                                           ? llm::finish_reason_name(o.finish)
                                           : "error";
            const json choice = chat ? json{{"index", 0}, {"delta", json::object()}, {"finish_reason", reason}}
                                     : json{{"index", 0}, {"text", ""}, {"finish_reason", reason}};
            bool ok = send(chunk(endpoint, rid, choice));
            if (ok && include_usage) {
              json u = chunk(endpoint, rid, nullptr);
              u["choices"] = json::array();
              u["usage"] = usage_of(o);
              ok = send(u);
            }
            static const std::string kDone = "data: [DONE]\n\n";
            if (ok) sink.write(kDone.data(), kDone.size());
            sink.done();
            return true;
          }
        }
      });
}

void Server::run() {
  http_.new_task_queue = [] { return new httplib::ThreadPool(64); };
  http_.set_payload_max_length(4 << 20);
  http_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completion(req, res, serve::Endpoint::chat);
  });
  http_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completion(req, res, serve::Endpoint::completion);
  });
  http_.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorised(req, res)) return;
    const json m{{"id", o_.model_id}, {"object", "model"}, {"created", created_}, {"owned_by", "npugraph"}};
    res.set_content(serve::to_text(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
  });
  http_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    res.status = draining_.load() ? 503 : 200;
    res.set_content(draining_.load() ? "{\"status\":\"draining\"}" : "{\"status\":\"ok\"}", "application/json");
  });
  http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.text(engine_->load(), Clock::now()), "text/plain; version=0.0.4");
  });
  http_.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    const serve::ApiError e{.status = res.status, .message = "no such endpoint, or a body too large ("
                                                             + std::to_string(res.status) + ")"};
    res.set_content(serve::to_text(e.body()), "application/json");
  });
  const int port = o_.port == 0 ? http_.bind_to_any_port(o_.host) : (http_.bind_to_port(o_.host, o_.port) ? o_.port : -1);
  if (port < 0) {
    std::cerr << "npugraph-serve: cannot listen on " << o_.host << ":" << o_.port << '\n';
    std::exit(1);
  }
  std::thread engine([this] { engine_loop(); });
  std::thread listener([this] { http_.listen_after_bind(); });
  std::cout << "npugraph-serve: model '" << o_.model_id << "' listening on http://" << o_.host << ":" << port
            << std::endl;
  const auto t0 = Clock::now();
  while (!g_stop.load() && (o_.max_seconds <= 0 || Clock::now() - t0 < std::chrono::seconds(o_.max_seconds)))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Drain: refuse new requests, let running ones finish, then close.
  draining_.store(true);
  std::cout << "npugraph-serve: draining " << engine_->load().running + engine_->load().waiting << " requests"
            << std::endl;
  while (!engine_->idle()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // Give the HTTP threads a moment to write the last events of the drained requests.
  for (int i = 0; i < 100; ++i) {
    {
      const std::lock_guard lock(chan_mu_);
      if (channels_.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  http_.stop();
  listener.join();
  done_.store(true);
  wake_.notify_all();
  engine.join();
  std::cout << "npugraph-serve: stopped" << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_args(argc, argv);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
#ifdef SIGPIPE
  std::signal(SIGPIPE, SIG_IGN);
#endif
  try {
    auto engine = std::make_unique<llm::Engine>(llm::EngineOptions{
        .model = o.model, .threads = o.threads, .max_batch = o.max_batch, .max_context = o.max_context,
        .mode = o.mode == "eager" ? llm::StepMode::eager : llm::StepMode::graph, .kv_dtype = o.kv_dtype});
    Server(o, std::move(engine)).run();
  } catch (const std::exception& e) {
    std::cerr << "npugraph-serve: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
