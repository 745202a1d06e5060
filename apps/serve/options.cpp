#include "serve/options.hpp"

#include <filesystem>
#include <vector>

#include "cli_flags.hpp"
#include "kv_dtype_flag.hpp"
#include "model_names.hpp"

namespace npugraph::serve {
namespace {

using apps::integer_flag;
using apps::UsageError;
using Flag = apps::Flag<Options>;

constexpr const char* kAbout =
    "  An OpenAI-compatible server: POST /v1/chat/completions, /v1/completions (stream or not),\n"
    "  GET /v1/models, /health, /metrics (Prometheus), and a chat page at / (see --no-webui).\n"
    "  SIGTERM/SIGINT drain, then exit 0; a second signal exits at once.\n";

std::vector<Flag> flags() {
  constexpr std::int64_t kBig = std::int64_t{1} << 40;
  return {
      {"--model", "PATH|smollm2|gemma3", "the GGUF file (default: $NPUGRAPH_MODEL, else smollm2)",
       [](Options& o, const std::string& v) { o.model = apps::model_named(v); }},
      {"--model-id", "NAME", "the model's name in the API (default: the file's stem)",
       [](Options& o, const std::string& v) { o.model_id = v; }},
      {"--host", "ADDR", "the address to listen on (default 127.0.0.1)", [](Options& o, const std::string& v) { o.host = v; }},
      {"--port", "N", "the port (default 8000; 0: a free one, printed as 'listening on http://HOST:PORT')",
       [](Options& o, const std::string& v) { o.port = static_cast<int>(integer_flag("--port", v, 0, 65535)); }},
      {"--api-key", "KEY", "/v1/* (and /metrics, see --metrics-auth) then need 'Authorization: Bearer KEY'",
       [](Options& o, const std::string& v) { o.api_key = v; }},
      {"--metrics-auth", "key|none", "whether /metrics needs the API key (default key; /health never does)",
       [](Options& o, const std::string& v) {
         if (v != "key" && v != "none") throw UsageError("--metrics-auth = '" + v + "': must be key or none");
         o.metrics_auth = v == "key";
       }},
      {"--no-webui", "", "no chat page at / (then 404); the API is unchanged",
       [](Options& o, const std::string&) { o.webui = false; }},
      {"--threads", "N", "compute threads (default: the machine's cores)",
       [](Options& o, const std::string& v) { o.threads = static_cast<int>(integer_flag("--threads", v, 0, 4096)); }},
      {"--workers", "N", "threads that parse and tokenise requests (default 2)",
       [](Options& o, const std::string& v) { o.workers = static_cast<int>(integer_flag("--workers", v, 1, 256)); }},
      {"--max-batch", "N", "requests decoded together (default 16)",
       [](Options& o, const std::string& v) { o.max_batch = integer_flag("--max-batch", v, 1, 4096); }},
      {"--max-context", "N", "tokens per request (default: the model's context)",
       [](Options& o, const std::string& v) { o.max_context = integer_flag("--max-context", v, 0, kBig); }},
      {"--max-waiting", "N", "requests queued beyond the batch's rows; more get 503 + Retry-After (default 64)",
       [](Options& o, const std::string& v) { o.max_waiting = integer_flag("--max-waiting", v, 0, kBig); }},
      {"--mode", "graph|eager", "the decode step captured once and updated (graph, default) or op by op",
       [](Options& o, const std::string& v) {
         if (v != "graph" && v != "eager") throw UsageError("--mode = '" + v + "': must be graph or eager");
         o.mode = v;
       }},
      {"--kv-dtype", "f32|f16|bf16", "the KV cache's elements (default f32; f16/bf16 halve its memory)",
       [](Options& o, const std::string& v) {
         const auto dt = apps::kv_dtype_named(v);
         if (!dt) throw UsageError("--kv-dtype = '" + v + "': must be " + apps::kKvDtypeNames);
         o.kv_dtype = *dt;
       }},
      {"--prefill-chunk", "N", "prompt tokens per prefill pass (default 128: prefix cache hits in steps of one "
                               "block, lcm(128, N) tokens, and a joining prompt's chunk bounded for the decoders)",
       [](Options& o, const std::string& v) { o.prefill_chunk = integer_flag("--prefill-chunk", v, 1, 2048); }},
      {"--no-prefix-cache", "", "prefill every prompt whole: no KV blocks kept for later prompts with the same start "
                                "(the cache is on by default; its hits give the same tokens and logprobs, bitwise)",
       [](Options& o, const std::string&) { o.prefix_cache = false; }},
      {"--no-mixed-steps", "", "run a joining prompt's chunk before the decode step, not inside it (mixed steps "
                               "are on where the model allows them; the same tokens either way, bitwise)",
       [](Options& o, const std::string&) { o.mixed_steps = false; }},
      {"--max-connections", "N", "open connections at most (default 512): at the bound a new one closes the "
                                 "oldest idle one, or gets 503 when all are answering",
       [](Options& o, const std::string& v) {
         o.limits.max_connections = static_cast<std::size_t>(integer_flag("--max-connections", v, 1, 1 << 20));
       }},
      {"--max-header-bytes", "N", "a request's header at most (default 16384; more: 431)",
       [](Options& o, const std::string& v) {
         o.limits.max_header_bytes = static_cast<std::size_t>(integer_flag("--max-header-bytes", v, 256, 1 << 24));
       }},
      {"--max-headers", "N", "header fields at most (default 100; more: 431)",
       [](Options& o, const std::string& v) { o.limits.max_headers = static_cast<std::size_t>(integer_flag("--max-headers", v, 1, 1 << 20)); }},
      {"--max-body-bytes", "N", "a request's body at most, however encoded (default 4194304; more: 413)",
       [](Options& o, const std::string& v) {
         o.limits.max_body_bytes = static_cast<std::size_t>(integer_flag("--max-body-bytes", v, 1, kBig));
       }},
      {"--header-timeout-ms", "N", "the whole header within N ms of waiting for it (default 10000)",
       [](Options& o, const std::string& v) { o.limits.header_timeout = std::chrono::milliseconds(integer_flag("--header-timeout-ms", v, 1, kBig)); }},
      {"--body-timeout-ms", "N", "the whole body within N ms (default 30000; later: 408)",
       [](Options& o, const std::string& v) { o.limits.body_timeout = std::chrono::milliseconds(integer_flag("--body-timeout-ms", v, 1, kBig)); }},
      {"--write-timeout-ms", "N", "each write of an answer within N ms, else the client is gone (default 30000)",
       [](Options& o, const std::string& v) { o.limits.write_timeout = std::chrono::milliseconds(integer_flag("--write-timeout-ms", v, 1, kBig)); }},
      {"--drain-seconds", "N", "on SIGTERM, running requests get N s to finish, then are cancelled (default 30)",
       [](Options& o, const std::string& v) { o.drain_seconds = integer_flag("--drain-seconds", v, 0, kBig); }},
      {"--max-seconds", "N", "drain and exit after N seconds (a safeguard for tests; default: never)",
       [](Options& o, const std::string& v) { o.max_seconds = integer_flag("--max-seconds", v, 0, kBig); }},
      {"--min-step-ms", "N", "at least N ms per engine step (paces a tiny model so tests see it run)",
       [](Options& o, const std::string& v) { o.min_step_ms = integer_flag("--min-step-ms", v, 0, kBig); }},
  };
}

}  // namespace

Options parse_options(int argc, char** argv) {
  Options o;
  o.model = apps::default_model();
  apps::parse_flags(argc, argv, "npugraph-serve", kAbout, flags(), o);
  if (o.model_id.empty()) o.model_id = std::filesystem::path(o.model).stem().string();
  return o;
}

}  // namespace npugraph::serve
