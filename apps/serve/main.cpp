// npugraph-serve: an OpenAI-compatible HTTP server on the step-level engine.
//
// Note [Serving]
// Three kinds of thread: the I/O thread runs every connection (serve/http.hpp, Note [HTTP layer]);
// workers parse and tokenise requests (serve/routes.hpp, Note [Routes]); the engine thread steps
// the engine and hands outputs to each request's answer (serve/engine_host.hpp, Note [Engine
// host]). SIGTERM / SIGINT drain: new requests get 503 (/health says "draining"), running ones get
// --drain-seconds to finish, then are cancelled; once their answers are written every connection
// is closed, slow or idle ones included, and the process exits 0. A second signal exits at once
// (status 128 + the signal).
#include <sys/resource.h>

#include <utility>  // before Boost.Asio 1.74's awaitable.hpp, which needs std::exchange

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "npugraph/llm/engine.hpp"
#include "npugraph/llm/model.hpp"
#include "serve/engine_host.hpp"
#include "serve/http.hpp"
#include "serve/options.hpp"
#include "serve/routes.hpp"

namespace {

namespace asio = boost::asio;
namespace llm = npugraph::llm;
namespace serve = npugraph::serve;
using Clock = std::chrono::steady_clock;

// Room for the connections: the soft limit on open files raised to the hard one; fewer
// connections (and a warning) if even that is too few.
void fit_connections(serve::Options& o) {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &r);
    (void)getrlimit(RLIMIT_NOFILE, &r);
  }
  constexpr std::size_t kSpare = 64;  // the model file, the listener, the engine's own
  if (r.rlim_cur != RLIM_INFINITY && o.limits.max_connections + kSpare > r.rlim_cur) {
    const std::size_t fit = r.rlim_cur > 2 * kSpare ? r.rlim_cur - kSpare : kSpare;
    std::cerr << "npugraph-serve: --max-connections " << o.limits.max_connections << " lowered to " << fit
              << " (the limit on open files is " << r.rlim_cur << ")\n";
    o.limits.max_connections = fit;
  }
}

int serve_until_drained(const serve::Options& o) {
  auto engine = std::make_unique<llm::Engine>(llm::EngineOptions{
      .model = o.model, .threads = o.threads, .max_batch = o.max_batch, .max_context = o.max_context,
      .prefill_chunk = o.prefill_chunk, .mode = o.mode == "eager" ? llm::StepMode::eager : llm::StepMode::graph, .kv_dtype = o.kv_dtype,
      .prefix_cache = o.prefix_cache, .mixed_steps = o.mixed_steps});
  serve::Metrics metrics;
  asio::io_context io;  // outlives the engine thread, whose sinks post to it
  serve::EngineHost host(std::move(engine),
                         {.max_batch = o.max_batch, .max_waiting = o.max_waiting,
                          .min_step = std::chrono::milliseconds(o.min_step_ms)},
                         metrics);
  asio::thread_pool workers(static_cast<std::size_t>(o.workers));
  serve::Grammars grammars(host.engine().model().tokenizer(), host.engine().vocab());
  serve::RouteContext context{.host = host, .metrics = metrics, .model_id = o.model_id,
                              .created = std::time(nullptr), .metrics_auth = o.metrics_auth, .webui = o.webui,
                              .work = [&workers](std::function<void()> f) { asio::post(workers, std::move(f)); },
                              .grammars = grammars};
  serve::http::Server server(
      io,
      {.limits = o.limits, .api_key = o.api_key,
       .error = [](int status, std::string message, std::string code) {
         return serve::error_response({.status = status, .message = std::move(message),
                                       .type = status >= 500 ? "server_error" : "invalid_request_error",
                                       .code = std::move(code)});
       },
       .on_refused = [&metrics](int status) { metrics.rejected(status); }},
      serve::routes(context));
  const int port = server.listen(o.host, o.port);
  std::cout << "npugraph-serve: model '" << o.model_id << "' listening on http://" << o.host << ":" << port
            << std::endl;

  asio::signal_set signals(io, SIGINT, SIGTERM);
  asio::steady_timer lifetime(io);
  std::thread drainer;
  auto drain = [&] {
    if (host.draining()) return;
    host.start_draining();
    const llm::EngineLoad load = host.load();
    std::cout << "npugraph-serve: draining " << load.running + load.waiting << " requests" << std::endl;
    drainer = std::thread([&] {
      if (!host.wait_idle(Clock::now() + std::chrono::seconds(o.drain_seconds))) {
        std::cout << "npugraph-serve: --drain-seconds " << o.drain_seconds << " passed: cancelling the rest"
                  << std::endl;
        host.cancel_all();
        (void)host.wait_idle(Clock::now() + std::chrono::seconds(30));
      }
      // The last answers' bytes, to clients still reading (a bounded wait: then they are cut).
      const auto written = Clock::now() + std::chrono::seconds(5);
      while (server.answering() > 0 && Clock::now() < written) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      asio::post(io, [&] {
        server.close_all();
        signals.cancel();
        lifetime.cancel();
      });
    });
  };
  std::function<void(const boost::system::error_code&, int)> on_signal = [&](const boost::system::error_code& ec,
                                                                             int signo) {
    if (ec) return;
    if (host.draining()) {
      std::cout << "npugraph-serve: a second signal: exiting now" << std::endl;
      std::_Exit(128 + signo);
    }
    drain();
    signals.async_wait(on_signal);
  };
  signals.async_wait(on_signal);
  if (o.max_seconds > 0) {
    lifetime.expires_after(std::chrono::seconds(o.max_seconds));
    lifetime.async_wait([&](const boost::system::error_code& ec) {
      if (!ec) drain();
    });
  }
  io.run();
  if (drainer.joinable()) drainer.join();
  workers.join();
  std::cout << "npugraph-serve: stopped" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  serve::Options o = serve::parse_options(argc, argv);
  fit_connections(o);
#ifdef SIGPIPE
  std::signal(SIGPIPE, SIG_IGN);
#endif
  try {
    return serve_until_drained(o);
  } catch (const std::exception& e) {
    std::cerr << "npugraph-serve: " << e.what() << '\n';
    return 1;
  }
}
