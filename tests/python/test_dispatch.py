"""Graph-owned updates (auto_dispatch_capture + NPUGraph.update) and batched / launch-ordered task
updates from Python."""
import numpy as np
import pytest
import torch

import npugraph
from npugraph import npu
from conftest import randn

fia = npugraph.npu_fused_infer_attention_score
get_ws = npugraph._npu_fused_infer_attention_score_get_max_workspace
OPTS = dict(num_heads=4, input_layout="BNSD", scale=0.25, actual_seq_lengths_kv=[8])


def eager(q, k, v, **kw):
    out, _ = fia(q, k, v, **dict(OPTS, **kw))
    return out.clone()


def capture_calls(g, qs, k, v):
    """Captures one FIA call per query with auto_dispatch_capture; returns their outputs."""
    outs = []
    with npu.graph(g, auto_dispatch_capture=True):
        for q in qs:
            out, lse = fia(q, k, v, **OPTS)
            outs.append(out)
    return outs


@pytest.fixture
def tensors(rng):
    qs = [randn((1, 4, 1, 16), torch.float16, rng) for _ in range(3)]
    k = randn((1, 4, 8, 16), torch.float16, rng)
    v = randn((1, 4, 8, 16), torch.float16, rng)
    return qs, k, v


def test_each_recorded_call_gets_its_own_update(tensors):
    qs, k, v = tensors
    g = npu.NPUGraph()
    outs = capture_calls(g, qs, k, v)
    assert g.auto_dispatch_capture and g.num_dispatch_records == 3
    for step in range(3):
        lens = [[(step + i) % 8 + 1] for i in range(3)]
        g.update(cpu_update_input=[{"actual_seq_lengths_kv": lens[i]} for i in range(3)])
        g.replay()
        for i in range(3):
            assert torch.equal(outs[i], eager(qs[i], k, v, actual_seq_lengths_kv=lens[i])), (step, i)


def test_one_dict_updates_every_call_and_arguments_persist(tensors):
    qs, k, v = tensors
    g = npu.NPUGraph()
    outs = capture_calls(g, qs, k, v)
    g.update(cpu_update_input=[{"actual_seq_lengths_kv": [3]}])
    g.replay()
    for i in range(3):
        assert torch.equal(outs[i], eager(qs[i], k, v, actual_seq_lengths_kv=[3]))
    g.update(cpu_update_input=[{"scale": 0.5}])  # the length 3 persists
    g.replay()
    for i in range(3):
        assert torch.equal(outs[i], eager(qs[i], k, v, actual_seq_lengths_kv=[3], scale=0.5))


def test_a_failed_update_installs_nothing_and_keeps_the_recorded_arguments(tensors):
    qs, k, v = tensors
    g = npu.NPUGraph()
    outs = capture_calls(g, qs, k, v)
    g.update(cpu_update_input=[{"actual_seq_lengths_kv": [5]}])
    g.replay()
    bad = [{"scale": 2.0}, {"scale": 2.0, "actual_seq_lengths_kv": [9]}, {"scale": 2.0}]
    with pytest.raises(ValueError, match=r"actual_seq_lengths_kv\[0\] = 9"):
        g.update(cpu_update_input=bad)
    g.update(cpu_update_input=[{}])  # nothing new: the length 5 and scale 0.25 still hold
    g.replay()
    for i in range(3):
        assert torch.equal(outs[i], eager(qs[i], k, v, actual_seq_lengths_kv=[5]))


def test_a_value_that_fails_to_parse_restores_the_calls_parsed_before_it(tensors):
    qs, k, v = tensors
    g = npu.NPUGraph()
    outs = capture_calls(g, qs, k, v)
    bad = [{"scale": 2.0, "actual_seq_lengths_kv": [4]}, {"scale": 2.0}, {"actual_seq_lengths_kv": "x"}]
    with pytest.raises(TypeError, match="actual_seq_lengths_kv: expected a list of ints, got str"):
        g.update(cpu_update_input=bad)
    g.update(cpu_update_input=[{}])  # the recorded arguments are those of the capture
    g.replay()
    for i in range(3):
        assert torch.equal(outs[i], eager(qs[i], k, v))


