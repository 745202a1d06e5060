// npugraph-serve's command line: one table of flags (name, value, help, what it sets), from which
// the parser and the usage text both come.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "npugraph/dtype.hpp"
#include "serve/http.hpp"

namespace npugraph::serve {

struct Options {
  std::string model, model_id, host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  bool metrics_auth = true;  // --metrics-auth key|none
  bool webui = true;         // --no-webui: false
  int threads = 0, workers = 2;
  std::int64_t max_batch = 16, max_context = 0, max_waiting = 64, prefill_chunk = 128;
  std::string mode = "graph";
  npugraph::DType kv_dtype = npugraph::DType::f32;
  bool prefix_cache = true;  // --no-prefix-cache
  bool mixed_steps = true;   // --no-mixed-steps
  std::int64_t max_seconds = 0;  // 0: until a signal
  std::int64_t drain_seconds = 30;
  std::int64_t min_step_ms = 0;
  http::Limits limits;
};

// Exits with status 2 and the usage text (naming the flag, the value and the rule) on a bad flag;
// with 0 for --help.
Options parse_options(int argc, char** argv);

}  // namespace npugraph::serve
