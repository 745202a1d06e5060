"""The torch.cuda / torch_npu names of npugraph.npu (memory statistics, device, capture query,
NPUGraph(keep_graph=...), task group handles, make_graphed_callables), checked against what they
must report: byte counts of tensors made here, eager results computed separately."""
import numpy as np
import pytest
import torch

import npugraph
from npugraph import npu

fia = npugraph.npu_fused_infer_attention_score
OPTS = dict(num_heads=2, input_layout="BNSD", scale=0.5)


def qkv(rng, s=8):
    def r(shape):
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(torch.float16)

    return r((1, 2, 1, 16)), r((1, 2, s, 16)), r((1, 2, s, 16))


def test_memory_counters_follow_a_tensor_and_its_peak():
    npu.synchronize()
    before = npu.memory_allocated()
    npu.reset_peak_memory_stats()
    assert npu.max_memory_allocated() == before
    t = npugraph.empty(1 << 20, dtype=np.float32)  # 4 MiB
    assert npu.memory_allocated() - before >= 4 << 20
    assert npu.memory_reserved() >= npu.memory_allocated()
    peak = npu.max_memory_allocated()
    assert peak >= before + (4 << 20)
    del t
    npu.synchronize()
    assert npu.memory_allocated() == before
    assert npu.max_memory_allocated() == peak  # the peak stays until reset
    npu.reset_peak_memory_stats()
    assert npu.max_memory_allocated() == before
    s = npu.memory_stats()
    assert s["allocated_bytes.all.current"] == before and s["allocated_bytes.all.peak"] == before
    assert s["reserved_bytes.all.peak"] >= s["reserved_bytes.all.current"]
    npu.empty_cache()
    assert npu.memory_reserved() <= s["reserved_bytes.all.current"]


def test_device_names_and_the_one_device():
    assert npu.get_device_name().startswith("npugraph cpu (")
    assert npu.get_device_name(0) == npu.get_device_name("npu:0")
    with npu.device(0) as d:
        assert d.idx == 0
    with pytest.raises(npugraph.ArgumentError, match="device = 1: this build has one device"):
        npu.device(1)
    with pytest.raises(npugraph.ArgumentError, match="npu:1"):
        npu.memory_allocated("npu:1")


def test_is_current_stream_capturing():
    assert npu.is_current_stream_capturing() is False
    g = npu.NPUGraph()
    with npu.graph(g):
        assert npu.is_current_stream_capturing() is True
        assert npu.current_stream().is_capturing()
    assert npu.is_current_stream_capturing() is False


def test_keep_graph_and_instantiate(rng):
    q, k, v = qkv(rng)
    g = npu.NPUGraph(keep_graph=True)
    assert g.keep_graph is True and npu.NPUGraph().keep_graph is False
    with pytest.raises(npugraph.StateError, match="has no finished capture to instantiate"):
        g.instantiate()
    with npu.graph(g):
        out = fia(q, k, v, **OPTS)[0]
    g.instantiate()
    g.replay()
    assert torch.equal(out, fia(q, k, v, **OPTS)[0])
    with pytest.raises(TypeError, match="keep_graph"):
        npu.NPUGraph(keep_graph="yes")


def test_task_group_handles_say_what_they_name(rng):
    q, k, v = qkv(rng)
    g = npu.NPUGraph()
    handles = []
    with npu.graph(g):
        s = npu.current_stream()
        for _ in range(2):
            npu.graph_task_group_begin(s)
            fia(q, k, v, **OPTS)
            handles.append(npu.graph_task_group_end(s))
    assert [h.index for h in handles] == [0, 1]
    assert repr(handles[1]) == f"<npugraph task group 1 of graph {g.id}: {handles[1].num_tasks} task(s)>"
    g.reset()
    assert "stale: its graph was reset or destroyed" in repr(handles[0])


def test_make_graphed_callables_replays_with_new_arguments(rng):
    q, k, v = qkv(rng)

    def step(query, key):
        return fia(query, key, v, **OPTS)[0]

    graphed = npu.make_graphed_callables(step, (q.clone(), k.clone()), num_warmup_iters=1)
    for _ in range(3):
        q2, k2, _ = qkv(rng)
        out = graphed(q2, k2)
        assert torch.equal(out, fia(q2, k2, v, **OPTS)[0])
    assert graphed.graph.num_tasks > 0


def test_make_graphed_callables_several_share_a_pool(rng):
    q, k, v = qkv(rng)
    f1 = lambda x: fia(x, k, v, **OPTS)[0]  # noqa: E731
    f2 = lambda x: fia(x, k, v, **dict(OPTS, scale=0.25))[0]  # noqa: E731
    g1, g2 = npu.make_graphed_callables((f1, f2), ((q.clone(),), (q.clone(),)))
    assert g1.graph.pool() == g2.graph.pool()
    q2, _, _ = qkv(rng)
    assert torch.equal(g1(q2), f1(q2)) and torch.equal(g2(q2), f2(q2))


def test_make_graphed_callables_errors(rng):
    q, k, v = qkv(rng)
    graphed = npu.make_graphed_callables(lambda x: fia(x, k, v, **OPTS)[0], (q.clone(),))
    with pytest.raises(npugraph.ArgumentError, match=r"argument 0: got a Tensor of shape \(1, 2, 2, 16\)"):
        graphed(torch.zeros(1, 2, 2, 16, dtype=torch.float16))
    with pytest.raises(TypeError, match="takes 1 argument"):
        graphed(q, q)
    with pytest.raises(npugraph.ArgumentError, match="2 callables but 1 sample_args"):
        npu.make_graphed_callables((lambda x: x, lambda x: x), ((q,),))
    with pytest.raises(TypeError, match="sample_args\\[0\\]\\[0\\] is a int"):
        npu.make_graphed_callables(lambda x: x, (3,))
