// npugraph-serve's HTTP/1.1 layer: event-driven (Boost.Asio, Boost.Beast's parser), wire-format
// agnostic. Routes are a table; a handler gets the request and an Exchange to answer through, from
// any thread, whole or as a stream. Note [HTTP layer] (http.cpp) says what it guarantees.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace npugraph::serve::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Limits {
  std::size_t max_header_bytes = 16 << 10;  // request line + headers; more: 431
  std::size_t max_headers = 100;            // header fields; more: 431
  std::size_t max_body_bytes = 4 << 20;     // in every transfer encoding; more: 413
  std::chrono::milliseconds header_timeout{10'000};  // the whole header, from its first byte's wait
  std::chrono::milliseconds body_timeout{30'000};    // the whole body
  std::chrono::milliseconds write_timeout{30'000};   // one write of a response (a client not reading)
  std::size_t max_connections = 512;
  std::size_t max_queued_bytes = 4 << 20;  // a response's bytes queued for a client that does not read
};

struct Request {
  std::string method, target, path;  // path: the target before any '?'
  unsigned version = 11;             // 10 or 11
  Headers headers;
  std::string body;
  // The first value of a header (case-insensitive name), or nullopt.
  std::optional<std::string_view> header(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  Headers headers;
};

class Session;

// One request's answer. Thread-safe: every call is carried to the connection's I/O thread; calls
// after the answer is complete, or after the client has gone, do nothing.
class Exchange {
 public:
  Exchange(std::weak_ptr<Session> session, std::uint64_t answer) : session_(std::move(session)), answer_(answer) {}
  void respond(Response r);
  // A 200 whose body follows in write()s: chunked for HTTP/1.1, up to the close for HTTP/1.0.
  // `keepalive`: bytes the stream's format ignores (an SSE comment), written to find out whether a
  // client that half-closed is still there; "" for none.
  void start_stream(std::string content_type, Headers headers = {}, std::string keepalive = "");
  void write(std::string data);
  void end();
  // `gone` runs once, on the I/O thread, if the client goes before the answer is complete: it
  // reset the connection, a write failed or timed out, or it stopped reading with too much queued.
  // A client that only half-closed (shut its sending side after the request) is not gone.
  void on_gone(std::function<void()> gone);

 private:
  std::weak_ptr<Session> session_;
  std::uint64_t answer_;  // which of the connection's requests this answers
};

enum class Auth { none, key };

struct Route {
  std::string method, path;
  Auth auth = Auth::none;
  // Called on the I/O thread with the whole request (body read, within the limits); it answers
  // through the Exchange, now or later, from any thread. It must not block.
  std::function<void(Request, std::shared_ptr<Exchange>)> handler;
};

struct Options {
  Limits limits;
  std::string api_key;  // "" : no route needs a key
  // The body of an error the layer itself answers (400, 401, 404, 405, 408, 413, 431, 503).
  std::function<Response(int status, std::string message, std::string code)> error;
  std::function<void(int status)> on_refused;  // counts those answers (metrics)
};

class Server {
 public:
  Server(boost::asio::io_context& io, Options options, std::vector<Route> routes);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens; returns the port (port 0: a free one). std::runtime_error when it cannot.
  int listen(const std::string& host, int port);
  // Closes the listener and every connection, answered or not (call on the I/O thread, or post it).
  void close_all();
  // Connections open now, and those with an answer in progress (for draining).
  std::size_t connections() const;
  std::size_t answering() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// 'Bearer KEY' (scheme case-insensitive, one or more spaces) against `key`, in time that does not
// depend on where the two differ. A value with a control character never matches.
bool bearer_matches(std::string_view authorization, std::string_view key);

}  // namespace npugraph::serve::http
