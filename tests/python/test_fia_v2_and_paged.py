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
    with pytest.raises(npugraph.ArgumentError, match=r"npu_fused_infer_attention_score_v2.out: learnable_sink: "
                                                     r"learnable_sink = tensor.*not supported by npugraph"):
        fia_v2.out(q, k, v, out=[torch.empty_like(q), torch.empty(1)], num_query_heads=2,
                   learnable_sink=torch.ones(2))
    with pytest.raises(npugraph.ArgumentError, match=r"query_quant_mode = 1: not supported by npugraph"):
        fia_v2(q, k, v, num_query_heads=2, input_layout="BNSD", query_quant_mode=1)
    assert "actual_seq_kvlen" in npugraph._C._fia_keywords(v2=True)
    assert "actual_seq_kvlen" not in npugraph._C._fia_keywords()


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
