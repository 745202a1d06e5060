"""The graph-mode attention calls of torch_npu code beyond FIA v1's functional form: the `.out`
form recorded under auto_dispatch_capture (workspace optional), npu_fused_infer_attention_score_v2
(its own keyword names, `.out`, get_max_workspace, updates by v2 names) and _npu_paged_attention
(vllm-ascend's decode attention, context_lens updated per step)."""
import numpy as np
import pytest
import torch

import npugraph
import npugraph.compat as compat
from npugraph import npu
from conftest import randn

fia = npugraph.npu_fused_infer_attention_score
fia_v2 = npugraph.npu_fused_infer_attention_score_v2
get_ws = npugraph._npu_fused_infer_attention_score_get_max_workspace
get_ws_v2 = npugraph._npu_fused_infer_attention_score_v2_get_max_workspace
paged = npugraph._npu_paged_attention
paged_ws = npugraph._npu_paged_attention_get_workspace
OPTS = dict(num_heads=2, input_layout="BNSD")
DEADLINE = 20.0


@pytest.fixture
def qkv(rng):
    return (randn((1, 2, 1, 16), torch.float16, rng), randn((1, 2, 32, 16), torch.float16, rng),
            randn((1, 2, 32, 16), torch.float16, rng))


# --- .out under auto_dispatch_capture (issue point 4) ---

@pytest.mark.parametrize("with_workspace", [True, False])
def test_out_calls_are_recorded_under_auto_dispatch_and_updated(qkv, with_workspace):
    q, k, v = qkv
    out, lse = torch.empty(1, 2, 1, 16, dtype=torch.float16), torch.empty(1)
    ws = get_ws(q, k, v, actual_seq_lengths_kv=[32], **OPTS) if with_workspace else None
    g = npu.NPUGraph()
    with npu.graph(g, auto_dispatch_capture=True):
        returned = fia.out(q, k, v, workspace=ws, out=[out, lse], actual_seq_lengths_kv=[32], **OPTS)
        functional, _ = fia(q, k, v, actual_seq_lengths_kv=[32], **OPTS)
    assert returned[0] is out
    for n in (5, 17, 32, 1):
        g.update(cpu_update_input=[{"actual_seq_lengths_kv": [n]}, {"actual_seq_lengths_kv": [33 - n]}])
        g.replay()
        assert torch.equal(out, fia(q, k, v, actual_seq_lengths_kv=[n], **OPTS)[0]), n
        assert torch.equal(functional, fia(q, k, v, actual_seq_lengths_kv=[33 - n], **OPTS)[0]), n


def test_a_recorded_out_call_refuses_a_replay_without_update(qkv):
    q, k, v = qkv
    out, lse = torch.empty(1, 2, 1, 16, dtype=torch.float16), torch.empty(1)
    g = npu.NPUGraph()
    with npu.graph(g, auto_dispatch_capture=True):
        fia.out(q, k, v, out=[out, lse], actual_seq_lengths_kv=[32], **OPTS)
    with pytest.raises(npugraph.StateError, match=r"cpu_update_input=\[\{\}\]"):
        g.replay()  # recorded: its event waits for an update, as any recorded call's


def test_out_without_workspace_in_a_task_group_and_its_update(qkv):
    """torch_npu makes workspace optional: the call sizes one (from the graph's pool in a capture)."""
    q, k, v = qkv
    out, lse = torch.empty(1, 2, 1, 16, dtype=torch.float16), torch.empty(1)
    g = npu.NPUGraph()
    with npu.graph(g):
        s = npu.current_stream()
        npu.graph_task_group_begin(s)
        fia.out(q, k, v, out=[out, lse], actual_seq_lengths_kv=[32], **OPTS)
        handle = npu.graph_task_group_end(s)
    for n in (3, 30):
        stream = npu.Stream()
        with npu.stream(stream):
            npu.graph_task_update_begin(stream, handle)
            fia.out(q, k, v, out=[out, lse], actual_seq_lengths_kv=[n], **OPTS)
            npu.graph_task_update_end(stream)
        stream.synchronize()
        g.replay()
        assert torch.equal(out, fia(q, k, v, actual_seq_lengths_kv=[n], **OPTS)[0]), n


# --- npu_fused_infer_attention_score_v2 ---

