"""The decode engine's ops from Python (python/src/llm_ops.cpp): each against a numpy reference, on
numpy arrays and torch tensors, inside `with npu.graph(g):` captures (outputs given with out=,
inputs changed between replays), and the errors that name argument, value and rule."""
import numpy as np
import pytest
import torch

import npugraph
from npugraph import npu

_C = npugraph._C


def op(name):
    """The op as the package exports it, or from the extension module until __init__.py does."""
    return getattr(npugraph, name, None) or getattr(_C, name)


def ref_rms_norm(x, g, eps):
    x64 = x.astype(np.float64)
    rstd = 1.0 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + eps)
    return x64 * rstd * g, rstd


def test_rms_norm_and_add_rms_norm(rng):
    x = rng.standard_normal((4, 576)).astype(np.float32)
    g = rng.uniform(0.5, 1.5, 576).astype(np.float32)
    y, rstd = op("npu_rms_norm")(x, g, 1e-5)
    want_y, want_rstd = ref_rms_norm(x, g, 1e-5)
    np.testing.assert_allclose(y, want_y, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(rstd, want_rstd, rtol=1e-6)
    h = rng.standard_normal((4, 576)).astype(np.float32)
    y2, _, s = op("npu_add_rms_norm")(x, h, g, 1e-5)
    np.testing.assert_array_equal(s, x + h)
    np.testing.assert_allclose(y2, ref_rms_norm(x + h, g, 1e-5)[0], rtol=2e-6, atol=2e-6)
    yt, _ = op("npu_rms_norm")(torch.from_numpy(x), torch.from_numpy(g), 1e-5)
    assert isinstance(yt, torch.Tensor)
    np.testing.assert_array_equal(yt.numpy(), y)


def test_swiglu_both_forms(rng):
    x = rng.uniform(-6, 6, (3, 2 * 100)).astype(np.float32)
    a, b = x[:, :100].astype(np.float64), x[:, 100:].astype(np.float64)
    want = a / (1 + np.exp(-a)) * b
    np.testing.assert_allclose(op("npu_swiglu")(x), want, rtol=3e-6, atol=3e-6)
    got = op("npu_silu_mul")(np.ascontiguousarray(x[:, :100]), np.ascontiguousarray(x[:, 100:]))
    np.testing.assert_allclose(got, want, rtol=3e-6, atol=3e-6)


def ref_rope(x, pos, theta, style, freq_scale=1.0, freq_factors=None):
    T, H, D = x.shape
    inv = theta ** (-2.0 * np.arange(D // 2) / D) * freq_scale
    if freq_factors is not None:
        inv = inv / freq_factors.astype(np.float64)
    ang = pos[:, None].astype(np.float64) * inv[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    y = x.astype(np.float64).copy()
    if style == "norm":
        a, b = x[..., 0::2], x[..., 1::2]
        y[..., 0::2], y[..., 1::2] = a * c - b * s, b * c + a * s
    else:
        a, b = x[..., : D // 2], x[..., D // 2:]
        y[..., : D // 2], y[..., D // 2:] = a * c - b * s, b * c + a * s
    return y


@pytest.mark.parametrize("style", ["neox", "norm"])
def test_rotary_embedding(rng, style):
    x = rng.standard_normal((5, 9, 64)).astype(np.float32)
    pos = np.array([0, 1, 17, 300, 4095], dtype=np.int32)
    got = op("npu_rotary_embedding")(pos, x, theta=1e5, style=style)
    np.testing.assert_allclose(got, ref_rope(x, pos, 1e5, style), rtol=2e-5, atol=2e-5)
    half = op("npu_rotary_embedding")(pos, x, theta=1e5, style=style, out_dtype=np.float16)
    assert half.dtype == np.float16
    ff = (1.0 + np.arange(32) % 8).astype(np.float32)
    scaled = op("npu_rotary_embedding")(pos, x, theta=1e5, style=style, freq_scale=0.25, freq_factors=ff)
    np.testing.assert_allclose(scaled, ref_rope(x, pos, 1e5, style, 0.25, ff), rtol=2e-5, atol=2e-5)
    assert np.abs(scaled - got).max() > 0.1
    with pytest.raises(ValueError, match=r"freq_factors = float32\[31\]: must be a contiguous float32 \[32\]"):
        op("npu_rotary_embedding")(pos, x, theta=1e5, freq_factors=ff[:31].copy())
    op("npu_rotary_embedding")(pos, x, theta=1e5, style=style, out=x)  # in place
    np.testing.assert_array_equal(x, got)


@pytest.mark.parametrize("qtype", ["Q4_0", "Q4_1", "Q8_0"])
@pytest.mark.parametrize("T", [1, 8, 40])
def test_weight_quant_linear(rng, qtype, T):
    w = npugraph_quant = _C.QuantWeight.quantize(rng.standard_normal((96, 192)).astype(np.float32), qtype)
    assert w.shape == (96, 192) and w.type == qtype
    x = rng.standard_normal((T, 192)).astype(np.float32)
    want = x.astype(np.float64) @ npugraph_quant.dequantize().astype(np.float64).T
    got = op("npu_weight_quant_linear")(x, w)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    bias = rng.standard_normal(96).astype(np.float32)
    got_t = op("npu_weight_quant_linear")(torch.from_numpy(x), w, torch.from_numpy(bias))
    np.testing.assert_allclose(got_t.numpy(), want + bias, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("qtype", ["Q4_0", "Q4_1", "Q8_0"])
def test_weight_quant_linear_q8_activations(rng, qtype):
    """activations="q8": x quantised per block of 32 (Note [Q8 activations]; written out here in
    numpy), then exact products: the result is the float64 product of the dequantised quants."""
    w = _C.QuantWeight.quantize(rng.standard_normal((96, 192)).astype(np.float32), qtype)
    x = (3 * rng.standard_normal((5, 192))).astype(np.float32)
    blocks = x.reshape(5, -1, 32)
    d = (np.abs(blocks).max(axis=-1, keepdims=True) / np.float32(127)).astype(np.float32)
    q = np.rint((blocks * (np.float32(1) / d)).astype(np.float32))
    xq = (q.astype(np.float64) * d).reshape(5, 192)
    want = xq @ w.dequantize().astype(np.float64).T
    got = op("npu_weight_quant_linear")(x, w, activations="q8")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    assert not np.array_equal(got, op("npu_weight_quant_linear")(x, w))  # the float32 path differs
    with pytest.raises(ValueError, match=r"npu_weight_quant_linear: activations = 'int4': must be 'f32' or 'q8'"):
        op("npu_weight_quant_linear")(x, w, activations="int4")


def test_quant_weight_shares_its_bytes_and_checks_them(rng):
    w = _C.QuantWeight.quantize(rng.standard_normal((4, 64)).astype(np.float32), "Q8_0")
    again = _C.QuantWeight(w.data, 8, 4, 64)  # the ggml type number works too
    np.testing.assert_array_equal(again.dequantize(), w.dequantize())
    with pytest.raises(ValueError, match=r"QuantWeight: cols = 48: must be a positive multiple of the block size 32"):
        _C.QuantWeight(np.zeros(34 * 6, np.uint8), "Q8_0", 4, 48)
    with pytest.raises(ValueError, match=r"type = 'Q3_K': must be one of Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K"):
        _C.QuantWeight(w.data, "Q3_K", 4, 64)
    with pytest.raises(ValueError, match=r"QuantWeight: cols = 64: must be a positive multiple of the block size 256 of Q4_K"):
        _C.QuantWeight(w.data, "q4_k", 4, 64)


@pytest.mark.parametrize("qtype", ["Q4_0", "Q4_1", "Q8_0"])
def test_pack_rows16(rng, qtype):
    """pack_rows16: the rows16 layout (Note [Packed weights]); the same matrix, and with
    activations="q8" the per-block formula written out here in float64 (float32 rounding apart)."""
    w = _C.QuantWeight.quantize(rng.standard_normal((37, 96)).astype(np.float32), qtype)
    p = w.pack_rows16()
    assert (w.layout, p.layout, p.rows, p.cols) == ("rows", "rows16", 37, 96)
    assert p.data.size == 48 * w.data.size // 37  # whole groups of 16 rows
    np.testing.assert_array_equal(p.dequantize(), w.dequantize())
    np.testing.assert_array_equal(p.unpack_rows().data, w.data)
    x = (3 * rng.standard_normal((3, 96))).astype(np.float32)
    blocks = x.reshape(3, -1, 32)
    d = (np.abs(blocks).max(axis=-1, keepdims=True) / np.float32(127)).astype(np.float32)
    xq = (np.rint((blocks * (np.float32(1) / d)).astype(np.float32)).astype(np.float64) * d).reshape(3, 96)
    got = op("npu_weight_quant_linear")(x, p, activations="q8")
    np.testing.assert_allclose(got, xq @ w.dequantize().astype(np.float64).T, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(op("npu_weight_quant_linear")(x, p), op("npu_weight_quant_linear")(x, w))
    again = _C.QuantWeight(p.data, qtype, 37, 96, layout="rows16")
    np.testing.assert_array_equal(again.dequantize(), w.dequantize())
    with pytest.raises(ValueError, match=r"QuantWeight: layout = 'cols': must be 'rows' or 'rows16'"):
        _C.QuantWeight(p.data, qtype, 37, 96, layout="cols")
    with pytest.raises(ValueError, match=r"pack_rows16: weight = Q\d_\d\[37, 96\] rows16: must be in the rows layout"):
        p.pack_rows16()
    ids = np.array([36, 1, 17, 16], dtype=np.int32)  # either side of a group boundary, and the last row
    np.testing.assert_array_equal(op("npu_embedding")(ids, p), w.dequantize()[ids])


def test_plain_linear(rng):
    w = rng.standard_normal((33, 47)).astype(np.float16)
    x = rng.standard_normal((3, 47)).astype(np.float32)
    np.testing.assert_allclose(op("npu_linear")(x, w), x.astype(np.float64) @ w.astype(np.float64).T,
                               rtol=1e-5, atol=1e-5)


def test_embedding_and_a_bad_id(rng):
    table = _C.QuantWeight.quantize(rng.standard_normal((50, 64)).astype(np.float32), "Q8_0")
    ids = np.array([[3, 49], [0, 3]], dtype=np.int32)
    got = op("npu_embedding")(ids, table)
    np.testing.assert_array_equal(got, table.dequantize()[ids])
    with pytest.raises(npugraph.TaskError, match=r"ids\[1\] = 50: outside the vocabulary \[0, 50\)"):
        op("npu_embedding")(np.array([1, 50], dtype=np.int32), table)


def test_reshape_and_cache(rng):
    k = rng.standard_normal((3, 2, 8)).astype(np.float32)
    v = rng.standard_normal((3, 2, 8)).astype(np.float32)
    kc = np.zeros((2, 4, 16), np.float16)
    vc = np.zeros((2, 4, 16), np.float16)
    op("_npu_reshape_and_cache")(k, v, kc, vc, np.array([5, -1, 0], dtype=np.int32))
    np.testing.assert_array_equal(kc.reshape(8, 16)[5], k[0].reshape(16).astype(np.float16))
    np.testing.assert_array_equal(vc.reshape(8, 16)[0], v[2].reshape(16).astype(np.float16))
    assert not kc.reshape(8, 16)[[1, 2, 3, 4, 6, 7]].any()
    with pytest.raises(npugraph.TaskError, match=r"slot_mapping\[0\] = 8: outside the cache's 8 slots"):
        op("_npu_reshape_and_cache")(k[:1], v[:1], kc, vc, np.array([8], dtype=np.int32))
    # head_major: [num_blocks, kv_heads, block_size, head_dim]; slot 5 is block 1, row 1 of each head
    hkc = np.zeros((2, 2, 4, 8), np.float16)
    hvc = np.zeros((2, 2, 4, 8), np.float16)
    op("_npu_reshape_and_cache")(k, v, hkc, hvc, np.array([5, -1, 0], dtype=np.int32), cache_layout="head_major")
    np.testing.assert_array_equal(hkc[1, :, 1], k[0].astype(np.float16))
    np.testing.assert_array_equal(hvc[0, :, 0], v[2].astype(np.float16))
    assert np.count_nonzero(hkc) == np.count_nonzero(k[[0, 2]].astype(np.float16))
    with pytest.raises(ValueError, match=r"cache_layout = 'bnsd': must be 'token_major' or 'head_major'"):
        op("_npu_reshape_and_cache")(k, v, hkc, hvc, np.array([5, -1, 0], dtype=np.int32), cache_layout="bnsd")
    with pytest.raises(ValueError, match=r"a head_major cache must be \[num_blocks, kv_heads"):
        op("_npu_reshape_and_cache")(k, v, kc, vc, np.array([5, -1, 0], dtype=np.int32), cache_layout="head_major")


def test_argmax_and_sampling(rng):
    logits = rng.standard_normal((3, 1000)).astype(np.float32)
    np.testing.assert_array_equal(op("npu_argmax")(logits), logits.argmax(-1))
    seeds = np.array([1, 2, 3], dtype=np.int64)
    steps = np.zeros(3, dtype=np.int64)
    greedy = op("npu_sample")(logits, seeds, steps, temperature=0)
    np.testing.assert_array_equal(greedy, logits.argmax(-1))
    a = op("npu_sample")(logits, seeds, steps, temperature=0.9, top_k=40, top_p=0.9)
    b = op("npu_sample")(logits, seeds, steps, temperature=0.9, top_k=40, top_p=0.9)
    np.testing.assert_array_equal(a, b)  # the same seeds and steps draw the same tokens
    top40 = np.argsort(-logits, axis=-1)[:, :40]
    assert all(a[i] in top40[i] for i in range(3))
    with pytest.raises(ValueError, match=r"sample: top_p = 1.5: must be in \(0, 1\]"):
        op("npu_sample")(logits, seeds, steps, top_p=1.5)


def test_a_captured_decode_step_follows_its_inputs(rng):
    """Embedding -> norm -> rope -> linear -> argmax and sampling captured once with out= buffers;
    the ids and positions are written between replays, and each replay equals the eager ops."""
    H, V = 64, 96
    table = _C.QuantWeight.quantize(rng.standard_normal((V, H)).astype(np.float32), "Q8_0")
    w = _C.QuantWeight.quantize(rng.standard_normal((V, H)).astype(np.float32), "Q4_1")
    g = rng.uniform(0.5, 1.5, H).astype(np.float32)
    ids = np.zeros(2, np.int32)
    pos = np.zeros(2, np.int32)
    x = np.zeros((2, H), np.float32)
    hn = np.zeros((2, H), np.float32)
    logits = np.zeros((2, V), np.float32)
    token = np.zeros(2, np.int32)
    drawn = np.zeros(2, np.int32)
    seeds = np.array([5, 6], np.int64)
    steps = np.zeros(2, np.int64)

    def step():
        op("npu_embedding")(ids, table, out=x)
        op("npu_rms_norm")(x, g, 1e-5, out=hn)
        op("npu_rotary_embedding")(pos, hn.reshape(2, 1, H), theta=1e5, style="norm", out=hn.reshape(2, 1, H))
        op("npu_weight_quant_linear")(hn, w, out=logits)
        op("npu_argmax")(logits, out=token)
        op("npu_sample")(logits, seeds, steps, temperature=1.0, advance_steps=True, out=drawn)

    graph = npu.NPUGraph()
    with npu.graph(graph):
        step()
    for i in range(3):
        ids[:] = [i + 1, 2 * i + 7]
        pos[:] = [i, i + 10]
        graph.replay()
        npu.synchronize()
        got = logits.copy(), token.copy(), drawn.copy()
        steps[:] -= 1  # the eager step below draws with the same counters
        step()
        np.testing.assert_array_equal(got[0], logits)
        np.testing.assert_array_equal(got[1], token)
        np.testing.assert_array_equal(got[2], drawn)
    assert list(steps) == [3, 3]


def test_errors_name_argument_value_and_rule(rng):
    x = np.zeros((4, 576), np.float32)
    with pytest.raises(ValueError, match=r"rms_norm: gamma = float32\[512\]: must have the hidden size 576 of x = float32\[4, 576\]"):
        op("npu_rms_norm")(x, np.ones(512, np.float32))
    with pytest.raises(ValueError, match=r"style = 'half': must be 'neox'"):
        op("npu_rotary_embedding")(np.zeros(4, np.int32), x.reshape(4, 9, 64), style="half")
    w = _C.QuantWeight.quantize(np.zeros((8, 512), np.float32), "Q4_1")
    with pytest.raises(ValueError, match=r"x = float32\[4, 576\]: its last dim must be the in_features 512 of weight = Q4_1\[8, 512\]"):
        op("npu_weight_quant_linear")(x, w)
    with pytest.raises(TypeError, match=r"x: expected a numpy array or a torch tensor"):
        op("npu_swiglu")([1.0, 2.0])
