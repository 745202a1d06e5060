// Note [HTTP layer]
// Why Boost.Asio + Beast (Debian's libboost-dev, header-only here): an event loop, so a connection
// costs a socket and a few buffers, never a thread — the 64-thread pool of cpp-httplib 0.11 was held
// by 64 clients trickling header bytes; Beast's parser bounds the header (bytes) and the body (in
// every transfer encoding, chunked included) while it parses, and reads the header apart from the
// body, so a route's key is checked before one body byte is read. libmicrohttpd has only inactivity
// timeouts (a 1 byte/s client never times out); a newer cpp-httplib keeps a thread per connection;
// drogon is not packaged for Debian 12.
//
// What one connection goes through (all of it on the one I/O thread, so no locks):
//   header  the request line and headers, within header_timeout as a whole (not per read: a client
//           trickling bytes is cut at the deadline) and max_header_bytes / max_headers (431); the
//           route (404, 405; HEAD takes a GET route, answered with its head alone, RFC 9110) and
//           its key (401) are decided here; a declared Content-Length over
//           max_body_bytes is a 413 before any body byte is read;
//   body    within body_timeout as a whole (408) and max_body_bytes however it is encoded (413);
//   answer  the route's handler answers through an Exchange from any thread; meanwhile the
//           connection is watched: a reset is the client gone (the handler's on_gone runs, the
//           server cancels the work); an end of stream may be a client that only half-closed, so
//           it is probed — a 100 Continue (HTTP/1.1, before the answer's head) or the stream's
//           keepalive bytes, then again after 100 ms and every second — and only a failed write
//           says it is gone. Writes have write_timeout each, and a client that stops reading
//           while more than max_queued_bytes wait is gone too;
//   next    keep-alive: the next request (pipelined bytes already read are kept); otherwise, and
//           after every refusal, a lingering close (our side shut, the rest of the request read and
//           dropped for up to 2 s) so that the client reads the refusal instead of a reset.
// Connections are bounded (max_connections): at the bound a new one closes the oldest connection
// that is still waiting for its request, so slow or idle clients cannot keep /health from being
// answered; when every connection is busy answering, the new one gets a 503.
#include "serve/http.hpp"

#include <utility>  // before Boost.Asio 1.74's awaitable.hpp, which needs std::exchange

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <deque>
#include <iostream>
#include <limits>
#include <list>
#include <stdexcept>

namespace npugraph::serve::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using error_code = boost::system::error_code;

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

const boost::system::error_category& beast_category() { return bhttp::make_error_code(bhttp::error::bad_method).category(); }
std::string str(beast::string_view v) { return std::string(v.data(), v.size()); }

// 204 and 304 answers have no body, nor a Content-Length or Transfer-Encoding (RFC 9110 6.4.1, 8.6).
bool bodiless(int status) { return status == 204 || status == 304; }

constexpr std::chrono::seconds kLinger{2};
constexpr std::size_t kLingerBytes = 1 << 20;

}  // namespace

std::optional<std::string_view> Request::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return std::string_view(v);
  return std::nullopt;
}

bool bearer_matches(std::string_view authorization, std::string_view key) {
  for (const char c : authorization)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  const std::size_t sp = authorization.find(' ');
  if (sp == std::string_view::npos || !iequals(authorization.substr(0, sp), "bearer")) return false;
  std::string_view token = authorization.substr(sp);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  // Time depends on the key's length only.
  unsigned diff = token.size() == key.size() ? 0u : 1u;
  for (std::size_t i = 0; i < key.size(); ++i)
    diff |= static_cast<unsigned char>(key[i]) ^ static_cast<unsigned char>(i < token.size() ? token[i] : 0);
  return diff == 0 && !key.empty();
}

struct Server::State : std::enable_shared_from_this<Server::State> {
  State(asio::io_context& io_, Options o, std::vector<Route> r)
      : io(io_), options(std::move(o)), routes(std::move(r)), acceptor(io_), retry(io_) {}
  void accept();
  void admit(tcp::socket socket);