def test_v2_is_v1_under_v2_names(qkv):
    q, k, v = qkv
    for n in (1, 9, 32):
        out1, lse1 = fia(q, k, v, num_heads=2, input_layout="BNSD", scale=0.3, actual_seq_lengths_kv=[n],
                         softmax_lse_flag=True)
        out2, lse2 = fia_v2(q, k, v, num_query_heads=2, input_layout="BNSD", softmax_scale=0.3,
                            actual_seq_kvlen=[n], return_softmax_lse=True, query_dtype=None,
                            learnable_sink=None, query_quant_mode=0)
        assert torch.equal(out1, out2) and torch.equal(lse1, lse2)
    ws = get_ws_v2(q, k, v, num_query_heads=2, input_layout="BNSD", actual_seq_kvlen=[32])
    assert ws.dtype == torch.uint8 and ws.numel() == get_ws(q, k, v, actual_seq_lengths_kv=[32], **OPTS).numel()
    out, lse = torch.empty(1, 2, 1, 16, dtype=torch.float16), torch.empty(1)
    fia_v2.out(q, k, v, workspace=ws, out=[out, lse], num_query_heads=2, input_layout="BNSD",
               actual_seq_kvlen=[7])
    assert torch.equal(out, fia(q, k, v, actual_seq_lengths_kv=[7], **OPTS)[0])


def test_v2_keyword_errors_name_the_v2_keyword(qkv):
    q, k, v = qkv
    with pytest.raises(TypeError, match=r"npu_fused_infer_attention_score_v2\(\) got an unexpected keyword "
                                        r"argument 'actual_seq_lengths_kv'"):
        fia_v2(q, k, v, num_query_heads=2, input_layout="BNSD", actual_seq_lengths_kv=[3])
    with pytest.raises(TypeError, match=r"npu_fused_infer_attention_score\(\) got an unexpected keyword "
                                        r"argument 'actual_seq_kvlen'"):
        fia(q, k, v, actual_seq_kvlen=[3], **OPTS)
    with pytest.raises(TypeError, match=r"npu_fused_infer_attention_score_v2: softmax_scale: scale = 'x': "
                                        r"expected a float, got str"):
        fia_v2(q, k, v, num_query_heads=2, input_layout="BNSD", softmax_scale="x")
    with pytest.raises(npugraph.ArgumentError, match=r"query_quant_mode = 1: not supported by npugraph"):
        fia_v2(q, k, v, num_query_heads=2, input_layout="BNSD", query_quant_mode=1)
    assert "actual_seq_kvlen" in npugraph._C._fia_keywords(v2=True)
    assert "actual_seq_kvlen" not in npugraph._C._fia_keywords()


# --- v2's learnable_sink (docs/fia.md, "Learnable sink") ---

def sink_reference(q, k, v, sink, scale, kv_lens, q_lens=None, causal=False, mask=None):
    """float64 (numpy) attention with a sink: q [B, N, S, D], k/v [B, KV_N, Skv, D] (BNSD, contiguous),
    sink [N]; causal = sparse_mode 3 (bottom right); mask: bool [B, S, Skv], True = masked out. Each valid
    row's softmax has one more logit, sink[n] (unscaled, unmasked, no value); a valid row with nothing
    visible gives out 0 and lse = sink; rows past the query length out 0 and lse +inf."""
    q, k, v = (t.double().numpy() for t in (q, k, v))
    sink = sink.double().numpy()
    B, N, S, _ = q.shape
    group = N // k.shape[1]
    out = np.zeros((B, N, S, v.shape[3]))
    lse = np.full((B, N, S, 1), np.inf)
    for b in range(B):
        lq = S if q_lens is None or S == 1 else q_lens[b]
        lkv = kv_lens[b]
        for n in range(N):
            kk, vv = k[b, n // group, :lkv], v[b, n // group, :lkv]
            s = scale * (q[b, n, :lq] @ kk.T)
            visible = np.ones(s.shape, bool)
            if causal and S > 1:
                visible &= np.arange(lkv)[None, :] <= np.arange(lq)[:, None] + (lkv - lq)
            if mask is not None:
                visible &= ~mask[b, :lq, :lkv]
            s = np.where(visible, s, -np.inf)
            m = np.maximum(s.max(axis=1, initial=-np.inf), sink[n])
            e = np.exp(s - m[:, None])
            den = e.sum(axis=1) + np.exp(sink[n] - m)
            out[b, n, :lq] = (e / den[:, None]) @ vv
            lse[b, n, :lq, 0] = m + np.log(den)
    return out, lse


def paged_cache(t, ids, block_size):
    """t [B, KV_N, Skv, D] in a cache [blocks, KV_N, block_size, D] whose block ids[b, i] holds rows
    [i * block_size, (i + 1) * block_size) of batch b."""
    B, kvn, skv, d = t.shape
    cache = torch.zeros(ids.size, kvn, block_size, d, dtype=t.dtype)
    for b in range(B):
        for i in range(ids.shape[1]):
            chunk = t[b, :, i * block_size:(i + 1) * block_size]
            cache[ids[b, i], :, :chunk.shape[1]] = chunk
    return cache


COMPRESSED_MASK = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), diagonal=1)

