// Note [Chat page]
// A chat page at GET / (and /index.html), as llama-server has: one self-contained file,
// apps/serve/chat/index.html (inline CSS and JS, no build step, nothing fetched but this server's
// own API), embedded into the binary at build time (cmake/EmbedPage.cmake), so an installed server
// needs no data files. --no-webui leaves its routes out (404).
//   auth    the page is public: it holds no secret. The calls it makes (GET /v1/models, POST
//           /v1/chat/completions) carry the key typed into its settings (kept in the browser's
//           localStorage), so with --api-key /v1/* stay as closed as for any other client;
//   CSP     default-src 'none', and of inline code only the page's own <script> and <style>, by
//           their SHA-256 (computed at build time), rather than 'unsafe-inline': were model text
//           ever to reach the DOM as markup (the page sets it only as textContent), nothing in it
//           could run or load. connect-src 'self': the page talks to this server only; img-src
//           data: for its empty favicon (no request for /favicon.ico). A nonce would need a page
//           rewritten per response, for nothing a static page's hashes do not give;
//   cache   Cache-Control: no-cache with the page's SHA-256 as its ETag: a browser revalidates on
//           each load and gets a 304 (no body) while the binary is the same, and a new binary's
//           page at once;
//   stop    the page aborts its fetch; the browser closes the connection, the HTTP layer sees the
//           client gone (Note [HTTP layer]) and the request is cancelled and its KV blocks freed
//           (Note [Routes]) — tests/python/serve/test_chat_browser.py watches it in /metrics.
#include "serve/chat_page.hpp"

#include <string>
#include <string_view>

#include "serve/chat_page_data.hpp"  // generated: kBytes, kSha256, kScriptSha256, kStyleSha256

namespace npugraph::serve {
namespace {

namespace page = chat_page_data;

// If-None-Match: a list of entity tags, weak or strong, or "*"; compared weakly (RFC 9110 13.1.2).
bool names(std::string_view if_none_match, std::string_view etag) {
  for (;;) {
    const std::size_t comma = if_none_match.find(',');
    std::string_view tag = if_none_match.substr(0, comma);
    while (!tag.empty() && (tag.front() == ' ' || tag.front() == '\t')) tag.remove_prefix(1);
    while (!tag.empty() && (tag.back() == ' ' || tag.back() == '\t')) tag.remove_suffix(1);
    if (tag.starts_with("W/")) tag.remove_prefix(2);
    if (tag == "*" || tag == etag) return true;
    if (comma == std::string_view::npos) return false;
    if_none_match.remove_prefix(comma + 1);
  }
}

}  // namespace

http::Response chat_page(const http::Request& request) {
  static const std::string body(reinterpret_cast<const char*>(page::kBytes), sizeof page::kBytes);
  static const std::string etag = '"' + std::string(page::kSha256).substr(0, 32) + '"';
  static const std::string csp = std::string("default-src 'none'; script-src 'sha256-") + page::kScriptSha256 +
                                 "'; style-src 'sha256-" + page::kStyleSha256 +
                                 "'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
                                 "frame-ancestors 'none'";
  http::Headers headers{{"Cache-Control", "no-cache"}, {"ETag", etag}, {"Content-Security-Policy", csp},
                        {"X-Content-Type-Options", "nosniff"}, {"Referrer-Policy", "no-referrer"}};
  if (const auto tags = request.header("If-None-Match"); tags && names(*tags, etag))
    return {.status = 304, .content_type = "", .headers = std::move(headers)};
  return {.content_type = "text/html; charset=utf-8", .body = body, .headers = std::move(headers)};
}

}  // namespace npugraph::serve
