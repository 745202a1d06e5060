"""npugraph.npu: streams, events, ExternalEvent, graphs, pools, task groups — names as torch_npu."""
import threading

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
    # Blocks: with no record, the wait is still blocked at its deadline, which a synchronize reports
    # naming the event (and then cancels, so the stream goes on).
    ev = npu.ExternalEvent("never_recorded")
    ev.set_wait_deadline(0.05)
    ev.wait(waiter)
    with pytest.raises(npugraph.WaitTimeoutError, match="'never_recorded'"):
        waiter.synchronize()
    waiter.synchronize()
    # Until record: a record releases the wait, which consumes it.
    ev = npu.ExternalEvent()
    ev.wait(waiter)
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


def test_wait_deadline_accepts_large_values_and_rejects_nan_inf_and_negative():
    ev = npu.ExternalEvent("deadline")
    assert ev.wait_deadline == npu.default_external_wait_deadline() == 10.0
    ev.set_wait_deadline(0.25)
    assert ev.wait_deadline == 0.25
    ev.set_wait_deadline(1e10)  # saturates at the documented cap
    assert ev.wait_deadline == npu.MAX_EXTERNAL_WAIT_DEADLINE == 1e8
    ev.set_wait_deadline(0)
    assert ev.wait_deadline == 0.0
    for bad, text in [(float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf"), (-1, "-1"),
                      (-0.5, "-0.5")]:
        with pytest.raises(npugraph.ArgumentError,
                           match=f"ExternalEvent.set_wait_deadline: deadline = {text} s: must be a finite "
                                 f"number of seconds >= 0"):
            ev.set_wait_deadline(bad)
    assert ev.wait_deadline == 0.0  # a refused value changes nothing
    with pytest.raises(TypeError, match="deadline = None: expected a float, got NoneType"):
        ev.set_wait_deadline(None)


def test_default_external_wait_deadline():
    try:
        npu.set_default_external_wait_deadline(2.5)
        assert npu.default_external_wait_deadline() == 2.5
        assert npu.ExternalEvent().wait_deadline == 2.5
        npu.set_default_external_wait_deadline(1e12)
        assert npu.default_external_wait_deadline() == 1e8
        with pytest.raises(npugraph.ArgumentError, match="set_default_external_wait_deadline: deadline = nan s"):
            npu.set_default_external_wait_deadline(float("nan"))
    finally:
        npu.set_default_external_wait_deadline(10)
    assert npu.default_external_wait_deadline() == 10.0


def test_a_huge_deadline_does_not_fire():
    # A deadline that overflowed would fire as the wait starts: the synchronize below would then
    # report a stall and the record would be left unconsumed. The wait starts (right after the host
    # function that announces it) before the record is issued.
    s, ev = npu.Stream(), npu.ExternalEvent("huge")
    ev.set_wait_deadline(1e10)
    reached = threading.Event()
    npu.launch_host_func(s, lambda _: reached.set())
    ev.wait(s)
    assert reached.wait(60)
    ev.record(npu.Stream())
    s.synchronize()
    assert not ev.is_set()


def _seed_group():
    """A captured graph with one task group holding one FIA .out call."""
    g = npu.NPUGraph()
    rng = np.random.default_rng(0)
    q = torch.from_numpy(rng.standard_normal((1, 2, 1, 8)).astype(np.float32)).half()
    opts = dict(num_heads=2, input_layout="BNSD", actual_seq_lengths_kv=[1])
    fia = npugraph.npu_fused_infer_attention_score
    with npu.graph(g):
        s = npu.current_stream()
        ws = npugraph._npu_fused_infer_attention_score_get_max_workspace(q, q, q, **opts)
        out = npugraph.empty(1, 2, 1, 8, dtype=torch.float16)
        lse = npugraph.empty(1, dtype=torch.float32)
        npu.graph_task_group_begin(s)
        fia.out(q, q, q, workspace=ws, out=[out, lse], **opts)
        handle = npu.graph_task_group_end(s)
    return g, handle, (q, ws, out, lse, opts)


def test_graph_task_update_abort_after_an_exception_between_begin_and_end():
    g, handle, (q, ws, out, lse, opts) = _seed_group()
    fia = npugraph.npu_fused_infer_attention_score
    upd = npu.Stream()
    with pytest.raises(KeyError):
        with npu.stream(upd):
            npu.graph_task_update_begin(upd, handle)
            raise KeyError("user code failed mid-update")
    npu.graph_task_update_abort(upd)  # leaves update mode, installs nothing
    with pytest.raises(npugraph.StateError, match=r"graph_task_update_abort: cpu stream \d+ is not updating"):
        npu.graph_task_update_abort(upd)
    with pytest.raises(npugraph.StateError, match="graph_task_update_end: .* is not updating: call "
                                                  "graph_task_update_begin first"):
        npu.graph_task_update_end(upd)
    with npu.stream(upd):  # the handle is free again
        npu.graph_task_update_begin(upd, handle)
        fia.out(q, q, q, workspace=ws, out=[out, lse], **opts)
        npu.graph_task_update_end(upd)
    upd.synchronize()
    g.replay()
    assert torch.equal(out, fia(q, q, q, **opts)[0])


def test_graph_task_update_misuse_messages():
    g, handle, (q, ws, out, lse, opts) = _seed_group()
    upd = npu.Stream()
    npu.graph_task_update_begin(upd, handle)
    with pytest.raises(npugraph.StateError, match="graph_task_update_begin: .* is already updating group 0 of "
                                                  "graph .*updates do not nest"):
        npu.graph_task_update_begin(upd, handle)
    errors = []

    def other_thread():
        try:
            npu.graph_task_update_abort(upd)
        except npugraph.StateError as e:
            errors.append(str(e))

    npu.graph_task_update_begin(upd, handle)
    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert errors and "graph_task_update_abort: " in errors[0] and "being updated by another thread" in errors[0]
    npu.graph_task_update_abort(upd)
    with pytest.raises(npugraph.StateError, match="graph_task_update_end: 0 of 1 tasks updated"):
        npu.graph_task_update_begin(upd, handle)
        npu.graph_task_update_end(upd)
    g.reset()
    with pytest.raises(npugraph.StateError, match="graph_task_update_begin: "):
        npu.graph_task_update_begin(upd, handle)