# (name, B, N, KV_N, S, Skv, D, kv lengths, q lengths, sparse_mode, query dtype, sink dtype). Batches with
# KV length 0, a full mask hiding whole rows and causal bands give valid rows with nothing visible.
SINK_CASES = [
    ("decode_direct", 2, 4, 4, 1, 600, 128, [600, 333], None, 0, torch.float16, torch.float32),
    ("decode_gqa_splits", 3, 8, 2, 1, 3000, 64, [3000, 0, 777], None, 0, torch.bfloat16, torch.bfloat16),
    ("decode_rows_causal", 2, 16, 2, 3, 700, 64, [700, 300], [3, 2], 3, torch.float16, torch.float16),
    ("prefill_causal", 3, 4, 2, 70, 256, 32, [256, 90, 0], [70, 33, 20], 3, torch.bfloat16, torch.float32),
    ("prefill_full_mask", 2, 4, 1, 9, 128, 16, [128, 40], [9, 7], 1, torch.float16, torch.bfloat16),
]


@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
@pytest.mark.parametrize("case", SINK_CASES, ids=[c[0] for c in SINK_CASES])
def test_v2_learnable_sink_matches_a_float64_reference(case, paged, rng):
    _, B, N, KVN, S, Skv, D, kv_lens, q_lens, mode, dtype, sink_dtype = case
    q, k, v = (randn(shape, dtype, rng) for shape in ((B, N, S, D), (B, KVN, Skv, D), (B, KVN, Skv, D)))
    sink = torch.from_numpy(rng.uniform(-3, 3, N).astype(np.float32)).to(sink_dtype)
    sink[0] = 6.0  # above every score
    scale = D ** -0.5
    kw = dict(num_query_heads=N, num_key_value_heads=KVN, input_layout="BNSD", softmax_scale=scale,
              actual_seq_kvlen=kv_lens, return_softmax_lse=True, learnable_sink=sink, sparse_mode=mode)
    mask = None
    if q_lens is not None:
        kw["actual_seq_qlen"] = q_lens
    if mode == 3:
        kw["atten_mask"] = COMPRESSED_MASK
    elif mode == 1:
        mask = rng.uniform(size=(B, S, Skv)) < 0.3
        mask[0, 2] = True  # a valid row with every column masked
        mask[1, :, 40:] = False
        kw["atten_mask"] = torch.from_numpy(mask)
    ref_out, ref_lse = sink_reference(q, k, v, sink, scale, kv_lens, q_lens, causal=mode == 3, mask=mask)
    kk, vv = k, v
    if paged:
        block_size = 16 if S == 1 else 128
        per = -(-Skv // block_size)
        ids = rng.permutation(B * per).reshape(B, per)
        kk, vv = paged_cache(k, ids, block_size), paged_cache(v, ids, block_size)
        kw.update(block_table=torch.from_numpy(ids.astype(np.int32)), block_size=block_size)
    out, lse = fia_v2(q, kk, vv, **kw)
    tol = 2e-3 if dtype == torch.float16 else 1.6e-2
    np.testing.assert_allclose(out.double().numpy(), ref_out, rtol=tol, atol=tol)
    np.testing.assert_allclose(lse.numpy(), ref_lse, rtol=2e-5, atol=2e-5)
    # Valid rows with nothing visible: out 0, lse exactly the sink.
    sink32 = sink.float().numpy()
    empty = [(b, i) for b in range(B) for i in range(S if q_lens is None or S == 1 else q_lens[b])
             if kv_lens[b] == 0 or (mask is not None and mask[b, i, :kv_lens[b]].all())]
    assert empty or case[0] in ("decode_direct", "decode_rows_causal")
    for b, i in empty:
        assert not out[b, :, i].any()
        assert np.array_equal(lse[b, :, i, 0].numpy(), sink32), (b, i)


def test_v2_learnable_sink_on_the_simple_kernel(rng):
    """A key whose D stride is not 1 runs on the simple kernel (the fast ones do not cover it): the same
    reference, and the fast kernels' result within rounding."""
    B, N, KVN, Skv, D = 2, 4, 2, 300, 32
    q = randn((B, N, 1, D), torch.float16, rng)
    wide = randn((B, KVN, Skv, 2 * D), torch.float16, rng)
    k, v = wide[..., ::2], randn((B, KVN, Skv, D), torch.float16, rng)
    sink = torch.tensor([0.5, -2.0, 4.0, 1.0])
    kw = dict(num_query_heads=N, num_key_value_heads=KVN, input_layout="BNSD", softmax_scale=0.2,
              actual_seq_kvlen=[300, 0], return_softmax_lse=True, learnable_sink=sink)
    ref_out, ref_lse = sink_reference(q, k, v, sink, 0.2, [300, 0])
    out, lse = fia_v2(q, k, v, **kw)
    np.testing.assert_allclose(out.double().numpy(), ref_out, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(lse.numpy(), ref_lse, rtol=2e-5, atol=2e-5)
    fast_out, fast_lse = fia_v2(q, k.contiguous(), v, **kw)
    np.testing.assert_allclose(out.float().numpy(), fast_out.float().numpy(), rtol=2e-3, atol=2e-3)
    assert np.array_equal(lse[1, :, 0, 0].numpy(), sink.numpy())


@pytest.mark.parametrize("S", [1, 6])
def test_v2_learnable_sink_captured_updated_and_replayed_bitwise(S, rng):
    """Recorded under auto_dispatch_capture: replays equal the eager call bitwise, after updates of the
    lengths and of the sink (other memory, same shape and dtype); its dtype or presence is not updatable."""
    B, N, KVN, Skv, D = 2, 8, 2, 1024, 64
    q, k, v = (randn(shape, torch.float16, rng) for shape in ((B, N, S, D), (B, KVN, Skv, D), (B, KVN, Skv, D)))
    sink = torch.from_numpy(rng.uniform(-2, 2, N).astype(np.float32))
    kw = dict(num_query_heads=N, num_key_value_heads=KVN, input_layout="BNSD", softmax_scale=0.125,
              return_softmax_lse=True)
    if S > 1:
        kw.update(sparse_mode=3, atten_mask=COMPRESSED_MASK, actual_seq_qlen=[S, S - 2])
    g = npu.NPUGraph()
    with npu.graph(g, auto_dispatch_capture=True):
        out, lse = fia_v2(q, k, v, actual_seq_kvlen=[1024, 500], learnable_sink=sink, **kw)
    previous = None
    for n, s in (([1024, 500], sink), ([300, 1024], sink * 2 + 1), ([0, 77], -sink)):
        g.update(cpu_update_input=[{"actual_seq_kvlen": n, "learnable_sink": s}])
        g.replay()
        ref_out, ref_lse = fia_v2(q, k, v, actual_seq_kvlen=n, learnable_sink=s, **kw)
        assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse), n
        assert previous is None or not torch.equal(out, previous)
        previous = out.clone()
    ref_out, _ = sink_reference(q, k, v, -sink, 0.125, [0, 77], [S, S - 2] if S > 1 else None, causal=S > 1)
    np.testing.assert_allclose(out.double().numpy(), ref_out, rtol=2e-3, atol=2e-3)
    with pytest.raises(npugraph.ArgumentError, match=r"learnable_sink = .*: not updatable \(captured with"):
        g.update(cpu_update_input=[{"learnable_sink": sink.half()}])
    with pytest.raises(npugraph.ArgumentError, match=r"learnable_sink = None: not updatable"):
        g.update(cpu_update_input=[{"learnable_sink": None}])


def test_v2_learnable_sink_errors(qkv):
    q, k, v = qkv
    kw = dict(num_query_heads=2, input_layout="BNSD")
    with pytest.raises(npugraph.ArgumentError, match=r"fused_infer_attention_score: learnable_sink = float32\[3\]: "
                                                     r"must be 1-D \[N\], one value per query head, with N = "
                                                     r"num_heads = 2"):
        fia_v2(q, k, v, learnable_sink=torch.ones(3), **kw)
    with pytest.raises(npugraph.ArgumentError, match=r"learnable_sink = float32\[2, 1\]: must be 1-D \[N\]"):
        fia_v2.out(q, k, v, out=[torch.empty_like(q), torch.empty(1)], learnable_sink=torch.ones(2, 1), **kw)
    with pytest.raises(npugraph.ArgumentError, match=r"learnable_sink = int32\[2\]: dtype must be float32, "
                                                     r"float16 or bfloat16"):
        fia_v2(q, k, v, learnable_sink=torch.ones(2, dtype=torch.int32), **kw)
    with pytest.raises(npugraph.ArgumentError, match=r"learnable_sink = int64\[2\]: dtype must be"):
        get_ws_v2(q, k, v, learnable_sink=torch.ones(2, dtype=torch.int64), **kw)
    with pytest.raises(TypeError, match=r"npu_fused_infer_attention_score\(\) got an unexpected keyword "
                                        r"argument 'learnable_sink'"):
        fia(q, k, v, learnable_sink=torch.ones(2), **OPTS)  # v1 has no sink
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        out, _ = fia_v2(q, k, v, learnable_sink=torch.full((2,), -float("inf"), dtype=dtype), **kw)
        assert torch.equal(out, fia_v2(q, k, v, **kw)[0])  # a -inf sink is no sink


def test_v2_recorded_calls_update_by_v2_names(qkv):
    q, k, v = qkv
    g = npu.NPUGraph()
    with npu.graph(g, auto_dispatch_capture=True):
        out, _ = fia_v2(q, k, v, num_query_heads=2, input_layout="BNSD", actual_seq_kvlen=[32])
    with pytest.raises(TypeError, match=r"cpu_update_input\[0\] got an unexpected keyword argument "
                                        r"'actual_seq_kv_len'"):
        g.update(cpu_update_input=[{"actual_seq_kv_len": [3]}])  # no op's keyword: a typo
    # Another op's keyword is skipped, as torch_npu skips the keys a recorded call lacks.
    g.update(cpu_update_input=[{"actual_seq_lengths_kv": [3], "actual_seq_kvlen": [5], "context_lens": [9]}])
    g.replay()
    assert torch.equal(out, fia(q, k, v, actual_seq_lengths_kv=[5], **OPTS)[0])
    with pytest.raises(npugraph.ArgumentError, match=r"num_query_heads = 1: not updatable"):
        g.update(cpu_update_input=[{"num_query_heads": 1}])
    for n, scale in ((3, 0.5), (32, 0.25), (11, 1.0)):
        g.update(cpu_update_input=[{"actual_seq_kvlen": [n], "softmax_scale": scale}])
        g.replay()
        assert torch.equal(out, fia(q, k, v, actual_seq_lengths_kv=[n], scale=scale, **OPTS)[0])


# --- _npu_paged_attention ---

B, N, KV_N, D, BLOCK, BLOCKS, MAX_BLOCKS = 3, 4, 2, 32, 16, 12, 4


@pytest.fixture
def paged_inputs(rng):
    query = randn((B, N, D), torch.float16, rng)
    key_cache = randn((BLOCKS, BLOCK, KV_N, D), torch.float16, rng)
    value_cache = randn((BLOCKS, BLOCK, KV_N, D), torch.float16, rng)
    block_table = torch.from_numpy(rng.permutation(BLOCKS)[:B * MAX_BLOCKS].reshape(B, MAX_BLOCKS)
                                   .astype(np.int32))
    return query, key_cache, value_cache, block_table


def _paged_reference(query, key_cache, value_cache, block_table, context_lens, scale):
    """Slow and obvious: gather each sequence's tokens block by block, attend in float64."""
    q = query.double().numpy()
    kc, vc = key_cache.double().numpy(), value_cache.double().numpy()
    out = np.zeros(q.shape[:2] + vc.shape[-1:])  # [B, N, Dv]
    for b, length in enumerate(context_lens):
        rows = [block_table[b, t // BLOCK].item() for t in range(length)]
        k = np.stack([kc[rows[t], t % BLOCK] for t in range(length)])  # [L, KV_N, D]
        v = np.stack([vc[rows[t], t % BLOCK] for t in range(length)])
        for h in range(N):
            kv = h // (N // KV_N)
            s = k[:, kv] @ q[b, h] * scale
            p = np.exp(s - s.max())
            out[b, h] = (p / p.sum()) @ v[:, kv]
    return out


def _call(inputs, context_lens, out, workspace=None, scale=0.125):
    query, key_cache, value_cache, block_table = inputs
    return paged(query=query, key_cache=key_cache, value_cache=value_cache, num_kv_heads=KV_N, num_heads=N,
                 scale_value=scale, block_table=block_table, context_lens=context_lens, out=out,
                 workspace=workspace)


def test_paged_attention_against_a_slow_reference(paged_inputs):
    query, key_cache, value_cache, block_table = paged_inputs
    for lens in ([1, 17, 64], [64, 2, 33]):
        out = torch.empty_like(query)
        assert _call(paged_inputs, torch.tensor(lens, dtype=torch.int32), out) is None
        want = _paged_reference(query, key_cache, value_cache, block_table, lens, 0.125)
        np.testing.assert_allclose(out.double().numpy(), want, rtol=2e-3, atol=2e-3)


def test_paged_attention_captured_then_updated_per_step_in_vllm_ascend_order(paged_inputs):
    """vllm-ascend's full-graph decode: the call in a task group with a workspace, an ExternalEvent
    before it; every step replays, then re-issues the call with that step's context_lens on the
    update stream and records the event. Each step equals the eager call bitwise."""
    query, key_cache, value_cache, block_table = paged_inputs
    lens = torch.tensor([16, 16, 16], dtype=torch.int32)
    out = torch.empty_like(query)
    compat.install()
    try:
        ws = paged_ws(query=query, key_cache=key_cache, value_cache=value_cache, num_kv_heads=KV_N,
                      num_heads=N, scale_value=0.125, block_table=block_table, context_lens=lens, out=out)
        g, event, update_stream = npu.NPUGraph(), npu.ExternalEvent(), npu.Stream()
        event.set_wait_deadline(DEADLINE)
        with npu.graph(g):
            s = npu.current_stream()
            event.wait(s)
            event.reset(s)
            npu.graph_task_group_begin(s)
            _call(paged_inputs, lens, out, ws)
            handle = npu.graph_task_group_end(s)
            doubled = out * 2  # a torch op after the attention, captured too
        for step in range(1, 40, 6):
            lens = torch.tensor([step, min(64, step + 20), 64 - step], dtype=torch.int32)
            g.replay()
            with npu.stream(update_stream):
                npu.graph_task_update_begin(update_stream, handle)
                _call(paged_inputs, lens, out, ws)
                npu.graph_task_update_end(update_stream)
                event.record(update_stream)
            expected = torch.empty_like(query)
            _call(paged_inputs, lens, expected)
            assert torch.equal(doubled, expected * 2), step
            assert torch.equal(out, expected), step
    finally:
        compat.uninstall()


def test_paged_attention_errors_name_the_argument(paged_inputs):
    query, key_cache, value_cache, block_table = paged_inputs
    lens = [1, 2, 3]
    out = torch.empty_like(query)
    with pytest.raises(npugraph.ArgumentError, match=r"_npu_paged_attention: query has shape \[3, 128\]: "
                                                     r"must be \[num_tokens, num_heads, head_size\]"):
        _call((query.reshape(B, N * D), key_cache, value_cache, block_table), lens, out)
    with pytest.raises(npugraph.ArgumentError, match=r"num_heads = 4: query has 2 heads"):
        _call((query[:, :2], key_cache, value_cache, block_table), lens, out[:, :2])
    with pytest.raises(npugraph.ArgumentError, match=r"value_cache has shape \[12, 16, 1, 32\]: must be "
                                                     r"key_cache's \[12, 16, 2\] with any head size"):
        _call((query, key_cache, value_cache[:, :, :1], block_table), lens, out)
    with pytest.raises(npugraph.ArgumentError, match=r"block_table has 2 rows for 3 query tokens"):
        _call((query, key_cache, value_cache, block_table[:2]), lens, out)
    with pytest.raises(npugraph.ArgumentError, match=r"out has shape \[3, 4, 16\]: must be \[num_tokens"):
        _call(paged_inputs, lens, out[..., :16])
    with pytest.raises(TypeError, match=r"key_cache must be a tensor, got str"):
        _call((query, "k", value_cache, block_table), lens, out)
    with pytest.raises(npugraph.ArgumentError, match=r"actual_seq_lengths_kv"):  # FIA's own check
        _call(paged_inputs, [1, 2, 65], out)  # past the table's 4 blocks of 16
    _call(paged_inputs, lens, out)  # still usable


# --- softmax_lse without softmax_lse_flag: the .out form sets its first element to 0 ---

@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_out_without_lse_flag_zeroes_the_callers_lse_like_torch_npu(qkv, dtype):
    """torch_npu's tests compare the .out form's softmax_lse with the eager form's zeros([1])."""
    q, k, v = qkv
    out = torch.empty(1, 2, 1, 16, dtype=torch.float16)
    lse = torch.full((1,), 7.0, dtype=dtype)
    fia.out(q, k, v, out=[out, lse], actual_seq_lengths_kv=[32], **OPTS)
    assert lse.item() == 0.0
    lse.fill_(7.0)
    longer = torch.full((3,), 7.0, dtype=dtype)
    g = npu.NPUGraph()
    with npu.graph(g):
        s = npu.current_stream()
        npu.graph_task_group_begin(s)
        fia.out(q, k, v, out=[out, longer], actual_seq_lengths_kv=[32], **OPTS)
        npu.graph_task_group_end(s)
    assert longer.tolist() == [7.0, 7.0, 7.0]  # nothing ran at capture
    g.replay()
    assert longer.tolist() == [0.0, 7.0, 7.0]  # the first element, on every launch
    with pytest.raises(npugraph.ArgumentError, match=r"softmax_lse.*overlap"):
        fia.out(q, k, v, out=[out, out.view(-1)[:1]], actual_seq_lengths_kv=[32], **OPTS)


def test_paged_attention_value_head_size_may_differ_and_auto_dispatch_updates_context_lens(rng):
    """MLA-style caches (value head size 16, key 32), captured with auto_dispatch_capture and
    updated with g.update(cpu_update_input=[{"context_lens": ...}]), as torch_npu's test does."""
    query = randn((B, N, D), torch.float16, rng)
    key_cache = randn((BLOCKS, BLOCK, KV_N, D), torch.float16, rng)
    value_cache = randn((BLOCKS, BLOCK, KV_N, 16), torch.float16, rng)
    block_table = torch.from_numpy(rng.permutation(BLOCKS)[:B * MAX_BLOCKS].reshape(B, MAX_BLOCKS)
                                   .astype(np.int32))
    inputs = (query, key_cache, value_cache, block_table)
    out = torch.zeros(B, N, 16, dtype=torch.float16)
    g = npu.NPUGraph()
    with npu.graph(g, auto_dispatch_capture=True):
        _call(inputs, torch.tensor([64, 64, 64], dtype=torch.int32), out)
    for lens in ([5, 64, 31], [1, 2, 3]):
        g.update(cpu_update_input=[{"context_lens": torch.tensor(lens, dtype=torch.int32)}])
        g.replay()
        want = _paged_reference(query, key_cache, value_cache, block_table, lens, 0.125)
        np.testing.assert_allclose(out.double().numpy(), want, rtol=2e-3, atol=2e-3)
        eager = torch.empty_like(out)
        _call(inputs, lens, eager)
        assert torch.equal(out, eager)
    with pytest.raises(npugraph.ArgumentError, match=r"out has shape \[3, 4, 32\]: must be \[num_tokens, "
                                                     r"num_heads, value_cache's head size\] = \[3, 4, 16\]"):
        _call(inputs, [1, 2, 3], torch.empty(B, N, D, dtype=torch.float16))
