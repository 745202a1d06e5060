// The `logprobs` of OpenAI's responses, from the engine's llm::TokenLogprob (Request::logprobs):
//   chat:        {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}], "refusal": null}
//   completions: {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}
// A token is named by its bytes as UTF-8 text; bytes that are not valid UTF-8 on their own (a
// piece of a character) as "\xNN" escapes (`bytes` has them exactly). Completions' top_logprobs
// hold the sampled token as well as the alternatives (OpenAI: "up to logprobs + 1 elements");
// text_offset counts characters (code points) from the start of the choice's text. The
// end-of-generation token that ends a choice is not listed (routes.cpp), as it is not in the text. With echo, the
// prompt's tokens come first, the first with a null logprob and null top_logprobs (TokenLogprob's
// NaN).
#pragma once

#include <cstdint>
#include <span>

#include "npugraph/llm/request.hpp"
#include "npugraph/llm/tokenizer.hpp"
#include "serve/openai_api.hpp"

namespace npugraph::serve {

ResponseJson chat_logprobs(const llm::Tokenizer& tok, std::span<const llm::TokenLogprob> tokens);
// `offset`: the characters before the first token (0 at the start of a choice); advanced past them.
ResponseJson completion_logprobs(const llm::Tokenizer& tok, std::span<const llm::TokenLogprob> tokens,
                                 std::int64_t& offset);

}  // namespace npugraph::serve
