// npugraph.llm: the decode engine (include/npugraph/llm/engine.hpp) from Python.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "bindings.hpp"
#include "convert.hpp"
#include "npugraph/error.hpp"
#include "npugraph/llm/engine.hpp"
#include "npugraph/llm/gguf.hpp"
#include "npugraph/llm/tokenizer.hpp"

namespace npugraph::python {

namespace {

// [{'role': ..., 'content': ...}, ...] as chat messages; ValueError naming `op` and the entry.
std::vector<llm::ChatMessage> chat_messages(const py::object& messages, const char* op) {
  std::vector<llm::ChatMessage> out;
  for (const py::handle msg : messages) {
    NG_CHECK_ARG(py::isinstance<py::dict>(msg), op, ": messages[", out.size(), "] must be a dict with 'role' and 'content'");
    const auto d = py::reinterpret_borrow<py::dict>(msg);
    NG_CHECK_ARG(d.contains("role") && d.contains("content"), op, ": messages[", out.size(),
                 "] must have 'role' and 'content'");
    out.push_back({py::str(d["role"]), py::str(d["content"])});
  }
  return out;
}

}  // namespace

namespace {

llm::StepMode mode_arg(const std::string& mode) {
  if (mode == "graph") return llm::StepMode::graph;
  if (mode == "eager") return llm::StepMode::eager;
  NG_THROW(ArgumentError, "mode = '", mode, "': must be 'graph' or 'eager'");
}

llm::GraphOrder order_arg(const std::string& order) {
  if (order == "update_then_replay") return llm::GraphOrder::update_then_replay;
  if (order == "replay_then_update") return llm::GraphOrder::replay_then_update;
  NG_THROW(ArgumentError, "order = '", order, "': must be 'update_then_replay' or 'replay_then_update'");
}

std::optional<ops::Activations> activations_arg(const py::object& a) {
  if (a.is_none()) return std::nullopt;
  const std::string s = py::str(a);
  if (s == "q8") return ops::Activations::q8;
  if (s == "f32") return ops::Activations::f32;
  NG_THROW(ArgumentError, "activations = '", s, "': must be 'q8', 'f32' or None (q8 on the cpu, f32 on cuda)");
}

// "float32", "float16", "bfloat16" (or a numpy / torch dtype); the engine refuses the other dtypes by name.
DType kv_dtype_arg(const py::object& a) {
  try {
    return to_dtype(a);
  } catch (const ArgumentError&) {
  }
  NG_THROW(ArgumentError, "kv_dtype = '", std::string(py::str(a)), "': must be 'float32', 'float16' or 'bfloat16'");
}

// Per token: {"token": id, "logprob": float (NaN: none, an echoed prompt's first), "top": [(id, logprob)]}.
py::list logprobs_list(const std::vector<llm::TokenLogprob>& tokens) {
  py::list l;
  for (const llm::TokenLogprob& t : tokens) {
    py::dict d;
    d["token"] = t.token;
    d["logprob"] = t.logprob;
    d["top"] = t.top;
    l.append(d);
  }
  return l;
}

py::dict result_dict(const llm::Result& r, std::int64_t vocab) {
  py::dict d;
  d["text"] = r.text;
  d["tokens"] = r.tokens;
  d["prompt_tokens"] = r.prompt_tokens;
  d["stopped"] = r.stopped;
  d["finish_reason"] = llm::finish_reason_name(r.finish);
  d["logits_hashes"] = r.logits_hashes;
  d["logprobs"] = logprobs_list(r.logprobs);
  d["prompt_logprobs"] = logprobs_list(r.prompt_logprobs);
  if (!r.logits.empty()) {
    const auto steps = static_cast<py::ssize_t>(r.logits.size() / static_cast<std::size_t>(vocab));
    py::array_t<float> a({steps, static_cast<py::ssize_t>(vocab)});
    std::copy(r.logits.begin(), r.logits.end(), a.mutable_data());
    d["logits"] = a;
  }
  return d;
}

py::dict stats_dict(const llm::RunStats& s) {
  py::dict d;
  d["prefill_tokens"] = s.prefill_tokens;
  d["prefill_seconds"] = s.prefill_seconds;
  d["decode_tokens"] = s.decode_tokens;
  d["decode_steps"] = s.decode_steps;
  d["mixed_steps"] = s.mixed_steps;
  d["mixed_decode_tokens"] = s.mixed_decode_tokens;
  d["mixed_prefill_tokens"] = s.mixed_prefill_tokens;
  d["mixed_seconds"] = s.mixed_seconds;
  d["decode_seconds"] = s.decode_seconds;
  d["capture_seconds"] = s.capture_seconds;
  d["host_inputs_seconds"] = s.host.inputs;
  d["host_update_seconds"] = s.host.update;
  d["host_launch_seconds"] = s.host.launch;
  d["wait_seconds"] = s.host.wait;
  return d;
}

}  // namespace

void bind_llm(py::module_& m) {
  py::module_ llm = m.def_submodule("llm", "The decode engine: a GGUF model (llama, qwen2, qwen3, gemma3) generating text");
  py::class_<llm::Engine>(llm, "Engine", R"doc(
Loads a GGUF model (architectures llama, qwen2, qwen3, gemma3) and generates text with continuous batching; each decode step
is captured once per batch-size bucket and updated in place (mode="graph"), or run op by op
(mode="eager").

Engine(model, *, threads=0, max_batch=16, max_context=0, mode="graph",
       order="update_then_replay", temperature=0.0, top_k=0, top_p=1.0,
       keep_logits=False, keep_full_logits=False, device="cpu", activations=None,
       block_size=128, prefill_chunk=256, kv_dtype="float32", mixed_steps=True, prefix_cache=False)

device: "cpu" or "cuda:N" (the weights and buffers there; a CUDA device without a GPU raises
UnsupportedError naming it before the model loads).
activations: what the quantised projections multiply in batches of up to 16 tokens: "q8" (x
quantised to int8 per block of 32, as llama.cpp does), "f32" (x as it is), None (q8 on the cpu,
f32 on cuda).
block_size: tokens per KV cache block (128, 256, 384 or 512). prefill_chunk: prompt tokens per
prefill pass (1..2048).
kv_dtype: the KV cache's element type: "float32" (exact), "float16" or "bfloat16" (half the bytes
attention reads per step, as llama.cpp's default float16 cache; cpu only).
mixed_steps: a joining prompt's chunk runs inside the decode step's pass, every row with the bits
of its own pass (the cpu); stats["mixed_steps"] counts them. False: the chunk runs before the
decode step.
prefix_cache: keep full KV blocks of prompts for later prompts with the same start (the same logits,
bitwise); hits come in steps of lcm(block_size, prefill_chunk) tokens; step() outputs say
cached_tokens, load counts prefix_cache_queries / prefix_cache_hits and kv_blocks_cached.
)doc")
      .def(py::init([](const std::string& model, int threads, std::int64_t max_batch, std::int64_t max_context,
                       const std::string& mode, const std::string& order, double temperature,
                       std::int64_t top_k, double top_p, bool keep_logits, bool keep_full_logits,
                       const std::string& device, const py::object& activations, std::int64_t block_size,
                       std::int64_t prefill_chunk, const py::object& kv_dtype, bool mixed_steps, bool prefix_cache) {
             llm::EngineOptions o{.model = model, .threads = threads, .max_batch = max_batch,
                                  .max_context = max_context, .block_size = block_size,
                                  .prefill_chunk = prefill_chunk, .mode = mode_arg(mode), .order = order_arg(order),
                                  .temperature = temperature, .top_k = top_k, .top_p = top_p,
                                  .keep_logits = keep_logits, .keep_full_logits = keep_full_logits,
                                  .device = with_context("Engine: ", [&] { return Device::parse(device); }),
                                  .activations = activations_arg(activations),
                                  .kv_dtype = kv_dtype_arg(kv_dtype), .prefix_cache = prefix_cache,
                                  .mixed_steps = mixed_steps};
             py::gil_scoped_release release;
             return std::make_unique<llm::Engine>(o);
           }),
           py::arg("model"), py::kw_only(), py::arg("threads") = 0, py::arg("max_batch") = 16,
           py::arg("max_context") = 0, py::arg("mode") = "graph", py::arg("order") = "update_then_replay",
           py::arg("temperature") = 0.0, py::arg("top_k") = 0, py::arg("top_p") = 1.0,
           py::arg("keep_logits") = false, py::arg("keep_full_logits") = false, py::arg("device") = "cpu",
           py::arg("activations") = py::none(), py::arg("block_size") = 128, py::arg("prefill_chunk") = 256,
           py::arg("kv_dtype") = "float32", py::arg("mixed_steps") = true, py::arg("prefix_cache") = false)
      .def("generate",
           [](llm::Engine& e, const std::vector<std::string>& prompts, std::int64_t max_tokens, bool chat,
              std::uint64_t seed, py::object on_text) {
             std::vector<llm::Request> requests;
             for (std::size_t i = 0; i < prompts.size(); ++i)
               requests.push_back({.prompt = prompts[i], .max_tokens = max_tokens, .chat = chat,
                                   .seed = seed + i});
             std::function<void(std::size_t, std::string_view)> stream;
             if (!on_text.is_none())
               stream = [&on_text](std::size_t i, std::string_view text) {
                 py::gil_scoped_acquire gil;
                 on_text(i, py::str(text.data(), text.size()));
               };
             std::vector<llm::Result> results;
             {
               py::gil_scoped_release release;
               results = e.generate(requests, stream);
             }
             py::list out;
             for (const auto& r : results) out.append(result_dict(r, e.vocab()));
             return out;
           },
           py::arg("prompts"), py::kw_only(), py::arg("max_tokens") = 64, py::arg("chat") = true,
           py::arg("seed") = 0, py::arg("on_text") = py::none(), R"doc(
Generates for every prompt (a list of str); returns one dict per prompt: text, tokens,
prompt_tokens, stopped, logits_hashes (with keep_logits), logits (numpy [steps, vocab], with
keep_full_logits), logprobs and prompt_logprobs (lists of {token, logprob, top}: with submit's
logprobs / prompt_logprobs). on_text(index, piece) receives each request's text as it is decoded.
)doc")
      .def("submit",
           [](llm::Engine& e, const std::string& prompt, const py::object& messages, std::int64_t max_tokens,
              bool chat, std::uint64_t seed, std::optional<double> temperature, std::optional<std::int64_t> top_k,
              std::optional<double> top_p, const py::object& stop, std::optional<std::int64_t> logprobs,
              std::optional<std::int64_t> prompt_logprobs, double presence_penalty, double frequency_penalty,
              double repetition_penalty, const std::map<std::int32_t, double>& logit_bias) {
             llm::Request r{.prompt = prompt, .max_tokens = max_tokens, .chat = chat, .seed = seed,
                            .temperature = temperature, .top_k = top_k, .top_p = top_p, .logprobs = logprobs,
                            .prompt_logprobs = prompt_logprobs, .presence_penalty = presence_penalty,
                            .frequency_penalty = frequency_penalty, .repetition_penalty = repetition_penalty,
                            .logit_bias = logit_bias};
             if (!messages.is_none()) r.messages = chat_messages(messages, "submit");
             if (py::isinstance<py::str>(stop)) r.stop.push_back(py::str(stop));
             else if (!stop.is_none()) for (const py::handle x : stop) r.stop.push_back(py::str(x));
             py::gil_scoped_release release;  // tokenising a long prompt lets other threads run
             return e.submit(r);
           },
           py::arg("prompt") = "", py::kw_only(), py::arg("messages") = py::none(), py::arg("max_tokens") = 64,
           py::arg("chat") = true, py::arg("seed") = 0, py::arg("temperature") = py::none(),
           py::arg("top_k") = py::none(), py::arg("top_p") = py::none(), py::arg("stop") = py::none(),
           py::arg("logprobs") = py::none(), py::arg("prompt_logprobs") = py::none(), py::arg("presence_penalty") = 0.0,
           py::arg("frequency_penalty") = 0.0, py::arg("repetition_penalty") = 1.0,
           py::arg("logit_bias") = std::map<std::int32_t, double>{}, R"doc(
Queues a request (thread-safe) and returns its id: a prompt (wrapped in the chat template as a
user turn when chat) or messages ([{"role": ..., "content": ...}], rendered by the chat
template). temperature / top_k / top_p: this request's sampling (None: the engine's); seed: its
draws depend on (seed, step) only; stop: a str or list of str ending the text before it.
logprobs / prompt_logprobs: the generated / prompt tokens' log-probabilities (raw log-softmax)
with that many alternatives (0..20; None: none); presence_penalty, frequency_penalty,
repetition_penalty, logit_bias ({token id: bias}): applied before sampling (npugraph::llm::Request).
ArgumentError naming the field for a bad request.
)doc")
      .def("step",
           [](llm::Engine& e) {
             std::vector<llm::StepOutput> outs;
             {
               py::gil_scoped_release release;
               outs = e.step();
             }
             py::list l;
             for (const auto& o : outs) {
               py::dict d;
               d["id"] = o.id;
               d["text"] = o.text;
               d["tokens"] = o.tokens;
               d["finish_reason"] = o.finish == llm::FinishReason::none ? py::object(py::none())
                                                                         : py::str(llm::finish_reason_name(o.finish));
               d["prompt_tokens"] = o.prompt_tokens;
               d["cached_tokens"] = o.cached_tokens;
               d["completion_tokens"] = o.completion_tokens;
               d["logprobs"] = logprobs_list(o.logprobs);
               d["result"] = o.result ? py::object(result_dict(*o.result, e.vocab())) : py::object(py::none());
               l.append(d);
             }
             return l;
           },
           R"doc(
One scheduling step: admits waiting requests, runs the next prefill chunks and one decode step of
the running ones. Returns a list of dicts, one per request that produced something: id, text (new
text), tokens (new ids), logprobs (theirs, with submit's logprobs), finish_reason (None while
running; 'stop', 'length', 'cancelled' or 'error'), prompt_tokens, cached_tokens (of them, taken
from the prefix cache), completion_tokens, result (the whole result dict once finished).
)doc")
      .def("cancel", &llm::Engine::cancel, py::arg("id"),
           "Cancels a waiting or running request (thread-safe); the next step() reports it. False if unknown or done.")
      .def_property_readonly("idle", &llm::Engine::idle, "Nothing waiting or running.")
      .def_property_readonly("load",
                             [](const llm::Engine& e) {
                               const llm::EngineLoad l = e.load();
                               py::dict d;
                               d["running"] = l.running;
                               d["waiting"] = l.waiting;
                               d["kv_blocks_used"] = l.kv_blocks_used;
                               d["kv_blocks_total"] = l.kv_blocks_total;
                               d["kv_blocks_cached"] = l.kv_blocks_cached;
                               d["prefix_cache_queries"] = l.prefix_cache_queries;
                               d["prefix_cache_hits"] = l.prefix_cache_hits;
                               d["mixed_steps"] = l.mixed_steps;
                               return d;
                             },
                             "Requests running / waiting, KV cache blocks used / total / cached (free, holding a "
                             "prefix), prompt tokens looked up in / taken from the prefix cache, mixed steps.")
      .def_property_readonly("captured_graphs", &llm::Engine::captured_graphs,
                             "Decode-step graphs captured so far (one per batch-size bucket used).")
      .def_property_readonly("stats", [](const llm::Engine& e) { return stats_dict(e.stats()); },
                             "Timings of the last generate(): prefill/decode tokens and seconds, host time split")
      .def_property_readonly("vocab_size", [](const llm::Engine& e) { return e.vocab(); });
  py::class_<llm::Tokenizer>(llm, "Tokenizer", R"doc(
The tokenizer a GGUF file carries (byte-level BPE, tokenizer.ggml.model "gpt2", or SentencePiece
BPE, "llama"), read from the file's metadata.

Tokenizer(model): model is the GGUF file's path.
)doc")
      .def(py::init([](const std::string& model) {
             py::gil_scoped_release release;
             return llm::Tokenizer::from_gguf(llm::GgufFile::open(model));
           }),
           py::arg("model"))
      .def("encode",
           [](const llm::Tokenizer& t, const std::string& text, bool add_special, bool parse_special) {
             return t.encode(text, {.parse_special = parse_special, .add_special = add_special});
           },
           py::arg("text"), py::kw_only(), py::arg("add_special") = true, py::arg("parse_special") = true,
           "Token ids of text (BOS/EOS where the file asks for them when add_special).")
      .def("decode",
           [](const llm::Tokenizer& t, const std::vector<std::int32_t>& ids, bool skip_special) {
             return t.decode(ids, {.skip_special = skip_special});
           },
           py::arg("ids"), py::kw_only(), py::arg("skip_special") = false,
           "The text of ids (ill-formed UTF-8 as U+FFFD).")
      .def(
          "apply_chat_template",
          [](const llm::Tokenizer& t, const py::object& messages, bool add_generation_prompt) {
            return t.apply_chat_template(chat_messages(messages, "apply_chat_template"), add_generation_prompt);
          },
          py::arg("messages"), py::kw_only(), py::arg("add_generation_prompt") = true,
          "The file's chat template rendered natively over messages ([{'role', 'content'}]) — ChatML,\n"
          "SmolLM2's or Gemma 3's; ValueError for a file without one or with another template.")
      .def_property_readonly("vocab_size", &llm::Tokenizer::vocab_size);
}

}  // namespace npugraph::python
