"""An independent Llama forward pass in numpy (float64), written from the Llama equations, reading the
weights through llama.cpp's `gguf` package (not npugraph's reader): the reference the engine's logits
are checked against (test_engine_reference.py).

    x = embed(tokens)
    for each layer:
        h = rmsnorm(x) * attn_norm;  q, k, v = h Wq^T, h Wk^T, h Wv^T
        q, k = rope(q), rope(k)          # GGUF Llama files: adjacent pairs (2i, 2i+1), theta^(-2i/D)
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
    def __init__(self, path):
        import gguf

        reader = gguf.GGUFReader(str(path))
        arch = _field(reader, "general.architecture")
        assert arch == "llama", arch
        self.layers = int(_field(reader, "llama.block_count"))
        self.hidden = int(_field(reader, "llama.embedding_length"))
        self.heads = int(_field(reader, "llama.attention.head_count"))
        self.kv_heads = int(_field(reader, "llama.attention.head_count_kv"))
        self.eps = float(_field(reader, "llama.attention.layer_norm_rms_epsilon"))
        self.theta = float(_field(reader, "llama.rope.freq_base"))
        self.head_dim = self.hidden // self.heads
        tensors = {t.name: t for t in reader.tensors}

        def weight(name):
            t = tensors[name]
            values = gguf.quants.dequantize(t.data, t.tensor_type)
            return np.asarray(values, dtype=np.float64).reshape([int(d) for d in reversed(t.shape)])

        self.embd = weight("token_embd.weight")
        self.output = weight("output.weight") if "output.weight" in tensors else self.embd
        self.output_norm = weight("output_norm.weight")
        self.blocks = []
        for i in range(self.layers):
            p = f"blk.{i}."
            self.blocks.append({k: weight(p + k + ".weight") for k in (
                "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate",
                "ffn_up", "ffn_down")})

    def _rmsnorm(self, x, g):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * g

    def _rope(self, x, positions):
        # x [T, heads, D]: rotate adjacent pairs (2i, 2i + 1) by position * theta^(-2i / D).
        d = self.head_dim
        inv = self.theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        angles = positions[:, None] * inv[None, :]
        cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = b * cos + a * sin
        return out

    def logits(self, tokens, q8_rows=None):
        """Logits [len(tokens), vocab] of every position (position t predicts token t + 1).
        q8_rows: None (x float in every product), or a bool per position: the rows whose layer
        products take q8 activations; the output projection then takes them for every row."""
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
        x = self.embd[tokens]
        group = self.heads // self.kv_heads
        causal = np.triu(np.full((t_len, t_len), -np.inf), k=1)
        for w in self.blocks:
            h = self._rmsnorm(x, w["attn_norm"])
            q = self._rope(mm(h, w["attn_q"]).reshape(t_len, self.heads, self.head_dim), positions)
            k = self._rope(mm(h, w["attn_k"]).reshape(t_len, self.kv_heads, self.head_dim), positions)
            v = mm(h, w["attn_v"]).reshape(t_len, self.kv_heads, self.head_dim)
            att = np.empty((t_len, self.heads, self.head_dim))
            for n in range(self.heads):
                kv = n // group
                s = q[:, n, :] @ k[:, kv, :].T / np.sqrt(self.head_dim) + causal
                p = np.exp(s - s.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                att[:, n, :] = p @ v[:, kv, :]
            x = x + mm(att.reshape(t_len, self.hidden), w["attn_output"])
            h = self._rmsnorm(x, w["ffn_norm"])
            gate, up = mm(h, w["ffn_gate"]), mm(h, w["ffn_up"])
            x = x + mm(gate / (1.0 + np.exp(-gate)) * up, w["ffn_down"])
        return mm(self._rmsnorm(x, self.output_norm), self.output, np.full(t_len, True) if q8 else None)
