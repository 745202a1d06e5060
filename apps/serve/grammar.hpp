// npugraph-serve's structured output: response_format json_object / json_schema as token
// constraints (Note [Token constraints] in npugraph/llm/constraint.hpp), built with xgrammar.
//
// Note [Structured output]
// A request's response_format becomes a grammar, the grammar a per-request matcher, the matcher the
// request's TokenConstraint: before each token it writes the tokens the grammar allows next into
// the request's row of the step's token masks (read by the captured sampling op), after it it
// advances by the token drawn. The grammar library is xgrammar (0.2.9, Apache-2.0), compiled from
// its PyPI sdist (cmake/Xgrammar.cmake, tools/fetch_source.py). Weighed against the other two the
// issue named:
//   - llguidance and outlines-core are Rust crates; their PyPI packages are Python extensions with
//     no C API in them, and their sources build with cargo from crates.io, which this project's
//     machines cannot reach (Debian's packages and PyPI only). A C++ server cannot link them.
//   - xgrammar's core is C++17 with header-only dependencies (picojson, dlpack) in its sdist: it
//     builds with the project's compiler in about 2.5 minutes of one core, and its C++ API is what
//     the server needs (a JSON schema compiled once per vocabulary and schema, cached; a matcher
//     per request filling a token bitmask in vLLM's layout). vLLM and SGLang use it for the same.
// The vocabulary is given to xgrammar as raw bytes (each token's bytes as the tokenizer decodes
// them; control and unused tokens as "", which xgrammar never allows), the stop tokens as the
// tokenizer's end-of-generation ids: a grammar allows them only where its JSON is complete, and the
// request ends on the one drawn, as any request does on its end of generation.
// The JSON is compact: schemas compile with any_whitespace off (", " and ": " between items, no
// other whitespace), so a small model cannot spend its tokens on whitespace; and in xgrammar's
// strict mode, where a schema that does not say additionalProperties allows none. Every output is
// then valid under the schema as written (a subset of the documents it accepts). json_object is the
// schema {"type": "object"} with additional properties allowed, compact as well.
// Grammars are compiled on the server's worker threads as requests are parsed (xgrammar's compiler
// is thread-safe and caches by schema); the tokenizer's information once, at the first request that
// asks for a format. A schema xgrammar cannot compile is the request's 400, naming
// response_format.json_schema.schema and xgrammar's reason.
#pragma once

#include <memory>
#include <string>
#include <variant>

#include "npugraph/llm/constraint.hpp"
#include "npugraph/llm/tokenizer.hpp"
#include "serve/openai_api.hpp"

namespace npugraph::serve {

class Grammars {
 public:
  // `vocab`: the model's logits width (>= the tokenizer's vocabulary).
  Grammars(const llm::Tokenizer& tokenizer, std::int64_t vocab);
  ~Grammars();
  Grammars(const Grammars&) = delete;
  Grammars& operator=(const Grammars&) = delete;
  // Whether this build has a grammar library (xgrammar); without one, every format but text is a 400.
  static bool available() noexcept;
  // The constraint factory of a json_object or json_schema format, or the 400 that says why not.
  std::variant<llm::TokenConstraintFactory, ApiError> constraint(const ResponseFormat& format);
  // The constraint factory of an active request's tool calls (Note [Tool calls] in serve/tools.hpp).
  std::variant<llm::TokenConstraintFactory, ApiError> constraint(const Tools& tools);

 private:
  template <class Compile>
  std::variant<llm::TokenConstraintFactory, ApiError> compile(const char* param, Compile&& how);
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace npugraph::serve
