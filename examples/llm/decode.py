"""SmolLM2's decode step written in Python with npugraph's ops, captured once, updated every step.

What a torch_npu user writes for a graph-mode decode loop (vllm-ascend's shape), on npugraph:

  * the weights come straight from the GGUF file through llama.cpp's `gguf` package (mapped
    copy-on-write) and are wrapped as QuantWeight objects (Q4_1 layers, packed with pack_rows16
    as the engine packs them, and the Q8_0 embedding that is also the tied output projection); the
    projections quantise x to int8 (activations="q8"), the engine's numerics on the cpu;
  * the step reads every per-step integer from persistent buffers the host writes before it — token
    ids, positions, KV slots, block tables — so it is captured ONCE:
        with npugraph.npu.graph(g, auto_dispatch_capture=True):  step(...)
    and each of its 30 npu_fused_infer_attention_score calls (paged KV cache, GQA 9 on 3 KV heads)
    is recorded; every step then writes the buffers and runs
        g.update(cpu_update_input=[{"actual_seq_lengths_kv": [n]}] * 30);  g.replay()
  * the same `step` called outside a capture is the eager baseline: each op runs as it is issued.

The step: embedding -> per layer [rms_norm -> q/k/v weight-quant linear -> rotary embedding ->
reshape_and_cache -> FIA -> output linear -> residual add + rms_norm -> fused gate|up linear ->
swiglu -> down linear -> residual add + next norm] -> final norm -> output projection -> argmax.

It feeds the prompt through the same step token by token (its logits unused), then generates greedy
tokens, prints the text, checks that every graph step's logits equal the eager step's bitwise, that
the tokens are the C++ engine's (npugraph.llm.Engine, which also tokenises the prompt: the tokenizer
has no Python binding of its own), and prints the host time per step of both:

  graph host  = writing the inputs + g.update + g.replay(blocking=False)  (issuing the step)
  eager host  = eager step time - graph compute time (graph step time - graph host): what issuing
                every op from Python adds to the same compute (each eager op returns once it ran)

    PYTHONPATH=build/python .venv/bin/python examples/llm/decode.py [--prompt TEXT] [--tokens N]
                                                                    [--model PATH]
"""
import argparse
import os
import pathlib
import statistics
import sys
import time

import numpy as np

import npugraph
from npugraph import npu

try:
    import gguf
except ImportError:  # the project venv has it (tools/requirements-test.txt)
    sys.exit("examples/llm/decode.py needs llama.cpp's `gguf` package: run it with the project venv "
             "(.venv/bin/python), made by `make setup`")


def op(name):
    """An op as the package exports it, or from the extension module (npugraph/__init__.py does not
    re-export the LLM ops yet)."""
    return getattr(npugraph, name, None) or getattr(npugraph._C, name)


QuantWeight = op("QuantWeight")
embedding, rms_norm, add_rms_norm = op("npu_embedding"), op("npu_rms_norm"), op("npu_add_rms_norm")
quant_linear, rope, swiglu = op("npu_weight_quant_linear"), op("npu_rotary_embedding"), op("npu_swiglu")


def linear(x, weight, out):
    """The engine's projections on the cpu: x quantised to int8 per block of 32 (activations="q8")."""
    return quant_linear(x, weight, out=out, activations="q8")
reshape_and_cache, argmax = op("_npu_reshape_and_cache"), op("npu_argmax")
fia = npugraph.npu_fused_infer_attention_score

BLOCK = 128  # KV cache block (tokens)


def default_model():
    if os.environ.get("NPUGRAPH_MODEL"):
        return pathlib.Path(os.environ["NPUGRAPH_MODEL"])
    d = os.environ.get("NPUGRAPH_MODEL_DIR")
    if d:
        return pathlib.Path(d).expanduser() / "SmolLM2-135M-Instruct.Q4_1.gguf"
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(cache) / "npugraph" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


# ---- the model file -------------------------------------------------------------------------------

