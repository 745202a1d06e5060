"""
The decode engine: a GGUF model (llama, qwen2, qwen3, gemma3) generating text
"""
from __future__ import annotations
import typing
__all__: list[str] = ['Engine', 'Tokenizer']
class Engine:
    """
    
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
    """
    def __init__(self, model: str, *, threads: int = 0, max_batch: int = 16, max_context: int = 0, mode: str = 'graph', order: str = 'update_then_replay', temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, keep_logits: bool = False, keep_full_logits: bool = False, device: str = 'cpu', activations: typing.Any = None, block_size: int = 128, prefill_chunk: int = 256, kv_dtype: typing.Any = 'float32', mixed_steps: bool = True, prefix_cache: bool = False) -> None:
        ...
    def cancel(self, id: int) -> bool:
        """
        Cancels a waiting or running request (thread-safe); the next step() reports it. False if unknown or done.
        """
    def generate(self, prompts: list[str], *, max_tokens: int = 64, chat: bool = True, seed: int = 0, on_text: typing.Any = None) -> list:
        """
        Generates for every prompt (a list of str); returns one dict per prompt: text, tokens,
        prompt_tokens, stopped, logits_hashes (with keep_logits), logits (numpy [steps, vocab], with
        keep_full_logits), logprobs and prompt_logprobs (lists of {token, logprob, top}: with submit's
        logprobs / prompt_logprobs). on_text(index, piece) receives each request's text as it is decoded.
        """
    def step(self) -> list:
        """
        One scheduling step: admits waiting requests, runs the next prefill chunks and one decode step of
        the running ones. Returns a list of dicts, one per request that produced something: id, text (new
        text), tokens (new ids), logprobs (theirs, with submit's logprobs), finish_reason (None while
        running; 'stop', 'length', 'cancelled' or 'error'), prompt_tokens, cached_tokens (of them, taken
        from the prefix cache), completion_tokens, result (the whole result dict once finished).
        """
    def submit(self, prompt: str = '', *, messages: typing.Any = None, max_tokens: int = 64, chat: bool = True, seed: int = 0, temperature: float | None = None, top_k: int | None = None, top_p: float | None = None, stop: typing.Any = None, logprobs: int | None = None, prompt_logprobs: int | None = None, presence_penalty: float = 0.0, frequency_penalty: float = 0.0, repetition_penalty: float = 1.0, logit_bias: dict[int, float] = {}) -> int:
        """
        Queues a request (thread-safe) and returns its id: a prompt (wrapped in the chat template as a
        user turn when chat) or messages ([{"role": ..., "content": ...}], rendered by the chat
        template). temperature / top_k / top_p: this request's sampling (None: the engine's); seed: its
        draws depend on (seed, step) only; stop: a str or list of str ending the text before it.
        logprobs / prompt_logprobs: the generated / prompt tokens' log-probabilities (raw log-softmax)
        with that many alternatives (0..20; None: none); presence_penalty, frequency_penalty,
        repetition_penalty, logit_bias ({token id: bias}): applied before sampling (npugraph::llm::Request).
        ArgumentError naming the field for a bad request.
        """
    @property
    def captured_graphs(self) -> int:
        """
        Decode-step graphs captured so far (one per batch-size bucket used).
        """
    @property
    def idle(self) -> bool:
        """
        Nothing waiting or running.
        """
    @property
    def load(self) -> dict:
        """
        Requests running / waiting, KV cache blocks used / total / cached (free, holding a prefix), prompt tokens looked up in / taken from the prefix cache, mixed steps.
        """
    @property
    def stats(self) -> dict:
        """
        Timings of the last generate(): prefill/decode tokens and seconds, host time split
        """
    @property
    def vocab_size(self) -> int:
        ...
class Tokenizer:
    """
    
    The tokenizer a GGUF file carries (byte-level BPE, tokenizer.ggml.model "gpt2", or SentencePiece
    BPE, "llama"), read from the file's metadata.
    
    Tokenizer(model): model is the GGUF file's path.
    """
    def __init__(self, model: str) -> None:
        ...
    def apply_chat_template(self, messages: typing.Any, *, add_generation_prompt: bool = True) -> str:
        """
        The file's chat template rendered natively over messages ([{'role', 'content'}]) — ChatML,
        SmolLM2's or Gemma 3's; ValueError for a file without one or with another template.
        """
    def decode(self, ids: list[int], *, skip_special: bool = False) -> str:
        """
        The text of ids (ill-formed UTF-8 as U+FFFD).
        """
    def encode(self, text: str, *, add_special: bool = True, parse_special: bool = True) -> list[int]:
        """
        Token ids of text (BOS/EOS where the file asks for them when add_special).
        """
    @property
    def vocab_size(self) -> int:
        ...
