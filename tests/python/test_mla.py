"""npu_multi_head_latent_attention (torch_npu.atb; MLA decode over a paged latent cache): against
a float64 reference written here, bitwise FIA's paged rope form, captured and updated through
auto_dispatch_capture (key context_lens) and through a task group, and its errors."""
import numpy as np
import pytest
import torch

import npugraph
import npugraph.compat as compat
from npugraph import npu

mla = npugraph.npu_multi_head_latent_attention


def make(rng, t=3, n=8, kv_n=1, dn=64, dr=16, block_size=16, max_blocks=4, dtype=torch.float16):
    blocks = t * max_blocks + 2
    def r(*shape):
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(dtype)
    table = torch.from_numpy(rng.permutation(blocks)[: t * max_blocks].reshape(t, max_blocks).astype(np.int32))
    return dict(q_nope=r(t, n, dn), q_rope=r(t, n, dr), ctkv=r(blocks, block_size, kv_n, dn),
                k_rope=r(blocks, block_size, kv_n, dr), block_tables=table)


def reference(a, context_lens, scale):
    """float64: per token and head, softmax over its cached tokens of scale * (nope.ctkv + rope.k_rope)."""
    qn, qr = a["q_nope"].double().numpy(), a["q_rope"].double().numpy()
    c, kr = a["ctkv"].double().numpy(), a["k_rope"].double().numpy()
    table = a["block_tables"].numpy()
    t, n, dn = qn.shape
    kv_n, bs = c.shape[2], c.shape[1]
    out = np.zeros((t, n, dn))
    lse = np.full((t, n), np.inf)
    for i in range(t):
        rows = [(table[i][j // bs], j % bs) for j in range(context_lens[i])]
        for h in range(n):
            g = h // (n // kv_n)
            keys = np.array([c[b, r, g] for b, r in rows])
            ropes = np.array([kr[b, r, g] for b, r in rows])
            s = scale * (keys @ qn[i, h] + ropes @ qr[i, h])
            m = s.max()
            p = np.exp(s - m)
            out[i, h] = (p / p.sum()) @ keys
            lse[i, h] = np.log(p.sum()) + m
    return out, lse


@pytest.mark.parametrize("kv_n,n", [(1, 8), (2, 4)])
def test_matches_a_float64_reference(rng, kv_n, n):
    a = make(rng, n=n, kv_n=kv_n)
    lens = [5, 64, 33]
    out, lse = mla(**a, context_lens=lens, q_headnum=n, qk_scale=0.125, kv_headnum=kv_n, return_lse=True)
    want, want_lse = reference(a, lens, 0.125)
    assert out.shape == (3, n, 64) and out.dtype == torch.float16
    np.testing.assert_allclose(out.double().numpy(), want, atol=2e-3, rtol=2e-3)
    assert lse.shape == (3, n, 1) and lse.dtype == torch.float32
    np.testing.assert_allclose(lse[..., 0].double().numpy(), want_lse, atol=1e-4, rtol=1e-5)


def test_deepseek_sizes(rng):
    a = make(rng, t=2, n=16, dn=512, dr=64, block_size=128, max_blocks=2, dtype=torch.bfloat16)
    lens = [200, 17]
    out = mla(**a, context_lens=lens, q_headnum=16, qk_scale=0.04, kv_headnum=1)
    want, _ = reference(a, lens, 0.04)
    np.testing.assert_allclose(out.double().numpy(), want, atol=2e-2, rtol=2e-2)


def test_is_fias_paged_rope_form_bitwise_and_writes_output(rng):
    a = make(rng)
    lens = [9, 40, 64]
    out = torch.empty(3, 8, 64, dtype=torch.float16)
    assert mla(**a, context_lens=lens, q_headnum=8, qk_scale=0.5, kv_headnum=1, output=out) is out
    cache = a["ctkv"].reshape(a["ctkv"].shape[0], 16, 64)
    fia, _ = npugraph.npu_fused_infer_attention_score(
        a["q_nope"].reshape(3, 1, 8, 64), cache, cache, query_rope=a["q_rope"].reshape(3, 1, 8, 16),
        key_rope=a["k_rope"].reshape(a["k_rope"].shape[0], 16, 16), num_heads=8, num_key_value_heads=1,
        scale=0.5, input_layout="BSND", block_table=a["block_tables"], block_size=16,
        actual_seq_lengths_kv=lens)
    assert torch.equal(out, fia.reshape(3, 8, 64))


def test_captured_and_updated_by_context_lens(rng):
    a = make(rng)
    kw = dict(q_headnum=8, qk_scale=0.25, kv_headnum=1)
    g = npu.NPUGraph()
    with npu.graph(g, auto_dispatch_capture=True):
        out = mla(**a, context_lens=[64, 64, 64], **kw)
    assert g.num_dispatch_records == 1
    for lens in ([1, 2, 3], [64, 17, 40], [30, 30, 30]):
        g.update(cpu_update_input=[{"context_lens": lens}])
        g.replay()
        assert torch.equal(out, mla(**a, context_lens=lens, **kw)), lens


def test_a_task_group_update_changes_its_lengths(rng):
    a = make(rng)
    kw = dict(q_headnum=8, qk_scale=0.25, kv_headnum=1)
    out = torch.empty(3, 8, 64, dtype=torch.float16)
    g = npu.NPUGraph()
    with npu.graph(g):
        s = npu.current_stream()
        npu.graph_task_group_begin(s)
        mla(**a, context_lens=[64, 64, 64], output=out, **kw)
        handle = npu.graph_task_group_end(s)
    update = npu.Stream()
    with npu.stream(update):
        npu.graph_task_update_begin(update, handle)
        mla(**a, context_lens=[7, 8, 9], output=out, **kw)
        npu.graph_task_update_end(update)
    update.synchronize()
    g.replay()
    assert torch.equal(out, mla(**a, context_lens=[7, 8, 9], **kw))


def test_under_the_shim_it_is_torch_npu_atbs():
    compat.install()
    try:
        import torch_npu

        assert torch_npu.atb.npu_multi_head_latent_attention is mla
        from torch_npu.atb import npu_multi_head_latent_attention as again
        assert again is mla
    finally:
        compat.uninstall()


def test_errors_name_the_argument(rng):
    a = make(rng)
    kw = dict(context_lens=[4, 4, 4], q_headnum=8, qk_scale=0.25, kv_headnum=1)
    for name, value in (("mask", torch.zeros(1)), ("qseqlen", [1]), ("qk_descale", torch.ones(1)),
                        ("calc_type", "calc_type_spec"), ("cache_mode", "int8_nzcache")):
        with pytest.raises(npugraph.ArgumentError, match=f"npu_multi_head_latent_attention: {name} = .* "
                                                         f"is not supported by npugraph"):
            mla(**a, **kw, **{name: value})
    with pytest.raises(npugraph.ArgumentError, match="q_headnum = 4: q_nope has 8 heads"):
        mla(**a, **dict(kw, q_headnum=4))
    with pytest.raises(npugraph.ArgumentError, match="kv_headnum = 2: ctkv has 1 KV heads"):
        mla(**a, **dict(kw, kv_headnum=2))
    bad = dict(a, k_rope=a["k_rope"][..., :8])
    with pytest.raises(npugraph.ArgumentError, match=r"k_rope has shape .*: must be"):
        mla(**bad, **kw)
    with pytest.raises(npugraph.ArgumentError, match="block_tables has 2 rows for 3 query tokens"):
        mla(**dict(a, block_tables=a["block_tables"][:2]), **kw)
    with pytest.raises(npugraph.ArgumentError, match=r"output has shape \[3, 8, 32\]"):
        mla(**a, **kw, output=torch.empty(3, 8, 32, dtype=torch.float16))
    with pytest.raises(TypeError, match="return_lse = 1: expected a bool"):
        mla(**a, **kw, return_lse=1)
