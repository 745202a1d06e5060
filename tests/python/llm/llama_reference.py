"""An independent Llama / Qwen 2 / Qwen 3 / Gemma 3 forward pass in numpy (float64), written from the Llama equations, reading the
weights through llama.cpp's `gguf` package (not npugraph's reader): the reference the engine's logits
are checked against (test_engine_reference.py).

    x = embed(tokens)
    for each layer:
        h = rmsnorm(x) * attn_norm;  q, k, v = h Wq^T (+ bq), h Wk^T (+ bk), h Wv^T (+ bv)   # qwen2 biases
        q, k = rmsnorm(q_head) * q_norm, rmsnorm(k_head) * k_norm                      # qwen3 only
        q, k = rope(q), rope(k)   # llama: adjacent pairs (2i, 2i+1); qwen, gemma: halves; theta^(-2i/D)
    gemma3 differs: x = embed * sqrt(hidden); each sublayer's output RMS-normed (post norms) before
    its residual add; GeGLU (tanh GELU) instead of SwiGLU; rope base 10000 on sliding layers (every
    layer but each sixth), where the query at position p sees the keys j with p - W < j <= p only
    (W = gemma3.attention.sliding_window; llama.cpp's is_masked_swa, Hugging Face's sliding window).
        a = softmax(q k^T / sqrt(D) + causal) v   (each query head on its KV head, GQA)
        x = x + a Wo^T
        h = rmsnorm(x) * ffn_norm;  x = x + (silu(h Wg^T) * (h Wu^T)) Wd^T
    logits = (rmsnorm(x) * output_norm) Wout^T    # Wout = token_embd when tied

With q8 activations (the engine's default on the cpu), the rows of x that the engine multiplies in
GEMV calls are first quantised as Note [Q8 activations] defines (quantise_q8 below, written from the
note, in float32 as the engine computes it); the products are then taken in float64.
"""
import numpy as np


def quantise_q8(x):
    """Each block of 32 values of each row of x (as float32): int8 quants q = rint(x * (1 / d)),
    d = max|x| / 127 (blocks with d below float32's smallest normal: zero); returns q * d (float64)."""
    x32 = np.asarray(x, dtype=np.float32)
    blocks = x32.reshape(*x32.shape[:-1], -1, 32)
    d = (np.abs(blocks).max(axis=-1, keepdims=True) / np.float32(127)).astype(np.float32)
    zero = d < np.finfo(np.float32).tiny
    inv = (np.float32(1) / np.where(zero, np.float32(1), d)).astype(np.float32)
    q = np.rint((blocks * inv).astype(np.float32))
    q[np.broadcast_to(zero, q.shape)] = 0
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(x32.shape)


def _field(reader, key):
    f = reader.fields[key]
    value = f.parts[f.data[0]]
    if f.types and f.types[0].name == "STRING":
        return bytes(value).decode()
    return value.tolist()[0] if hasattr(value, "tolist") else value


