#include "serve/options.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <vector>

#include "kv_dtype_flag.hpp"
#include "model_names.hpp"

namespace npugraph::serve {
namespace {

struct Flag {
  const char* name;
  const char* value;  // "" : takes no value
  const char* help;
  std::function<void(Options&, const std::string&)> set;
};

[[noreturn]] void usage(const std::vector<Flag>& flags, const std::string& error) {
  std::string text = error.empty() ? "" : "npugraph-serve: " + error + "\n\n";
  text += "usage: npugraph-serve [flags]\n"
          "  An OpenAI-compatible server: POST /v1/chat/completions, /v1/completions (stream or not),\n"
          "  GET /v1/models, /health, /metrics (Prometheus). SIGTERM/SIGINT drain, then exit 0; a second\n"
          "  signal exits at once.\n\n";
  for (const Flag& f : flags) {
    std::string left = std::string("  ") + f.name + (*f.value ? std::string(" ") + f.value : "");
    if (left.size() < 28) left.resize(28, ' ');
    else left += "\n" + std::string(28, ' ');
    text += left + f.help + "\n";
  }
  std::fputs(text.c_str(), stderr);
  std::exit(error.empty() ? 0 : 2);
}

// An integer in [lo, hi], or a usage error naming the flag, the value and the rule.
std::int64_t integer(const std::string& flag, const std::string& v, std::int64_t lo, std::int64_t hi) {
  std::size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size()) throw std::invalid_argument(flag + " = '" + v + "': must be an integer");
  if (n < lo || n > hi)
    throw std::invalid_argument(flag + " = " + v + ": must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return n;
}

std::vector<Flag> flags() {
  constexpr std::int64_t kBig = std::int64_t{1} << 40;
  return {
      {"--model", "PATH|smollm2|gemma3", "the GGUF file (default: $NPUGRAPH_MODEL, else smollm2)",
       [](Options& o, const std::string& v) { o.model = apps::model_named(v); }},
      {"--model-id", "NAME", "the model's name in the API (default: the file's stem)",
       [](Options& o, const std::string& v) { o.model_id = v; }},
      {"--host", "ADDR", "the address to listen on (default 127.0.0.1)", [](Options& o, const std::string& v) { o.host = v; }},
      {"--port", "N", "the port (default 8000; 0: a free one, printed as 'listening on http://HOST:PORT')",
       [](Options& o, const std::string& v) { o.port = static_cast<int>(integer("--port", v, 0, 65535)); }},
      {"--api-key", "KEY", "/v1/* (and /metrics, see --metrics-auth) then need 'Authorization: Bearer KEY'",
       [](Options& o, const std::string& v) { o.api_key = v; }},
      {"--metrics-auth", "key|none", "whether /metrics needs the API key (default key; /health never does)",
       [](Options& o, const std::string& v) {
         if (v != "key" && v != "none") throw std::invalid_argument("--metrics-auth = '" + v + "': must be key or none");
         o.metrics_auth = v == "key";
       }},
      {"--threads", "N", "compute threads (default: the machine's cores)",
       [](Options& o, const std::string& v) { o.threads = static_cast<int>(integer("--threads", v, 0, 4096)); }},
      {"--workers", "N", "threads that parse and tokenise requests (default 2)",
       [](Options& o, const std::string& v) { o.workers = static_cast<int>(integer("--workers", v, 1, 256)); }},
      {"--max-batch", "N", "requests decoded together (default 16)",
       [](Options& o, const std::string& v) { o.max_batch = integer("--max-batch", v, 1, 4096); }},
      {"--max-context", "N", "tokens per request (default: the model's context)",
       [](Options& o, const std::string& v) { o.max_context = integer("--max-context", v, 0, kBig); }},
      {"--max-waiting", "N", "requests queued beyond the batch's rows; more get 503 + Retry-After (default 64)",
       [](Options& o, const std::string& v) { o.max_waiting = integer("--max-waiting", v, 0, kBig); }},
      {"--mode", "graph|eager", "the decode step captured once and updated (graph, default) or op by op",
       [](Options& o, const std::string& v) {
         if (v != "graph" && v != "eager") throw std::invalid_argument("--mode = '" + v + "': must be graph or eager");
         o.mode = v;
       }},
      {"--kv-dtype", "f32|f16|bf16", "the KV cache's elements (default f32; f16/bf16 halve its memory)",
       [](Options& o, const std::string& v) {
         const auto dt = apps::kv_dtype_named(v);
         if (!dt) throw std::invalid_argument("--kv-dtype = '" + v + "': must be " + apps::kKvDtypeNames);
         o.kv_dtype = *dt;
       }},
      {"--max-connections", "N", "open connections at most (default 512): at the bound a new one closes the "
                                 "oldest idle one, or gets 503 when all are answering",
       [](Options& o, const std::string& v) {
         o.limits.max_connections = static_cast<std::size_t>(integer("--max-connections", v, 1, 1 << 20));
       }},
      {"--max-header-bytes", "N", "a request's header at most (default 16384; more: 431)",
       [](Options& o, const std::string& v) {
         o.limits.max_header_bytes = static_cast<std::size_t>(integer("--max-header-bytes", v, 256, 1 << 24));
       }},
      {"--max-headers", "N", "header fields at most (default 100; more: 431)",
       [](Options& o, const std::string& v) { o.limits.max_headers = static_cast<std::size_t>(integer("--max-headers", v, 1, 1 << 20)); }},
      {"--max-body-bytes", "N", "a request's body at most, however encoded (default 4194304; more: 413)",
       [](Options& o, const std::string& v) {
         o.limits.max_body_bytes = static_cast<std::size_t>(integer("--max-body-bytes", v, 1, kBig));
       }},
      {"--header-timeout-ms", "N", "the whole header within N ms of waiting for it (default 10000)",
       [](Options& o, const std::string& v) { o.limits.header_timeout = std::chrono::milliseconds(integer("--header-timeout-ms", v, 1, kBig)); }},
      {"--body-timeout-ms", "N", "the whole body within N ms (default 30000; later: 408)",
       [](Options& o, const std::string& v) { o.limits.body_timeout = std::chrono::milliseconds(integer("--body-timeout-ms", v, 1, kBig)); }},
      {"--write-timeout-ms", "N", "each write of an answer within N ms, else the client is gone (default 30000)",
       [](Options& o, const std::string& v) { o.limits.write_timeout = std::chrono::milliseconds(integer("--write-timeout-ms", v, 1, kBig)); }},
      {"--drain-seconds", "N", "on SIGTERM, running requests get N s to finish, then are cancelled (default 30)",
       [](Options& o, const std::string& v) { o.drain_seconds = integer("--drain-seconds", v, 0, kBig); }},
      {"--max-seconds", "N", "drain and exit after N seconds (a safeguard for tests; default: never)",
       [](Options& o, const std::string& v) { o.max_seconds = integer("--max-seconds", v, 0, kBig); }},
      {"--min-step-ms", "N", "at least N ms per engine step (paces a tiny model so tests see it run)",
       [](Options& o, const std::string& v) { o.min_step_ms = integer("--min-step-ms", v, 0, kBig); }},
  };
}

}  // namespace

Options parse_options(int argc, char** argv) {
  const std::vector<Flag> table = flags();
  Options o;
  o.model = apps::default_model();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") usage(table, "");
    const Flag* f = nullptr;
    for (const Flag& candidate : table)
      if (a == candidate.name) f = &candidate;
    if (!f) usage(table, "unknown argument '" + a + "'");
    if (i + 1 >= argc) usage(table, a + " needs a value (" + f->value + ")");
    try {
      f->set(o, argv[++i]);
    } catch (const std::invalid_argument& e) {
      usage(table, e.what());
    }
  }
  if (o.model_id.empty()) o.model_id = std::filesystem::path(o.model).stem().string();
  return o;
}

}  // namespace npugraph::serve