  asio::io_context& io;
  Options options;
  std::vector<Route> routes;
  tcp::acceptor acceptor;
  asio::steady_timer retry;  // accept() again after running out of file descriptors
  std::list<std::weak_ptr<Session>> sessions;
  std::atomic<std::size_t> open{0}, answering{0};
  bool closed = false;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  enum class Phase { header, body, answering, closing, closed };

  Session(tcp::socket socket, std::shared_ptr<Server::State> server)
      : server_(std::move(server)), socket_(std::move(socket)), deadline_(socket_.get_executor()),
        write_deadline_(socket_.get_executor()), probe_(socket_.get_executor()) {}

  void start() { read_header(); }
  auto executor() { return socket_.get_executor(); }
  Phase phase() const { return phase_; }
  Clock::time_point since() const { return since_; }
  std::list<std::weak_ptr<Session>>::iterator slot;

  // Exchange's calls, on the I/O thread.
  void respond(std::uint64_t answer, Response r);
  void start_stream(std::uint64_t answer, std::string content_type, Headers headers, std::string keepalive);
  void write(std::uint64_t answer, std::string data);
  void end(std::uint64_t answer);
  void on_gone(std::uint64_t answer, std::function<void()> gone);
  // Closes now; an answer in progress is gone.
  void close_now();
  // A refusal by the layer itself, then a lingering close.
  void refuse(int status, const std::string& message, const std::string& code = "", Headers extra = {});

 private:
  const Limits& limits() const { return server_->options.limits; }
  void arm(asio::steady_timer& t, std::chrono::milliseconds d);
  void read_header();
  void on_header(error_code ec);
  void on_body(error_code ec);
  void dispatch(const Route& route);
  void watch();
  void on_watch(error_code ec, std::size_t n);
  void probe();
  void queue(std::string bytes);
  void write_next();
  void after_answer();
  // The answer no longer counts as answering; returns the session's hold on itself.
  std::shared_ptr<Session> end_answer();
  void gone();
  void linger();
  void drain(error_code ec, std::size_t n);
  std::string head(int status, const std::string& content_type, const Headers& headers,
                   std::optional<std::size_t> length, bool keep_alive) const;
  bool current(std::uint64_t answer) const { return answer == answer_ && phase_ == Phase::answering && !done_; }

  std::shared_ptr<Server::State> server_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  asio::steady_timer deadline_, write_deadline_, probe_;
  Phase phase_ = Phase::header;
  Clock::time_point since_ = Clock::now();
  bool timed_out_ = false;
  // The answer in progress.
  std::uint64_t answer_ = 0;
  bool counted_ = false, keep_alive_ = true, http10_ = false, head_sent_ = false, streaming_ = false, done_ = false;
  bool close_after_ = false, peer_eof_ = false, watching_ = false, next_after_watch_ = false;
  bool head_only_ = false;  // a HEAD request: the GET route's head, no body
  std::string keepalive_;
  std::chrono::milliseconds probe_every_{100};
  std::function<void()> gone_;
  // Held while an answer is in progress: the Exchange holds the session weakly, and a half-closed
  // HTTP/1.0 client leaves no read, write or timer pending to keep it alive until the answer comes.
  std::shared_ptr<Session> keep_;
  std::deque<std::string> out_;
  std::size_t queued_ = 0;
  bool writing_ = false;
  std::array<char, 4096> drain_{};
  std::size_t drained_ = 0;
};

void Session::arm(asio::steady_timer& t, std::chrono::milliseconds d) {
  timed_out_ = false;
  t.expires_after(d);
  t.async_wait([self = shared_from_this(), &t](error_code ec) {
    if (ec || t.expiry() > Clock::now()) return;  // cancelled, or re-armed since
    self->timed_out_ = true;
    error_code ignored;
    self->socket_.close(ignored);  // the pending read or write completes with an error
  });
}

void Session::read_header() {
  phase_ = Phase::header;
  head_only_ = false;
  since_ = Clock::now();
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(limits().max_header_bytes, UINT32_MAX)));
  parser_->body_limit(std::numeric_limits<std::uint64_t>::max());  // a declared length is judged after the key
  arm(deadline_, limits().header_timeout);
  bhttp::async_read_header(socket_, buffer_, *parser_,
                           [self = shared_from_this()](error_code ec, std::size_t) { self->on_header(ec); });
}

