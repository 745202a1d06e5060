// npugraph-serve's routes: the OpenAI endpoints, /health, /metrics and the chat page at /, as one
// table (Note [Routes]). A new generation endpoint is a parser in openai_api and one row here.
#pragma once

#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "serve/engine_host.hpp"
#include "serve/grammar.hpp"
#include "serve/http.hpp"
#include "serve/metrics.hpp"
#include "serve/openai_api.hpp"

namespace npugraph::serve {

struct RouteContext {
  EngineHost& host;
  Metrics& metrics;
  std::string model_id;
  std::time_t created = 0;
  bool metrics_auth = true;  // /metrics needs the API key (when there is one)
  bool webui = true;         // the chat page at / (Note [Chat page])
  // Runs work off the I/O thread (parsing, tokenising): the server's worker pool.
  std::function<void(std::function<void()>)> work;
  // response_format's grammars (Note [Structured output]).
  Grammars& grammars;
};

// An OpenAI-shaped error as an HTTP response (503s carry Retry-After).
http::Response error_response(const ApiError& e);
std::vector<http::Route> routes(RouteContext& context);

}  // namespace npugraph::serve