class Model:
    """SmolLM2's shape and weights from the GGUF file (mapped copy-on-write: shared, writable views,
    which QuantWeight requires; nothing is copied but the fused gate|up matrices)."""

    def __init__(self, path):
        r = gguf.GGUFReader(str(path), "c")
        f = lambda key: r.fields[key].contents()  # noqa: E731
        assert f("general.architecture") == "llama"
        self.layers = int(f("llama.block_count"))
        self.hidden = int(f("llama.embedding_length"))
        self.heads = int(f("llama.attention.head_count"))
        self.kv_heads = int(f("llama.attention.head_count_kv"))
        self.head_dim = self.hidden // self.heads
        self.ffn = int(f("llama.feed_forward_length"))
        self.eps = float(f("llama.attention.layer_norm_rms_epsilon"))
        self.theta = float(f("llama.rope.freq_base"))
        self.vocab_tokens = f("tokenizer.ggml.tokens")
        self.token_types = f("tokenizer.ggml.token_type")
        self.eos = int(f("tokenizer.ggml.eos_token_id"))
        t = {x.name: x for x in r.tensors}

        def quant(name, data=None, rows=None):
            x = t[name]
            cols = int(x.shape[0])  # ggml order: shape[0] is the row length
            data = x.data if data is None else data
            return QuantWeight(data, x.tensor_type.name, rows or int(x.shape[1]), cols)

        def norm(name):
            return np.asarray(t[name].data, dtype=np.float32)

        self.embd = quant("token_embd.weight")  # Q8_0 [vocab, hidden]
        self.vocab = self.embd.rows
        self.output = quant("output.weight").pack_rows16() if "output.weight" in t else self.embd  # tied
        self.output_norm = norm("output_norm.weight")
        self.blocks = []
        for i in range(self.layers):
            p = f"blk.{i}."
            gate, up = t[p + "ffn_gate.weight"], t[p + "ffn_up.weight"]
            assert gate.tensor_type == up.tensor_type
            # One [2 * ffn, hidden] matrix: the rows of gate, then those of up (ggml blocks never span
            # rows), so one linear gives [gate | up] and npu_swiglu halves it (vLLM's gate_up_proj).
            gate_up = QuantWeight(np.concatenate([gate.data, up.data]), gate.tensor_type.name,
                                  2 * self.ffn, self.hidden)
            # The projections packed as the engine packs them (rows16: one row per SIMD lane).
            proj = lambda name: quant(p + name).pack_rows16()  # noqa: E731
            self.blocks.append(dict(
                attn_norm=norm(p + "attn_norm.weight"), ffn_norm=norm(p + "ffn_norm.weight"),
                q=proj("attn_q.weight"), k=proj("attn_k.weight"), v=proj("attn_v.weight"),
                o=proj("attn_output.weight"), gate_up=gate_up.pack_rows16(), down=proj("ffn_down.weight")))
        self._reader = r  # keeps the mapping alive

    def detokenize(self, ids):
        """GPT-2 byte-level BPE: each token's characters stand for bytes; special tokens dropped."""
        keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
        byte_of, extra = {}, 0
        for b in range(256):
            if b in keep:
                byte_of[chr(b)] = b
            else:
                byte_of[chr(256 + extra)] = b
                extra += 1
        out = bytearray()
        for i in ids:
            if self.token_types[i] != 3:  # not a control token
                out += bytes(byte_of[c] for c in self.vocab_tokens[i])
        return out.decode("utf-8", errors="replace")


# ---- the decode step ------------------------------------------------------------------------------

