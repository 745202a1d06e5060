// Note [Structured output] (serve/grammar.hpp): xgrammar's compiler and matchers behind
// llm::TokenConstraint. Built without xgrammar (NPUGRAPH_SERVE_XGRAMMAR undefined), every format
// but text is a 400 saying so.
#include "serve/grammar.hpp"

#include <mutex>
#include <optional>

#if NPUGRAPH_SERVE_XGRAMMAR
#include <dlpack/dlpack.h>
#include <xgrammar/xgrammar.h>
#endif

namespace npugraph::serve {
namespace {

[[maybe_unused]] ApiError unavailable(const char* param) {
  return ApiError{.message = std::string("'") + param + "' needs structured output (a grammar), which this "
                             "npugraph-serve was built without (xgrammar's source was missing at build time: "
                             "python3 tools/fetch_source.py xgrammar, then rebuild)",
                  .param = param,
                  .code = "unsupported_value"};
}

#if NPUGRAPH_SERVE_XGRAMMAR
class Matcher final : public llm::TokenConstraint {
 public:
  explicit Matcher(const xgrammar::CompiledGrammar& grammar) : m_(grammar) {}
  void allowed(std::span<std::uint32_t> mask) override {
    std::int64_t shape[1] = {static_cast<std::int64_t>(mask.size())};
    DLTensor t{};
    t.data = mask.data();
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 1;
    t.dtype = DLDataType{kDLInt, 32, 1};
    t.shape = shape;
    m_.FillNextTokenBitmask(&t);
  }
  bool accept(std::int32_t token) override { return m_.AcceptToken(token); }
  bool finished() const override { return m_.IsTerminated(); }

 private:
  xgrammar::GrammarMatcher m_;
};
#endif

}  // namespace

struct Grammars::State {
  const llm::Tokenizer& tok;
  std::int64_t vocab;
#if NPUGRAPH_SERVE_XGRAMMAR
  std::once_flag once;
  std::optional<xgrammar::GrammarCompiler> compiler;
  // xgrammar's view of the vocabulary (Note [Structured output]): raw bytes, "" for the tokens that
  // are never text; stop tokens: the ends of generation.
  xgrammar::GrammarCompiler& get() {
    std::call_once(once, [&] {
      std::vector<std::string> bytes(static_cast<std::size_t>(vocab));
      std::vector<std::int32_t> stops;
      const auto n = static_cast<std::int32_t>(tok.vocab_size());
      for (std::int32_t id = 0; id < n; ++id) {
        const llm::TokenType type = tok.token_type(id);
        if (tok.is_end_of_generation(id)) stops.push_back(id);
        if (type == llm::TokenType::control || type == llm::TokenType::unused || type == llm::TokenType::unknown)
          continue;
        bytes[static_cast<std::size_t>(id)] = tok.token_bytes(id);
      }
      const xgrammar::TokenizerInfo info(bytes, xgrammar::VocabType::RAW, static_cast<int>(vocab), stops);
      compiler.emplace(info, /*max_threads=*/2);
    });
    return *compiler;
  }
#endif
};

Grammars::Grammars(const llm::Tokenizer& tokenizer, std::int64_t vocab)
    : state_(new State{.tok = tokenizer, .vocab = vocab}) {}

Grammars::~Grammars() = default;

bool Grammars::available() noexcept { return NPUGRAPH_SERVE_XGRAMMAR != 0; }

std::variant<llm::TokenConstraintFactory, ApiError> Grammars::constraint(const ResponseFormat& format) {
  const bool object = format.kind == ResponseFormat::Kind::json_object;
  const std::string schema = object ? R"({"type": "object", "additionalProperties": true})" : format.schema;
  return compile(object ? "response_format" : "response_format.json_schema.schema", [&](auto& c) {
    return c.CompileJSONSchema(schema, /*any_whitespace=*/false, /*indent=*/std::nullopt, /*separators=*/std::nullopt,
                               /*strict_mode=*/true);
  });
}

std::variant<llm::TokenConstraintFactory, ApiError> Grammars::constraint(const Tools& tools) {
  const std::string tag = tools_structural_tag(tools);
  return compile("tools", [&](auto& c) { return c.CompileStructuralTag(tag); });
}

template <class Compile>
std::variant<llm::TokenConstraintFactory, ApiError> Grammars::compile(const char* param, Compile&& how) {
#if NPUGRAPH_SERVE_XGRAMMAR
  try {
    auto grammar = std::make_shared<const xgrammar::CompiledGrammar>(how(state_->get()));
    return llm::TokenConstraintFactory([grammar] { return std::make_unique<Matcher>(*grammar); });
  } catch (const std::exception& e) {
    // xgrammar's message, without its "[time] file.cc:line: " prefix.
    std::string why = e.what();
    if (const auto at = why.find(".cc:"); at != std::string::npos)
      if (const auto colon = why.find(": ", at); colon != std::string::npos) why.erase(0, colon + 2);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    return ApiError{.message = std::string("'") + param + "' cannot be compiled into a grammar: " + why, .param = param};
  }
#else
  (void)how;
  return unavailable(param);
#endif
}

}  // namespace npugraph::serve
