// npugraph-serve's chat page at GET / (Note [Chat page]): apps/serve/chat/index.html, embedded at
// build time, answered with its security and cache headers.
#pragma once

#include "serve/http.hpp"

namespace npugraph::serve {

// 200 with the page, or 304 (no body) when the request's If-None-Match names the page's ETag.
http::Response chat_page(const http::Request& request);

}  // namespace npugraph::serve
