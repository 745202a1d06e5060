"""npu_fused_infer_attention_score from Python: numpy and torch, dtypes, .out, workspace, update."""
import numpy as np
import pytest
import torch

import npugraph
from npugraph import npu
from conftest import randn

fia = npugraph.npu_fused_infer_attention_score
get_ws = npugraph._npu_fused_infer_attention_score_get_max_workspace


def reference_bnsd(q, k, v, scale, kv_len=None):
    """Plain numpy attention for BNSD with equal heads (float64)."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    if kv_len is not None:
        k, v = k[:, :, :kv_len], v[:, :, :kv_len]
    s = np.einsum("bnqd,bnkd->bnqk", q, k) * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bnqk,bnkd->bnqd", p, v)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float16, 2e-3), (torch.bfloat16, 2e-2)])
def test_torch_inputs_match_reference(dtype, tol, rng):
    q, k, v = (randn(s, dtype, rng) for s in [(2, 4, 3, 16), (2, 4, 10, 16), (2, 4, 10, 16)])
    out, lse = fia(q, k, v, num_heads=4, input_layout="BNSD", scale=0.25, softmax_lse_flag=True)
    assert isinstance(out, torch.Tensor) and out.dtype == dtype and out.shape == q.shape
    assert lse.dtype == torch.float32 and tuple(lse.shape) == (2, 4, 3, 1)
    ref = reference_bnsd(q.float().numpy(), k.float().numpy(), v.float().numpy(), 0.25)
    np.testing.assert_allclose(out.float().numpy(), ref, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_numpy_inputs_give_numpy_outputs(dtype, rng):
    q = randn((1, 1, 2, 8), dtype, rng, "numpy")
    k = randn((1, 5, 2, 8), dtype, rng, "numpy")  # BSND: B, S, N, D
    v = randn((1, 5, 2, 8), dtype, rng, "numpy")
    out, lse = fia(q, k, v, num_heads=2, input_layout="BSND", actual_seq_lengths_kv=[3])
    assert isinstance(out, np.ndarray) and out.dtype == dtype
    ref = reference_bnsd(q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3), 1.0, kv_len=3)
    np.testing.assert_allclose(out.astype(np.float64), ref.transpose(0, 2, 1, 3), atol=2e-3)
    assert lse.shape == (1,)


def test_inputs_are_not_copied(rng):
    q = randn((1, 1, 1, 4), np.float32, rng, "numpy")
    k = randn((1, 1, 1, 4), np.float32, rng, "numpy")
    v = np.zeros((1, 1, 1, 4), np.float32)
    ws = get_ws(q, k, v, input_layout="BNSD")
    out = np.empty_like(q)
    lse = np.empty(1, np.float32)
    fia.out(q, k, v, workspace=ws, out=[out, lse], input_layout="BNSD")
    assert (out == 0).all()
    v[:] = 1.0  # the op reads the caller's memory, not a copy
    fia.out(q, k, v, workspace=ws, out=[out, lse], input_layout="BNSD")
    assert (out == 1).all()


def test_argument_errors_are_value_errors_with_the_message(rng):
    q = randn((1, 2, 1, 8), torch.float16, rng)
    with pytest.raises(ValueError, match="num_heads = 3"):
        fia(q, q, q, num_heads=3, input_layout="BNSD")
    with pytest.raises(ValueError, match="input_layout"):
        fia(q, q, q, num_heads=2, input_layout="XYZ")
    with pytest.raises(TypeError, match="unexpected keyword argument 'nm_heads'"):
        fia(q, q, q, nm_heads=2)
    with pytest.raises(TypeError, match="query: expected a numpy array or a torch tensor"):
        fia([1, 2], q, q)
    with pytest.raises(ValueError, match="requires grad"):
        fia(torch.zeros(1, 2, 1, 8, requires_grad=True), q, q, num_heads=2, input_layout="BNSD")


def capture_decode(q, k, v, lengths, **kw):
    """Captures one FIA .out in a task group behind an ExternalEvent, as the seed example does."""
    g = npu.NPUGraph()
    event = npu.ExternalEvent()
    opts = dict(num_heads=q.shape[1], input_layout="BNSD", actual_seq_lengths_kv=lengths, **kw)
    with npu.graph(g):
        stream = npu.current_stream()
        ws = get_ws(q, k, v, **opts)
        out = npugraph.empty(*q.shape, dtype=q.dtype)
        lse = npugraph.empty(1, dtype=torch.float32)
        event.wait(stream)
        npu.graph_task_group_begin(stream)
        fia.out(q, k, v, workspace=ws, out=[out, lse], **opts)
        handle = npu.graph_task_group_end(stream)
    return g, event, handle, ws, out, lse, opts


def test_update_errors_surface_as_exceptions_with_messages(rng):
    q, k, v = randn((1, 2, 1, 16), torch.float16, rng), randn((1, 2, 64, 16), torch.float16, rng), \
        randn((1, 2, 64, 16), torch.float16, rng)
    g, event, handle, ws, out, lse, opts = capture_decode(q, k, v, [10])
    upd = npu.Stream()
    with npu.stream(upd):
        npu.graph_task_update_begin(upd, handle)
        with pytest.raises(npugraph.StateError, match="already updating"):
            npu.graph_task_update_begin(upd, handle)
        with pytest.raises(npugraph.StateError, match="not updating"):
            npu.graph_task_update_end(upd)
        npu.graph_task_update_begin(upd, handle)
        with pytest.raises(npugraph.StateError, match="0 of 1 tasks updated"):
            npu.graph_task_update_end(upd)
        npu.graph_task_update_begin(upd, handle)
        fia.out(q, k, v, workspace=ws, out=[out, lse], **opts)
        with pytest.raises(npugraph.StateError, match="one more than the 1 task"):
            fia.out(q, k, v, workspace=ws, out=[out, lse], **opts)
        with pytest.raises(npugraph.StateError, match="is capturing"):
            cap = npu.NPUGraph()
            with npu.graph(cap):
                npu.graph_task_update_begin(npu.current_stream(), handle)
    # The graph still replays with its captured parameters.
    expected, _ = fia(q, k, v, **opts)
    event.record(upd)
    g.replay()
    assert torch.equal(out, expected)


def test_thousand_update_replay_cycles_match_eager(rng):
    S = 64
    q, k, v = randn((1, 4, 1, 32), torch.bfloat16, rng), randn((1, 4, S, 32), torch.bfloat16, rng), \
        randn((1, 4, S, 32), torch.bfloat16, rng)
    g, event, handle, ws, out, lse, opts = capture_decode(q, k, v, [S], scale=0.2)
    expected = {}
    upd = npu.Stream()
    for cycle in range(1000):
        n = (cycle * 37) % (S + 1)
        opts["actual_seq_lengths_kv"] = [n]
        if n not in expected:
            expected[n] = fia(q, k, v, **opts)[0]
        with npu.stream(upd):
            npu.graph_task_update_begin(upd, handle)
            fia.out(q, k, v, workspace=ws, out=[out, lse], **opts)
            npu.graph_task_update_end(upd)
            event.record(upd)
        g.replay()
        assert torch.equal(out, expected[n]), cycle


def test_an_argument_error_while_updating_abandons_the_update(rng):
    q, k, v = randn((1, 2, 1, 16), torch.float16, rng), randn((1, 2, 32, 16), torch.float16, rng), \
        randn((1, 2, 32, 16), torch.float16, rng)
    g, event, handle, ws, out, lse, opts = capture_decode(q, k, v, [8])
    upd = npu.Stream()
    with npu.stream(upd):
        npu.graph_task_update_begin(upd, handle)
        with pytest.raises(ValueError, match="actual_seq_lengths_kv"):
            fia.out(q, k, v, workspace=ws, out=[out, lse], **dict(opts, actual_seq_lengths_kv=[99]))
        npu.graph_task_update_begin(upd, handle)  # the failed update left update mode: free again
        fia.out(q, k, v, workspace=ws, out=[out, lse], **dict(opts, actual_seq_lengths_kv=[5]))
        npu.graph_task_update_end(upd)
        event.record(upd)
    g.replay()
    assert torch.equal(out, fia(q, k, v, **dict(opts, actual_seq_lengths_kv=[5]))[0])


def test_tensor_keywords_reach_the_op(rng):
    """Paged KV (block_table + block_size) gives what the contiguous cache gives; an atten_mask
    masks; so the tensor-valued keywords are passed through, not dropped."""
    B, N, D, S, bs = 1, 2, 16, 32, 16
    q = randn((B, N, 1, D), torch.float16, rng)
    k = randn((B, N, S, D), torch.float16, rng)
    v = randn((B, N, S, D), torch.float16, rng)
    dense, _ = fia(q, k, v, num_heads=N, input_layout="BNSD", actual_seq_lengths_kv=[20])
    # Pages in reverse order: block 1 holds tokens 0..15, block 0 tokens 16..31.
    pages_k = torch.stack([k[0, :, 16:32], k[0, :, 0:16]]).contiguous()  # [blocks, N, bs, D]
    pages_v = torch.stack([v[0, :, 16:32], v[0, :, 0:16]]).contiguous()
    table = torch.tensor([[1, 0]], dtype=torch.int32)
    paged, _ = fia(q, pages_k, pages_v, num_heads=N, input_layout="BNSD", actual_seq_lengths_kv=[20],
                   block_table=table, block_size=bs)
    assert torch.equal(paged, dense)
    with pytest.raises(ValueError, match="block_table"):
        fia(q, pages_k, pages_v, num_heads=N, input_layout="BNSD", actual_seq_lengths_kv=[20],
            block_table=torch.tensor([[1, 7]], dtype=torch.int32), block_size=bs)
    mask = torch.zeros(B, 1, S, dtype=torch.bool)
    mask[..., 10:] = True  # decode mask [B, 1, Skv]: only the first 10 keys stay visible
    masked, _ = fia(q, k, v, num_heads=N, input_layout="BNSD", atten_mask=mask, actual_seq_lengths_kv=[20])
    short, _ = fia(q, k, v, num_heads=N, input_layout="BNSD", actual_seq_lengths_kv=[10])
    assert torch.equal(masked, short)