void Session::on_header(error_code ec) {
  deadline_.cancel();
  if (phase_ != Phase::header) return;
  if (ec == bhttp::error::header_limit)
    return refuse(431, "the request's header is larger than " + std::to_string(limits().max_header_bytes) + " bytes",
                  "header_too_large");
  if (ec && ec.category() == beast_category() && ec != bhttp::error::end_of_stream &&
      ec != bhttp::error::partial_message)
    return refuse(400, "a malformed HTTP request: " + ec.message(), "bad_request");
  if (ec) return close_now();  // the client left, or sent nothing in time
  const auto& h = parser_->get();
  if (static_cast<std::size_t>(std::distance(h.begin(), h.end())) > limits().max_headers)
    return refuse(431, "the request has more than " + std::to_string(limits().max_headers) + " header fields",
                  "header_too_large");
  const std::string_view target(h.target().data(), h.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  const std::string_view method(h.method_string().data(), h.method_string().size());
  const Route* route = nullptr;
  std::string allow;
  // HEAD is a GET without its body (RFC 9110 9.3.2): a GET route answers both.
  head_only_ = method == "HEAD";
  for (const Route& r : server_->routes) {
    if (r.path != path) continue;
    if (r.method == method || (head_only_ && r.method == "GET")) route = &r;
    allow += (allow.empty() ? "" : ", ") + r.method + (r.method == "GET" ? ", HEAD" : "");
  }
  if (!route && allow.empty()) return refuse(404, "no such endpoint: '" + std::string(path) + "'", "not_found");
  if (!route)
    return refuse(405, "'" + std::string(path) + "' takes " + allow + ", not " + std::string(method),
                  "method_not_allowed", {{"Allow", allow}});
  if (route->auth == Auth::key && !server_->options.api_key.empty()) {
    const auto it = h.find(bhttp::field::authorization);
    const std::string_view value = it == h.end() ? std::string_view() : std::string_view(it->value().data(), it->value().size());
    if (!bearer_matches(value, server_->options.api_key))
      return refuse(401, "a valid API key is required: 'Authorization: Bearer <key>'", "invalid_api_key");
  }
  if (const auto n = parser_->content_length(); n && *n > limits().max_body_bytes)
    return refuse(413, "the body is " + std::to_string(*n) + " bytes; at most " +
                           std::to_string(limits().max_body_bytes) + " are accepted", "body_too_large");
  if (parser_->is_done()) return dispatch(*route);
  if (const auto it = h.find(bhttp::field::expect); it != h.end() && iequals(std::string_view(it->value().data(), it->value().size()), "100-continue"))
    queue("HTTP/1.1 100 Continue\r\n\r\n");
  parser_->body_limit(limits().max_body_bytes);
  phase_ = Phase::body;
  arm(deadline_, limits().body_timeout);
  bhttp::async_read(socket_, buffer_, *parser_, [self = shared_from_this(), route](error_code e, std::size_t) {
    self->deadline_.cancel();
    if (self->phase_ != Phase::body) return;
    if (e == bhttp::error::body_limit)
      return self->refuse(413, "the body is larger than " + std::to_string(self->limits().max_body_bytes) + " bytes",
                          "body_too_large");
    if (e && self->timed_out_) {
      self->timed_out_ = false;
      return self->refuse(408, "the body did not arrive within " +
                                   std::to_string(self->limits().body_timeout.count()) + " ms", "timeout");
    }
    if (e && e.category() == beast_category() && e != bhttp::error::end_of_stream &&
        e != bhttp::error::partial_message)
      return self->refuse(400, "a malformed HTTP body: " + e.message(), "bad_request");
    if (e) return self->close_now();
    self->dispatch(*route);
  });
}

void Session::dispatch(const Route& route) {
  auto msg = parser_->release();
  Request req;
  req.method = str(msg.method_string());
  req.target = str(msg.target());
  req.path = req.target.substr(0, req.target.find('?'));
  req.version = msg.version();
  for (const auto& f : msg) req.headers.emplace_back(str(f.name_string()), str(f.value()));
  req.body = std::move(msg.body());
  phase_ = Phase::answering;
  answer_ += 1;
  counted_ = true;
  server_->answering += 1;
  keep_ = shared_from_this();
  keep_alive_ = msg.keep_alive();
  http10_ = msg.version() < 11;
  head_sent_ = streaming_ = done_ = close_after_ = peer_eof_ = false;
  probe_every_ = std::chrono::milliseconds(100);
  gone_ = {};
  watch();
  auto exchange = std::make_shared<Exchange>(weak_from_this(), answer_);
  try {
    route.handler(std::move(req), exchange);
  } catch (const std::exception& e) {
    std::cerr << "npugraph-serve: " << route.method << ' ' << route.path << " failed: " << e.what() << '\n';
    Response r = server_->options.error(500, "the server failed to handle the request", "internal_error");
    r.status = 500;
    respond(answer_, std::move(r));
  }
}

void Session::watch() {
  if (watching_ || peer_eof_ || buffer_.size() >= limits().max_header_bytes + limits().max_body_bytes) return;
  watching_ = true;
  socket_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](error_code ec, std::size_t n) {
    self->on_watch(ec, n);
  });
}

