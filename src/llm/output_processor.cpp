// Note [Output processor]
// The engine's step samples token ids; this turns them into what a client reads. Each token is
// appended to the request's sequence and result, decoded to text by the request's StreamDecoder
// (bytes of a multi-byte character wait for the rest), and the request ends on an
// end-of-generation token, a stop string, max_tokens or a full context. Stop strings: text that
// could be the start of a stop string is held back until the next token decides it; the text a
// request returns ends before the first stop string's start. Nothing here touches the runner or
// the KV cache: the engine frees a finished request's blocks.
#include "llm/output_processor.hpp"

#include <algorithm>

#include "llm/logprobs.hpp"

namespace npugraph::llm {
namespace {

std::uint64_t fnv1a(const void* data, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// The length of the longest suffix of `text` (after `from`) that is a proper prefix of a stop string.
std::size_t held_back(const std::string& text, std::size_t from, const std::vector<std::string>& stops) {
  std::size_t hold = 0;
  for (const std::string& s : stops)
    for (std::size_t k = std::min(s.size() - 1, text.size() - from); k > hold; --k)
      if (text.compare(text.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
  return hold;
}

// Cuts the text before its first stop string, if it has one; a stop string can only start at or
// after `emitted` (what may start one is held back).
bool cut_at_stop(std::string& text, std::size_t emitted, const std::vector<std::string>& stops) {
  std::size_t cut = std::string::npos;
  for (const std::string& s : stops) cut = std::min(cut, text.find(s, emitted));
  if (cut == std::string::npos) return false;
  text.resize(cut);
  return true;
}

}  // namespace

bool OutputProcessor::take(RequestState& a, std::int32_t id, const float* logits, StepOutput& out) const {
  a.seq.tokens.push_back(id);
  a.seq.generated += 1;
  a.result.tokens.push_back(id);
  out.tokens.push_back(id);
  const auto vocab = static_cast<std::size_t>(opt_.vocab);
  if (opt_.keep_logits) a.result.logits_hashes.push_back(fnv1a(logits, vocab * sizeof(float)));
  if (opt_.keep_full_logits) a.result.logits.insert(a.result.logits.end(), logits, logits + vocab);
  if (a.seq.logprobs >= 0) {  // Note [Logprobs on the host]
    a.result.logprobs.push_back(token_logprob(logits, opt_.vocab, id, a.seq.logprobs));
    out.logprobs.push_back(a.result.logprobs.back());
  }
  a.seq.adjust.take(id);
  if (a.seq.constraint && !a.seq.constraint->accept(id)) {  // Note [Token constraints]: cannot happen
    a.result.finish = FinishReason::error;
    return true;
  }
  if (tok_.is_end_of_generation(id)) {
    a.result.stopped = true;
    a.result.finish = FinishReason::stop;
    return true;
  }
  a.result.text += a.decoder->push(id);
  if (cut_at_stop(a.result.text, a.emitted, a.stop)) {
    a.result.stopped = a.cut = true;
    a.result.finish = FinishReason::stop;
    return true;
  }
  if (a.seq.constraint && a.seq.constraint->finished()) {
    a.result.stopped = true;
    a.result.finish = FinishReason::stop;
    return true;
  }
  if (a.seq.generated >= a.max_tokens || static_cast<std::int64_t>(a.seq.tokens.size()) >= opt_.max_context) {
    a.result.finish = FinishReason::length;
    return true;
  }
  const std::size_t ready = a.result.text.size() - held_back(a.result.text, a.emitted, a.stop);
  out.text += a.result.text.substr(a.emitted, ready - a.emitted);
  a.emitted = ready;
  return false;
}

void OutputProcessor::finish(RequestState& a, FinishReason reason, StepOutput& out) const {
  if (!a.cut) {
    a.result.text += a.decoder->finish();
    if (cut_at_stop(a.result.text, a.emitted, a.stop)) {
      a.result.stopped = true;
      if (reason == FinishReason::length) reason = FinishReason::stop;
    }
  }
  a.result.finish = reason;
  out.text += a.result.text.substr(std::min(a.emitted, a.result.text.size()));
  a.emitted = a.result.text.size();
  out.finish = reason;
}

}  // namespace npugraph::llm