class LlamaReference:
    def __init__(self, path, sliding_window=None):
        """sliding_window: None, the file's (gemma3); 0, none (every layer sees the whole context)."""
        import gguf

        reader = gguf.GGUFReader(str(path))
        arch = _field(reader, "general.architecture")
        assert arch in ("llama", "qwen2", "qwen3", "gemma3"), arch
        self.arch = arch
        self.layers = int(_field(reader, f"{arch}.block_count"))
        self.hidden = int(_field(reader, f"{arch}.embedding_length"))
        self.heads = int(_field(reader, f"{arch}.attention.head_count"))
        self.kv_heads = int(_field(reader, f"{arch}.attention.head_count_kv"))
        self.eps = float(_field(reader, f"{arch}.attention.layer_norm_rms_epsilon"))
        self.theta = float(_field(reader, f"{arch}.rope.freq_base"))
        key_length = f"{arch}.attention.key_length"
        self.head_dim = (int(_field(reader, key_length)) if key_length in reader.fields
                         else self.hidden // self.heads)
        window_key = f"{arch}.attention.sliding_window"
        file_window = int(_field(reader, window_key)) if window_key in reader.fields else 0
        self.window = file_window if sliding_window is None else sliding_window
        tensors = {t.name: t for t in reader.tensors}

        def weight(name):
            t = tensors[name]
            values = gguf.quants.dequantize(t.data, t.tensor_type)
            return np.asarray(values, dtype=np.float64).reshape([int(d) for d in reversed(t.shape)])

        # rope scaling (Note [RoPE scaling]): 'linear' divides every angle by the factor (gemma3:
        # global layers only); Llama 3's rope_freqs.weight divides pair i's angle by its factor
        scaling = f"{arch}.rope.scaling.type"
        linear = scaling in reader.fields and _field(reader, scaling) == "linear"
        self.freq_scale = 1.0 / float(_field(reader, f"{arch}.rope.scaling.factor")) if linear else 1.0
        self.rope_freqs = weight("rope_freqs.weight") if "rope_freqs.weight" in tensors else None
        self.embd = weight("token_embd.weight")
        self.output = weight("output.weight") if "output.weight" in tensors else self.embd
        self.output_norm = weight("output_norm.weight")
        self.blocks = []
        for i in range(self.layers):
            p = f"blk.{i}."
            block = {k: weight(p + k + ".weight") for k in (
                "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate",
                "ffn_up", "ffn_down")}
            for k in ("attn_q", "attn_k", "attn_v"):  # qwen2: biases on the projections
                block[k + ".bias"] = weight(p + k + ".bias") if p + k + ".bias" in tensors else 0.0
            for k in ("attn_q_norm", "attn_k_norm"):  # qwen3, gemma3: an RMSNorm of each head
                block[k] = weight(p + k + ".weight") if p + k + ".weight" in tensors else None
            for k in ("post_attention_norm", "post_ffw_norm"):  # gemma3
                block[k] = weight(p + k + ".weight") if p + k + ".weight" in tensors else None
            self.blocks.append(block)

    def _rmsnorm(self, x, g):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * g

    def _rope(self, x, positions, theta=None, scale=None):
        # x [T, heads, D]: rotate pair i by position * theta^(-2i / D) * scale / rope_freqs[i]; Llama
        # GGUF files pair adjacent values (2i, 2i + 1), Qwen's pair the halves (i, i + D/2) (NEOX).
        d = self.head_dim
        inv = (theta or self.theta) ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        inv = inv * (self.freq_scale if scale is None else scale)
        if self.rope_freqs is not None:
            inv = inv / self.rope_freqs
        angles = positions[:, None] * inv[None, :]
        cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
        lo, hi = (slice(0, d // 2), slice(d // 2, d)) if self.arch != "llama" else (slice(0, d, 2), slice(1, d, 2))
        a, b = x[..., lo], x[..., hi]
        out = np.empty_like(x)
        out[..., lo] = a * cos - b * sin
        out[..., hi] = b * cos + a * sin
        return out

    def logits(self, tokens, q8_rows=None, last=None, kv_dtype=None):
        """Logits [len(tokens), vocab] of every position (position t predicts token t + 1), or of the
        last `last` positions only.
        q8_rows: None (x float in every product), or a bool per position: the rows whose layer
        products take q8 activations; the output projection then takes them for every row.
        kv_dtype: None, or a numpy dtype (np.float16) every key and value is rounded to (via
        float32, as the engine's kv_dtype cache stores them) before attention reads it."""
        tokens = np.asarray(tokens)
        q8 = q8_rows is not None

        def mm(x, w, rows=q8_rows):
            if rows is None or not np.any(rows):
                return x @ w.T
            x = x.copy()
            x[rows] = quantise_q8(x[rows])
            return x @ w.T

        t_len = len(tokens)
        positions = np.arange(t_len, dtype=np.float64)
        gemma = self.arch == "gemma3"
        x = self.embd[tokens] * (np.sqrt(np.float32(self.hidden)) if gemma else 1.0)
        group = self.heads // self.kv_heads
        causal = np.triu(np.full((t_len, t_len), -np.inf), k=1)
        # gemma3's sliding layers: also -inf where p - j >= W (row p, column j)
        windowed = causal + (np.tril(np.full((t_len, t_len), -np.inf), k=-self.window) if self.window else 0.0)
        for i, w in enumerate(self.blocks):
            sliding = gemma and i % 6 != 5  # rope base 10000 and the window
            theta = 10000.0 if sliding else self.theta
            mask = windowed if sliding else causal
            h = self._rmsnorm(x, w["attn_norm"])
            q = (mm(h, w["attn_q"]) + w["attn_q.bias"]).reshape(t_len, self.heads, self.head_dim)
            k = (mm(h, w["attn_k"]) + w["attn_k.bias"]).reshape(t_len, self.kv_heads, self.head_dim)
            v = (mm(h, w["attn_v"]) + w["attn_v.bias"]).reshape(t_len, self.kv_heads, self.head_dim)
            if w["attn_q_norm"] is not None:
                q, k = self._rmsnorm(q, w["attn_q_norm"]), self._rmsnorm(k, w["attn_k_norm"])
            scale = 1.0 if gemma and i % 6 != 5 else None  # gemma3: linear scaling on global layers only
            q, k = self._rope(q, positions, theta, scale), self._rope(k, positions, theta, scale)
            if kv_dtype is not None:
                k = k.astype(np.float32).astype(kv_dtype).astype(np.float64)
                v = v.astype(np.float32).astype(kv_dtype).astype(np.float64)
            att = np.empty((t_len, self.heads, self.head_dim))
            for n in range(self.heads):
                kv = n // group
                s = q[:, n, :] @ k[:, kv, :].T / np.sqrt(self.head_dim) + mask
                p = np.exp(s - s.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                att[:, n, :] = p @ v[:, kv, :]
            o = mm(att.reshape(t_len, self.heads * self.head_dim), w["attn_output"])
            x = x + (self._rmsnorm(o, w["post_attention_norm"]) if gemma else o)
            h = self._rmsnorm(x, w["ffn_norm"])
            gate, up = mm(h, w["ffn_gate"]), mm(h, w["ffn_up"])
            if gemma:  # GeGLU, GELU's tanh approximation
                act = 0.5 * gate * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (gate + 0.044715 * gate ** 3))) * up
                x = x + self._rmsnorm(mm(act, w["ffn_down"]), w["post_ffw_norm"])
            else:
                x = x + mm(gate / (1.0 + np.exp(-gate)) * up, w["ffn_down"])
        x = x[t_len - (t_len if last is None else last):]
        return mm(self._rmsnorm(x, self.output_norm), self.output, np.full(len(x), True) if q8 else None)