void Session::on_watch(error_code ec, std::size_t n) {
  watching_ = false;
  if (!ec) buffer_.commit(n);
  if (phase_ == Phase::closed) return;
  if (phase_ == Phase::closing) return drain(ec, 0);
  if (next_after_watch_) {  // the answer is complete: on to the next request
    next_after_watch_ = false;
    if (ec == asio::error::eof) peer_eof_ = true;
    if (peer_eof_ && buffer_.size() == 0) return linger();
    return read_header();
  }
  if (!ec) return watch();  // pipelined bytes of a next request: kept
  if (ec == asio::error::eof) {  // half-closed, or closed: probe
    peer_eof_ = true;
    return probe();
  }
  if (ec != asio::error::operation_aborted) gone();
}

void Session::probe() {
  if (phase_ != Phase::answering || done_) return;
  if (streaming_ && !keepalive_.empty()) {
    write(answer_, keepalive_);
  } else if (!head_sent_ && !http10_) {
    queue("HTTP/1.1 100 Continue\r\n\r\n");  // RFC 9110 15.2: clients take any number of 1xx
  } else {
    return;  // nothing can be written that a client would ignore: its answer will tell
  }
  probe_.expires_after(probe_every_);
  probe_every_ = std::chrono::milliseconds(1000);
  probe_.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec) self->probe();
  });
}

void Session::queue(std::string bytes) {
  if (phase_ == Phase::closed || phase_ == Phase::closing || bytes.empty()) return;
  queued_ += bytes.size();
  out_.push_back(std::move(bytes));
  if (phase_ == Phase::answering && !done_ && queued_ > limits().max_queued_bytes) return gone();
  if (!writing_) write_next();
}

void Session::write_next() {
  if (out_.empty()) {
    writing_ = false;
    if (done_) after_answer();
    return;
  }
  writing_ = true;
  arm(write_deadline_, limits().write_timeout);
  asio::async_write(socket_, asio::buffer(out_.front()), [self = shared_from_this()](error_code ec, std::size_t) {
    self->write_deadline_.cancel();
    if (self->phase_ == Phase::closed || self->phase_ == Phase::closing) return;
    if (ec) return self->gone();
    self->queued_ -= self->out_.front().size();
    self->out_.pop_front();
    self->write_next();
  });
}

std::string Session::head(int status, const std::string& content_type, const Headers& headers,
                          std::optional<std::size_t> length, bool keep_alive) const {
  const auto reason = bhttp::obsolete_reason(bhttp::int_to_status(static_cast<unsigned>(status)));
  std::string h = std::string(http10_ ? "HTTP/1.0 " : "HTTP/1.1 ") + std::to_string(status) + ' ' +
                  std::string(reason.data(), reason.size()) + "\r\nServer: npugraph-serve\r\n";
  if (!content_type.empty()) h += "Content-Type: " + content_type + "\r\n";
  if (!bodiless(status)) {
    if (length) h += "Content-Length: " + std::to_string(*length) + "\r\n";
    else if (!http10_) h += "Transfer-Encoding: chunked\r\n";
  }
  h += keep_alive ? (http10_ ? "Connection: keep-alive\r\n" : "") : "Connection: close\r\n";
  for (const auto& [k, v] : headers) h += k + ": " + v + "\r\n";
  return h + "\r\n";
}

