"""npugraph.npu: streams, events, ExternalEvent, graphs, pools, task groups — names as torch_npu."""
import threading
import time

import numpy as np
import pytest
import torch

import npugraph
from npugraph import npu


def test_module_surface():
    for name in ["NPUGraph", "graph", "graph_pool_handle", "Stream", "current_stream", "stream",
                 "set_device", "synchronize", "Event", "ExternalEvent", "graph_task_group_begin",
                 "graph_task_group_end", "graph_task_update_begin", "graph_task_update_end"]:
        assert hasattr(npu, name), name
    import npugraph.npu as again
    assert again is npu


def test_set_device_and_errors():
    npu.set_device(0)
    npu.set_device("npu:0")
    npu.set_device(torch.device("cpu"))
    with pytest.raises(ValueError, match="device = 3"):
        npu.set_device(3)
    with pytest.raises(ValueError, match="'tpu'"):
        npu.set_device("tpu")


def test_streams_and_stream_context():
    s = npu.Stream()
    assert npu.current_stream() != s
    with npu.stream(s):
        assert npu.current_stream() == s
    assert npu.current_stream() == npu.default_stream()
    s.synchronize()
    assert s.query()
    other = npu.Stream()
    e = npu.Event()
    e.record(s)
    other.wait_event(e)
    other.wait_stream(s)
    other.synchronize()
    npu.synchronize()


def test_event_timing():
    s = npu.Stream()
    a, b = npu.Event(enable_timing=True), npu.Event(enable_timing=True)
    a.record(s)
    b.record(s)
    b.synchronize()
    assert a.query() and b.query()
    assert 0.0 <= a.elapsed_time(b) < 1000.0
    with pytest.raises(ValueError, match="enable_timing"):
        npu.Event().elapsed_time(b)


def test_external_event_wait_blocks_until_record_and_consumes():
    waiter, recorder = npu.Stream(), npu.Stream()
    ev = npu.ExternalEvent()
    ev.wait(waiter)
    time.sleep(0.01)
    assert not waiter.query()
    ev.record(recorder)
    waiter.synchronize()
    assert not ev.is_set()
    ev.record(recorder)
    ev.record(recorder)
    recorder.synchronize()
    assert ev.collapsed_records() == 1
    ev.reset(recorder)
    recorder.synchronize()
    assert not ev.is_set()


def test_stalled_wait_raises_instead_of_hanging():
    s = npu.Stream()
    ev = npu.ExternalEvent("py_never")
    ev.set_wait_deadline(0.02)
    ev.wait(s)
    with pytest.raises(npugraph.WaitTimeoutError, match="'py_never'") as info:
        s.synchronize()
    assert isinstance(info.value, RuntimeError)
    ev.record(npu.Stream())
    s.synchronize()


def test_graph_capture_replay_pool_and_reset():
    x = np.arange(4, dtype=np.float32)
    g = npu.NPUGraph()
    pool = npu.graph_pool_handle()
    with npu.graph(g, pool=pool):
        out = npugraph.zeros(4, dtype=np.float32)
    assert g.pool() == pool
    assert g.num_tasks == 1
    out[:] = 5
    g.replay()
    assert (out == 0).all()
    path = "/tmp/npugraph_py_dump.dot"
    g.debug_dump(path)
    assert "digraph" in open(path).read()
    g.reset()
    with pytest.raises(npugraph.StateError, match="has not been captured"):
        g.replay()
    del x


def test_capture_begin_end_and_modes():
    g = npu.NPUGraph()
    s = npu.Stream()
    with npu.stream(s):
        g.capture_begin(capture_error_mode="relaxed")
        g.capture_end()
    with pytest.raises(ValueError, match="'strict'"):
        npu.NPUGraph().capture_begin(capture_error_mode="strict")
    with pytest.raises(npugraph.StateError, match="default stream"):
        npu.NPUGraph().capture_begin()


def test_global_mode_capture_rejects_synchronize_from_another_thread():
    g = npu.NPUGraph()
    errors = []
    with pytest.raises(npugraph.StateError, match="invalidated"):
        with npu.graph(g):
            t = threading.Thread(target=lambda: errors.append(_try_sync()))
            t.start()
            t.join()
    assert errors and "global mode" in errors[0]


def _try_sync():
    try:
        npu.synchronize()
    except npugraph.StateError as e:
        return str(e)
    return ""


def test_graph_context_abandons_on_exception():
    g = npu.NPUGraph()
    with pytest.raises(KeyError):
        with npu.graph(g):
            raise KeyError("boom")
    with npu.graph(g):
        pass
    g.replay()


def test_empty_and_zeros_kinds_and_memory_stats():
    a = npugraph.empty(2, 3, dtype=np.float16)
    assert isinstance(a, np.ndarray) and a.shape == (2, 3) and a.dtype == np.float16
    b = npugraph.zeros((4,), dtype=torch.bfloat16)
    assert isinstance(b, torch.Tensor) and b.dtype == torch.bfloat16 and (b == 0).all()
    c = npugraph.empty([5])
    assert c.dtype == np.float32
    m = npugraph.zeros(3, dtype=torch.bool)
    assert m.dtype == torch.bool and not m.any()
    stats = npugraph.memory_stats()
    assert stats["allocated_bytes"] > 0
    with pytest.raises(ValueError, match="dtype"):
        npugraph.empty(2, dtype="complex64")
