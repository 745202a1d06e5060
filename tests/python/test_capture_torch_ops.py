"""Torch ops inside `with npugraph.npu.graph(g):` are not captured (they would run once): the capture
raises (global / thread_local) or warns once per op (relaxed), naming the op
(Note [Torch ops inside a capture] in npugraph/_graph.py)."""
import threading
import warnings

import numpy as np
import pytest
import torch

import npugraph
from npugraph import npu
from conftest import randn

fia = npugraph.npu_fused_infer_attention_score
get_ws = npugraph._npu_fused_infer_attention_score_get_max_workspace
NOT_CAPTURED = r"torch op aten\.add_\.Tensor was issued inside the capture of graph \d+: only npugraph " \
               r"operations are captured into the graph"


@pytest.mark.parametrize("mode", ["global", "thread_local"])
def test_torch_op_in_a_capture_raises_and_the_capture_is_abandoned(mode):
    x = torch.zeros(4)
    g = npu.NPUGraph()
    with pytest.raises(npugraph.StateError, match=NOT_CAPTURED + r".*The op did not run"):
        with npu.graph(g, capture_error_mode=mode):
            x.add_(1)
    assert (x == 0).all()  # refused before it ran
    assert g.num_tasks == 0
    x.add_(1)  # outside the capture torch works as usual
    with npu.graph(g):  # the abandoned capture left the graph empty: it captures again
        out = npugraph.zeros(2)
    out[:] = 3
    g.replay()
    assert (out == 0).all()


def test_torch_op_error_caught_inside_the_block_still_discards_the_capture():
    x = torch.zeros(4)
    g = npu.NPUGraph()
    with pytest.raises(npugraph.StateError, match=r"aten\.mul\.Tensor .*the capture was discarded"):
        with npu.graph(g):
            try:
                x * 2
            except npugraph.StateError:
                pass
    with pytest.raises(npugraph.StateError, match="has not been captured"):
        g.replay()


def test_relaxed_mode_warns_once_per_op_and_runs_it():
    x = torch.zeros(4)
    g = npu.NPUGraph()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with npu.graph(g, capture_error_mode="relaxed"):
            x.add_(1)
            x.add_(1)
            x.mul_(3)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 2, messages
    assert "aten.add_.Tensor" in messages[0] and "only npugraph operations are captured" in messages[0]
    assert "aten.mul_.Tensor" in messages[1] and "capture_error_mode='relaxed'" in messages[1]
    assert (x == 6).all()
    g.replay()
    assert (x == 6).all()  # not part of the graph


def test_npugraph_ops_views_and_allocations_are_allowed_in_a_capture(rng):
    q = randn((1, 2, 1, 16), torch.float16, rng)
    kv = randn((1, 2, 32, 16), torch.float16, rng)
    opts = dict(num_heads=2, input_layout="BNSD", actual_seq_lengths_kv=[9])
    expected, _ = fia(q, kv[:, :, :16], kv[:, :, :16], **opts)
    g = npu.NPUGraph()
    event = npu.ExternalEvent()
    with npu.graph(g):
        s = npu.current_stream()
        k = kv[:, :, :16]  # a view: computes nothing, aliases what every replay reads
        v = kv.narrow(2, 0, 16)
        scratch = torch.empty(4)  # an allocation only
        ws = get_ws(q, k, v, **opts)
        out = npugraph.empty(1, 2, 1, 16, dtype=torch.float16)
        lse = npugraph.empty(1, dtype=torch.float32)
        mask = npugraph.zeros(1, 1, 32, dtype=torch.bool)
        event.wait(s)
        npu.graph_task_group_begin(s)
        fia.out(q, k, v, workspace=ws, out=[out, lse], **opts)
        npu.graph_task_group_end(s)
    assert mask.dtype == torch.bool and scratch.shape == (4,)
    event.record(npu.Stream())
    g.replay()
    assert torch.equal(out, expected)


def test_auto_dispatch_capture_with_torch_tensors_is_allowed(rng):
    q = randn((1, 2, 1, 16), torch.float16, rng)
    k = randn((1, 2, 8, 16), torch.float16, rng)
    opts = dict(num_heads=2, input_layout="BNSD", softmax_lse_flag=True)
    g = npu.NPUGraph()
    with npu.graph(g, auto_dispatch_capture=True):
        out, lse = fia(q, k, k, **opts)
    g.update(cpu_update_input=[{"actual_seq_lengths_kv": [5]}])
    g.replay()
    assert torch.equal(out, fia(q, k, k, actual_seq_lengths_kv=[5], **opts)[0])


def test_numpy_capture_and_other_threads_are_not_checked():
    """The check watches the capturing thread's torch ops only; numpy work is not torch."""
    x = torch.zeros(2)
    a = np.zeros(2, np.float32)
    g = npu.NPUGraph()
    with npu.graph(g, capture_error_mode="relaxed"):
        a += 1
        t = threading.Thread(target=lambda: x.add_(1))
        t.start()
        t.join()
    assert (x == 1).all() and (a == 1).all()