void Session::respond(std::uint64_t answer, Response r) {
  if (!current(answer) || head_sent_) return;
  close_after_ = !keep_alive_ || server_->closed;
  head_sent_ = done_ = true;
  probe_.cancel();
  std::string bytes = head(r.status, r.content_type, r.headers, r.body.size(), !close_after_);
  queue(std::move(bytes) + (bodiless(r.status) || head_only_ ? "" : r.body));
}

void Session::start_stream(std::uint64_t answer, std::string content_type, Headers headers, std::string keepalive) {
  if (!current(answer) || head_sent_) return;
  close_after_ = !keep_alive_ || http10_ || server_->closed;
  head_sent_ = streaming_ = true;
  keepalive_ = std::move(keepalive);
  queue(head(200, content_type, headers, std::nullopt, !close_after_));
}

void Session::write(std::uint64_t answer, std::string data) {
  if (!current(answer) || !streaming_ || data.empty()) return;
  if (http10_) return queue(std::move(data));
  char size[20];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  queue(std::string(size, static_cast<std::size_t>(n)) + data + "\r\n");
}

void Session::end(std::uint64_t answer) {
  if (!current(answer) || !streaming_) return;
  done_ = true;
  probe_.cancel();
  if (!http10_) queue("0\r\n\r\n");
  if (!writing_) after_answer();
}

void Session::on_gone(std::uint64_t answer, std::function<void()> callback) {
  if (answer != answer_) return;
  if (phase_ == Phase::closed) {
    if (!done_) callback();  // gone before the handler asked
    return;
  }
  if (current(answer)) gone_ = std::move(callback);
}

void Session::after_answer() {
  const auto self = end_answer();  // alive to the end of this call
  gone_ = {};
  probe_.cancel();
  if (close_after_ || server_->closed) return linger();
  if (peer_eof_ && buffer_.size() == 0) return linger();
  if (watching_) {  // the watch read must end before the next header read starts
    next_after_watch_ = true;
    error_code ignored;
    socket_.cancel(ignored);
    return;
  }
  read_header();
}

std::shared_ptr<Session> Session::end_answer() {
  if (counted_) {
    counted_ = false;
    server_->answering -= 1;
  }
  return std::move(keep_);
}

void Session::gone() {
  if (phase_ == Phase::answering && !done_ && gone_) {
    auto g = std::move(gone_);
    gone_ = {};
    g();
  }
  close_now();
}

void Session::close_now() {
  if (phase_ == Phase::closed) return;
  const bool was_answering = phase_ == Phase::answering && !done_;
  phase_ = Phase::closed;
  if (was_answering && gone_) {
    auto g = std::move(gone_);
    gone_ = {};
    g();
  }
  const auto self = end_answer();  // alive to the end of this call
  error_code ignored;
  deadline_.cancel();
  write_deadline_.cancel();
  probe_.cancel();
  socket_.close(ignored);
  server_->sessions.erase(slot);
  server_->open -= 1;
}

void Session::linger() {
  if (phase_ == Phase::closed || phase_ == Phase::closing) return;
  phase_ = Phase::closing;
  error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);
  deadline_.expires_after(kLinger);
  deadline_.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec) self->close_now();
  });
  if (!watching_) drain({}, 0);  // else the watch read ends in on_watch, which drains on
}

void Session::drain(error_code ec, std::size_t n) {
  drained_ += n;
  if (ec || drained_ > kLingerBytes || phase_ != Phase::closing) return close_now();
  socket_.async_read_some(asio::buffer(drain_), [self = shared_from_this()](error_code e, std::size_t k) {
    self->drain(e, k);
  });
}

