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
    with pytest.raises(ValueError, match="recorded no call during its capture"):
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



def test_replay_without_an_update_since_the_capture_or_the_last_replay_raises_at_once(tensors):
    """The recorded calls wait for an update before every replay: without one the replay would block
    until the ExternalEvent deadline; it raises a StateError saying what to call instead."""
    qs, k, v = tensors
    g = npu.NPUGraph()
    outs = capture_calls(g, qs, k, v)
    advice = r"none was made since the capture or the last replay.*g\.update\(cpu_update_input=\[\{\}\]\)"
    # at once: a replay that blocked would end at the wait's deadline with WaitTimeoutError instead
    with pytest.raises(npugraph.StateError, match=advice):
        g.replay()
    g.update(cpu_update_input=[{}])
    g.replay()
    for i in range(3):
        assert torch.equal(outs[i], eager(qs[i], k, v))
    with pytest.raises(npugraph.StateError, match=f"graph {g.id} was captured with auto_dispatch_capture=True"):
        g.replay()
    # A failed update changes nothing: the mark of the last good update is what counts.
    with pytest.raises(ValueError, match=r"actual_seq_lengths_kv\[0\] = 9"):
        g.update(cpu_update_input=[{"actual_seq_lengths_kv": [9]}])
    with pytest.raises(npugraph.StateError, match=advice):
        g.replay()
    g.update(cpu_update_input=[{"actual_seq_lengths_kv": [4]}])
    with pytest.raises(ValueError, match=r"actual_seq_lengths_kv\[0\] = 9"):
        g.update(cpu_update_input=[{"actual_seq_lengths_kv": [9]}])
    g.replay()
    for i in range(3):
        assert torch.equal(outs[i], eager(qs[i], k, v, actual_seq_lengths_kv=[4]))


def test_auto_dispatch_graph_without_recorded_calls_replays_without_update():
    g = npu.NPUGraph()
    with npu.graph(g, auto_dispatch_capture=True):
        out = npugraph.zeros(4)
    out[:] = 1
    g.replay()
    g.replay()
    assert (out == 0).all()


@pytest.mark.parametrize("key,value,captured", [
    ("num_heads", 2, "4"),
    ("input_layout", "BSND", "'BNSD'"),
    ("num_key_value_heads", 2, "0"),
    ("sparse_mode", 2, "0"),
    ("inner_precise", 1, "0"),
    ("block_size", 16, "0"),
    ("softmax_lse_flag", True, "False"),
    ("antiquant_mode", 1, "0"),
    ("key_antiquant_mode", 1, "0"),
    ("value_antiquant_mode", 1, "0"),
])
def test_update_of_a_non_updatable_argument_says_not_updatable(tensors, key, value, captured):
    qs, k, v = tensors
    g = npu.NPUGraph()
    outs = capture_calls(g, qs, k, v)
    with pytest.raises(npugraph.ArgumentError,
                       match=rf"cpu_update_input\[1\]: {key} = {value!r}: not updatable \(captured with "
                             rf"{captured}\)\. An update may change actual_seq_lengths, actual_seq_lengths_kv"):
        g.update(cpu_update_input=[{}, {key: value}, {}])
    g.update(cpu_update_input=[{key: value for key, value in OPTS.items()}])  # the same values: fine
    g.replay()
    for i in range(3):
        assert torch.equal(outs[i], eager(qs[i], k, v))


def test_update_of_a_tensor_argument_keeps_its_shape_and_dtype(tensors):
    qs, k, v = tensors
    g = npu.NPUGraph()
    capture_calls(g, qs, k, v)
    mask = torch.zeros(1, 1, 8, dtype=torch.bool)
    with pytest.raises(npugraph.ArgumentError, match=r"cpu_update_input\[0\]: atten_mask = tensor\(.*: not "
                                                     r"updatable \(captured with None\)"):
        g.update(cpu_update_input=[{"atten_mask": mask}])
    with pytest.raises(TypeError, match=r"cpu_update_input\[0\] got an unexpected keyword argument 'key'"):
        g.update(cpu_update_input=[{"key": k}])  # query, key and value are the recorded ones


def test_update_with_the_same_shape_points_a_tensor_at_other_memory(rng):
    """block_table may point at another table of the same shape and dtype (paged KV)."""
    N, D, bs = 2, 16, 16
    q = randn((1, N, 1, D), torch.float16, rng)
    pages_k = randn((3, N, bs, D), torch.float16, rng)
    pages_v = randn((3, N, bs, D), torch.float16, rng)
    opts = dict(num_heads=N, input_layout="BNSD", actual_seq_lengths_kv=[20], block_size=bs)
    table = torch.tensor([[0, 1]], dtype=torch.int32)
    g = npu.NPUGraph()
    with npu.graph(g, auto_dispatch_capture=True):
        out, _ = fia(q, pages_k, pages_v, block_table=table, **opts)
    other = torch.tensor([[2, 0]], dtype=torch.int32)
    g.update(cpu_update_input=[{"block_table": other}])
    g.replay()
    assert torch.equal(out, fia(q, pages_k, pages_v, block_table=other, **opts)[0])
    with pytest.raises(npugraph.ArgumentError, match=r"block_table = .*not updatable \(captured with int32\[1, 2\]\)"):
        g.update(cpu_update_input=[{"block_table": torch.tensor([[2, 0, 1]], dtype=torch.int32)}])


def test_a_lengths_update_after_a_tensor_update_keeps_the_new_tensor(rng):
    """An update that sets host values only re-issues a recorded call from its captured call (no
    tensor compared: Note [FIA host-value update]) only while its tensors are the captured ones:
    once an update pointed block_table elsewhere, later updates of the lengths alone keep the new
    table, and a refused update changes neither."""
    N, D, bs = 2, 16, 16
    q = randn((1, N, 1, D), torch.float16, rng)
    pages_k = randn((3, N, bs, D), torch.float16, rng)
    pages_v = randn((3, N, bs, D), torch.float16, rng)
    opts = dict(num_heads=N, input_layout="BNSD", block_size=bs)
    table = torch.tensor([[0, 1]], dtype=torch.int32)
    other = torch.tensor([[2, 0]], dtype=torch.int32)
    g = npu.NPUGraph()
    with npu.graph(g, auto_dispatch_capture=True):
        out, _ = fia(q, pages_k, pages_v, block_table=table, actual_seq_lengths_kv=[20], **opts)

    def expect(tbl, length):
        g.replay()
        ref = fia(q, pages_k, pages_v, block_table=tbl, actual_seq_lengths_kv=[length], **opts)[0]
        assert torch.equal(out, ref)

    g.update(cpu_update_input=[{"actual_seq_lengths_kv": [17]}])  # the captured table
    expect(table, 17)
    g.update(cpu_update_input=[{"block_table": other, "actual_seq_lengths_kv": [19]}])
    expect(other, 19)
    for length in (18, 30, 5):
        g.update(cpu_update_input=[{"actual_seq_lengths_kv": [length]}])
        expect(other, length)
    with pytest.raises(npugraph.ArgumentError, match=r"actual_seq_lengths_kv\[0\] = 40"):
        g.update(cpu_update_input=[{"actual_seq_lengths_kv": [40]}])  # past the table's 2 blocks
    g.update(cpu_update_input=[{}])
    expect(other, 5)