class DecodeStep:
    """One token per sequence through the model, batch `batch`, on persistent buffers."""

    def __init__(self, m, batch=1, max_context=256):
        self.m, self.batch = m, batch
        self.max_blocks = (max_context + BLOCK - 1) // BLOCK
        kv_dim = m.kv_heads * m.head_dim
        nb = batch * self.max_blocks
        # Persistent inputs (the host writes them before every step; the captured ops read them).
        self.ids = np.zeros(batch, np.int32)
        self.positions = np.zeros(batch, np.int32)
        self.slots = np.full(batch, -1, np.int32)
        self.block_table = np.arange(nb, dtype=np.int32).reshape(batch, self.max_blocks)  # fixed pages
        self.k_cache = [np.zeros((nb, BLOCK, kv_dim), np.float32) for _ in range(m.layers)]
        self.v_cache = [np.zeros((nb, BLOCK, kv_dim), np.float32) for _ in range(m.layers)]
        # Activations written with out= (the rest come from the ops: the graph's pool when captured).
        self.x = np.zeros((batch, m.hidden), np.float32)
        self.h = np.zeros((batch, m.hidden), np.float32)
        self.q = np.zeros((batch, m.hidden), np.float32)
        self.k = np.zeros((batch, kv_dim), np.float32)
        self.v = np.zeros((batch, kv_dim), np.float32)
        self.o = np.zeros((batch, m.hidden), np.float32)
        self.gate_up = np.zeros((batch, 2 * m.ffn), np.float32)
        self.act = np.zeros((batch, m.ffn), np.float32)
        self.down = np.zeros((batch, m.hidden), np.float32)
        self.logits = np.zeros((batch, m.vocab), np.float32)
        self.next_ids = np.zeros(batch, np.int32)

    def write_inputs(self, tokens, positions):
        """Row b feeds token tokens[b] at position positions[b] (its KV goes to that slot)."""
        for b, (tok, pos) in enumerate(zip(tokens, positions)):
            self.ids[b] = tok
            self.positions[b] = pos
            self.slots[b] = self.block_table[b, pos // BLOCK] * BLOCK + pos % BLOCK

    def issue(self, kv_lengths):
        """The step's ops on the current stream: run now (eager) or recorded (inside a capture)."""
        m, B = self.m, self.batch
        attention = dict(num_heads=m.heads, num_key_value_heads=m.kv_heads, scale=1.0 / np.sqrt(m.head_dim),
                         input_layout="BSH", block_table=self.block_table, block_size=BLOCK,
                         actual_seq_lengths_kv=list(kv_lengths))
        q3 = self.q.reshape(B, m.heads, m.head_dim)
        k3 = self.k.reshape(B, m.kv_heads, m.head_dim)
        v3 = self.v.reshape(B, m.kv_heads, m.head_dim)
        embedding(self.ids, m.embd, out=self.x)
        x = self.x
        h, _ = rms_norm(x, m.blocks[0]["attn_norm"], m.eps, out=self.h)
        for i, w in enumerate(m.blocks):
            linear(h, w["q"], out=self.q)
            linear(h, w["k"], out=self.k)
            linear(h, w["v"], out=self.v)
            rope(self.positions, q3, theta=m.theta, style="norm", out=q3)
            rope(self.positions, k3, theta=m.theta, style="norm", out=k3)
            reshape_and_cache(k3, v3, self.k_cache[i], self.v_cache[i], self.slots)
            attn, _ = fia(self.q.reshape(B, 1, m.hidden), self.k_cache[i], self.v_cache[i], **attention)
            linear(attn.reshape(B, m.hidden), w["o"], out=self.o)
            # Residual add fused with the next norm (there is no standalone add op in Python).
            hn, _, x = add_rms_norm(x, self.o, w["ffn_norm"], m.eps)
            linear(hn, w["gate_up"], out=self.gate_up)
            swiglu(self.gate_up, out=self.act)
            linear(self.act, w["down"], out=self.down)
            nxt = m.blocks[i + 1]["attn_norm"] if i + 1 < m.layers else m.output_norm
            h, _, x = add_rms_norm(x, self.down, nxt, m.eps)  # h: the next layer's input (or final norm)
        linear(h, m.output, out=self.logits)
        argmax(self.logits, out=self.next_ids)


# ---- the two loops --------------------------------------------------------------------------------

def run(step, tokens, new_tokens, mode):
    """Feeds `tokens` then generates `new_tokens` greedy ones, one step per token; returns the
    generated tokens, every step's logits, and per step (host seconds, total seconds)."""
    B, layers = step.batch, step.m.layers
    g = None
    if mode == "graph":
        g = npu.NPUGraph()
        step.write_inputs([0] * B, [0] * B)
        with npu.graph(g, auto_dispatch_capture=True):
            step.issue([1] * B)  # placeholder lengths: every step updates them
        assert g.num_dispatch_records == layers, g.num_dispatch_records
    stream = npu.current_stream()
    seq = list(tokens)
    logits, times, generated = [], [], []
    pos = 0
    while pos < len(seq) and len(generated) < new_tokens:
        t0 = time.perf_counter()
        step.write_inputs([seq[pos]] * B, [pos] * B)
        lengths = [pos + 1] * B
        if g is not None:
            g.update(cpu_update_input=[{"actual_seq_lengths_kv": lengths}] * layers)
            g.replay(blocking=False)
            t1 = time.perf_counter()
            stream.synchronize()
        else:
            step.issue(lengths)  # every eager op returns once it ran
            t1 = time.perf_counter()
        t2 = time.perf_counter()
        times.append((t1 - t0, t2 - t0))
        logits.append(step.logits[0].copy())
        if pos == len(seq) - 1:  # past the prompt: greedy
            tok = int(step.next_ids[0])
            generated.append(tok)
            seq.append(tok)
            if tok == step.m.eos:
                break
        pos += 1
    if g is not None:
        g.reset()
    return generated, logits, times


def main():
    ap = argparse.ArgumentParser(description="SmolLM2's decode step in Python: eager vs captured once + updated")
    ap.add_argument("--model", default=str(default_model()))
    ap.add_argument("--prompt", default="The three most useful data structures in computer science are")
    ap.add_argument("--tokens", type=int, default=32, help="greedy tokens to generate")
    args = ap.parse_args()
    if not pathlib.Path(args.model).is_file():
        sys.exit(f"model not found: {args.model} (run /usr/bin/python3 tools/fetch_model.py)")

    m = Model(args.model)
    # The prompt's tokens and the C++ engine's greedy continuation (the reference for the tokens).
    engine = npugraph.llm.Engine(args.model, max_batch=1, max_context=256, mode="graph")
    ref = engine.generate([args.prompt], max_tokens=args.tokens, chat=False)[0]
    del engine
    prompt = list(ref["prompt_tokens"])
    print(f"prompt: {args.prompt!r} ({len(prompt)} tokens)")

    step = DecodeStep(m)
    graph_tokens, graph_logits, graph_times = run(step, prompt, args.tokens, "graph")
    eager_tokens, eager_logits, eager_times = run(step, prompt, args.tokens, "eager")
    text = m.detokenize(graph_tokens)
    print(f"graph text: {text!r}")

    steps = min(len(graph_logits), len(eager_logits))
    equal = sum(np.array_equal(a.view(np.uint32), b.view(np.uint32))
                for a, b in zip(graph_logits[:steps], eager_logits[:steps]))
    same = equal == steps and len(graph_logits) == len(eager_logits)
    print(f"graph vs eager logits: {'bitwise-equal' if same else 'DIFFERENT'} at {equal} of {steps} steps; "
          f"tokens {'identical' if graph_tokens == eager_tokens else 'DIFFERENT'}")
    engine_same = graph_tokens == list(ref["tokens"][:len(graph_tokens)])
    print(f"tokens vs the C++ engine (npugraph.llm.Engine): {'identical' if engine_same else 'DIFFERENT'}")

    skip = min(4, steps // 4)  # warm-up steps (first touch of the weights and buffers)
    med = lambda xs: statistics.median(xs[skip:])  # noqa: E731
    g_host, g_total = med([h for h, _ in graph_times]), med([t for _, t in graph_times])
    e_total = med([t for _, t in eager_times])
    e_host = max(e_total - (g_total - g_host), 0.0)
    print(f"host time per step (median of {steps - skip}): graph {1e6 * g_host:.0f} us (inputs + update + "
          f"replay(blocking=False)), eager {1e6 * e_host:.0f} us (eager step - graph compute): "
          f"{e_host / g_host:.1f}x less host time per graph step")
    print(f"step time: graph {1e3 * g_total:.2f} ms, eager {1e3 * e_total:.2f} ms "
          f"({e_total / g_total:.2f}x); load average {os.getloadavg()[0]:.2f}")
    return 0 if same and engine_same else 1


if __name__ == "__main__":
    sys.exit(main())