def test_update_errors_name_the_problem(tensors):
    qs, k, v = tensors
    g = npu.NPUGraph()
    capture_calls(g, qs, k, v)
    with pytest.raises(ValueError, match=r"has 2 dicts: pass one per recorded call \(3\) or one for all"):
        g.update(cpu_update_input=[{}, {}])
    with pytest.raises(TypeError, match=r"cpu_update_input\[1\] got an unexpected keyword argument 'lengths'"):
        g.update(cpu_update_input=[{}, {"lengths": [1]}, {}])
    with pytest.raises(TypeError, match=r"cpu_update_input\[2\] must be a dict"):
        g.update(cpu_update_input=[{}, {}, 7])
    with pytest.raises(TypeError, match=r"actual_seq_lengths_kv\[1\]: expected an int, got float"):
        g.update(cpu_update_input=[{"actual_seq_lengths_kv": [1, 2.5]}])
    with pytest.raises(TypeError, match="must be a list of dicts"):
        g.update(cpu_update_input={"actual_seq_lengths_kv": [1]})

    plain = npu.NPUGraph()
    with npu.graph(plain):
        fia(qs[0], k, v, **OPTS)
    with pytest.raises(RuntimeError, match="not captured with auto_dispatch_capture=True"):
        plain.update(cpu_update_input=[{}])

    empty = npu.NPUGraph()
    with npu.graph(empty, auto_dispatch_capture=True):
        npugraph.zeros(4)
    with pytest.raises(ValueError, match="recorded no fused_infer_attention_score call"):
        empty.update(cpu_update_input=[{}])


def test_reset_forgets_the_records(tensors):
    qs, k, v = tensors
    g = npu.NPUGraph()
    capture_calls(g, qs, k, v)
    g.reset()
    assert not g.auto_dispatch_capture and g.num_dispatch_records == 0
    with pytest.raises(RuntimeError, match="not captured with auto_dispatch_capture=True"):
        g.update(cpu_update_input=[{}])


def manual_graph(qs, k, v):
    """Three FIA calls, each in its own task group (the seed's manual pattern)."""
    g = npu.NPUGraph()
    outs, handles = [], []
    with npu.graph(g):
        s = npu.current_stream()
        ws = get_ws(qs[0], k, v, **OPTS)
        lse = npugraph.empty(1, dtype=torch.float32)
        for q in qs:
            out = npugraph.empty(1, 4, 1, 16, dtype=torch.float16)
            npu.graph_task_group_begin(s)
            fia.out(q, k, v, workspace=ws, out=[out, lse], **OPTS)
            handles.append(npu.graph_task_group_end(s))
            outs.append(out)
    return g, outs, handles, ws, lse


@pytest.mark.parametrize("order", ["stream", "launch"])
def test_batched_update_of_several_groups(tensors, order):
    qs, k, v = tensors
    g, outs, handles, ws, lse = manual_graph(qs, k, v)
    upd = npu.Stream()
    with npu.stream(upd):
        npu.graph_task_update_begin(upd, handles, order=order)
        for i, q in enumerate(qs):
            fia.out(q, k, v, workspace=ws, out=[outs[i], lse], **dict(OPTS, actual_seq_lengths_kv=[i + 2]))
        npu.graph_task_update_end(upd)
    if order == "stream":
        upd.synchronize()
    g.replay()
    for i in range(3):
        assert torch.equal(outs[i], eager(qs[i], k, v, actual_seq_lengths_kv=[i + 2]))


def test_update_begin_argument_errors(tensors):
    qs, k, v = tensors
    g, outs, handles, ws, lse = manual_graph(qs, k, v)
    upd = npu.Stream()
    with pytest.raises(ValueError, match="order = 'later': must be 'stream' or 'launch'"):
        npu.graph_task_update_begin(upd, handles, order="later")
    with pytest.raises(ValueError, match=r"handles\[1\] names group 0 of graph"):
        npu.graph_task_update_begin(upd, [handles[0], handles[0]])
    with pytest.raises(TypeError, match="task group handle or a list"):
        npu.graph_task_update_begin(upd, 3)