void Session::refuse(int status, const std::string& message, const std::string& code, Headers extra) {
  if (server_->options.on_refused) server_->options.on_refused(status);
  Response r = server_->options.error(status, message, code);
  r.status = status;
  for (auto& h : extra) r.headers.push_back(std::move(h));
  if (status == 503) r.headers.emplace_back("Retry-After", "1");
  deadline_.cancel();
  phase_ = Phase::answering;  // answered by the layer: counted nowhere, closed after
  answer_ += 1;
  done_ = head_sent_ = close_after_ = true;
  streaming_ = false;
  http10_ = parser_ && parser_->get().version() < 11;
  queue(head(r.status, r.content_type, r.headers, r.body.size(), false) + (head_only_ ? "" : r.body));
}

// Exchange: carried to the I/O thread.
namespace {
template <class F>
void on_io(const std::weak_ptr<Session>& weak, F f) {
  if (auto s = weak.lock()) asio::post(s->executor(), [s, f = std::move(f)]() mutable { f(*s); });
}
}  // namespace

void Exchange::respond(Response r) {
  on_io(session_, [a = answer_, r = std::move(r)](Session& s) mutable { s.respond(a, std::move(r)); });
}
void Exchange::start_stream(std::string content_type, Headers headers, std::string keepalive) {
  on_io(session_, [a = answer_, c = std::move(content_type), h = std::move(headers), k = std::move(keepalive)](
                      Session& s) mutable { s.start_stream(a, std::move(c), std::move(h), std::move(k)); });
}
void Exchange::write(std::string data) {
  on_io(session_, [a = answer_, d = std::move(data)](Session& s) mutable { s.write(a, std::move(d)); });
}
void Exchange::end() {
  on_io(session_, [a = answer_](Session& s) { s.end(a); });
}
void Exchange::on_gone(std::function<void()> gone) {
  if (session_.expired()) return gone();  // closed and released already
  on_io(session_, [a = answer_, g = std::move(gone)](Session& s) mutable { s.on_gone(a, std::move(g)); });
}

// The listener and the bound on connections.
void Server::State::accept() {
  acceptor.async_accept([self = shared_from_this()](error_code ec, tcp::socket socket) {
    if (self->closed) return;
    if (ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space) {  // EMFILE, ENFILE, ENOBUFS
      self->retry.expires_after(std::chrono::milliseconds(100));
      self->retry.async_wait([self](error_code e) {
        if (!e) self->accept();
      });
      return;
    }
    if (!ec) self->admit(std::move(socket));
    self->accept();
  });
}

void Server::State::admit(tcp::socket socket) {
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  bool full = open >= options.limits.max_connections;
  if (full) {  // make room: the oldest connection still waiting for (or lingering after) a request
    std::shared_ptr<Session> oldest;
    for (const auto& w : sessions)
      if (auto s = w.lock(); s && (s->phase() == Session::Phase::header || s->phase() == Session::Phase::closing) &&
                             (!oldest || s->since() < oldest->since()))
        oldest = s;
    if (oldest) {
      oldest->close_now();
      full = false;
    }
  }
  auto session = std::make_shared<Session>(std::move(socket), shared_from_this());
  session->slot = sessions.insert(sessions.end(), session);
  open += 1;
  if (full)
    session->refuse(503, "the server has " + std::to_string(options.limits.max_connections) +
                             " connections, all answering requests: retry later", "too_many_connections");
  else
    session->start();
}

Server::Server(asio::io_context& io, Options options, std::vector<Route> routes)
    : state_(std::make_shared<State>(io, std::move(options), std::move(routes))) {}

Server::~Server() = default;

int Server::listen(const std::string& host, int port) {
  error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) throw std::runtime_error("--host = '" + host + "': not an IP address (" + ec.message() + ")");
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  tcp::acceptor& a = state_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
  state_->accept();
  return a.local_endpoint().port();
}

void Server::close_all() {
  State& s = *state_;
  s.closed = true;
  error_code ignored;
  s.acceptor.close(ignored);
  s.retry.cancel();
  std::vector<std::shared_ptr<Session>> all;
  for (const auto& w : s.sessions)
    if (auto p = w.lock()) all.push_back(std::move(p));
  for (auto& p : all) p->close_now();
}

std::size_t Server::connections() const { return state_->open.load(); }
std::size_t Server::answering() const { return state_->answering.load(); }

}  // namespace npugraph::serve::http
