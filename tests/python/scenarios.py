"""Scenarios that crashed the interpreter before their fix, run by conftest.run_isolated in a fresh
process (a regression then fails one test instead of killing the whole run). Each prints
"SCENARIO OK" when every check held."""
import sys
import threading
import time

import numpy as np
import torch

import npugraph
from npugraph import npu

fia = npugraph.npu_fused_infer_attention_score
OPTS = dict(num_heads=4, input_layout="BNSD", scale=0.25, actual_seq_lengths_kv=[8])


def _tensors(n=1, seed=0):
    rng = np.random.default_rng(seed)

    def randn(shape):
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(torch.float16)

    return [randn((1, 4, 1, 16)) for _ in range(n)], randn((1, 4, 8, 16)), randn((1, 4, 8, 16))


def _eager(q, k, v, **kw):
    return fia(q, k, v, **dict(OPTS, **kw))[0].clone()


def _ok():
    print("SCENARIO OK", flush=True)


def refused_capture_begin_inside_auto_dispatch_capture():
    """g.capture_begin() refused inside `with graph(g, auto_dispatch_capture=True)` left the records
    freed under the capture: the next FIA call crashed."""
    (q,), k, v = _tensors()
    g = npu.NPUGraph()
    with npu.graph(g, auto_dispatch_capture=True):
        first, _ = fia(q, k, v, **OPTS)
        try:
            g.capture_begin()
        except npugraph.StateError as e:
            assert "already capturing" in str(e), e
        else:
            raise AssertionError("capture_begin inside a capture of the same stream was accepted")
        second, _ = fia(q, k, v, **OPTS)
    assert g.auto_dispatch_capture and g.num_dispatch_records == 2, g.num_dispatch_records
    g.update(cpu_update_input=[{"actual_seq_lengths_kv": [5]}])
    g.replay()
    expected = _eager(q, k, v, actual_seq_lengths_kv=[5])
    assert torch.equal(first, expected) and torch.equal(second, expected)
    _ok()


def second_thread_enters_the_graph_being_captured():
    """`with graph(g):` on a second thread while the first captures g reset g's records before the
    capture was refused."""
    (q,), k, v = _tensors()
    g = npu.NPUGraph()
    errors = []

    def intruder():
        try:
            with npu.graph(g):
                pass
        except npugraph.StateError as e:
            errors.append(str(e))

    with npu.graph(g, auto_dispatch_capture=True):
        first, _ = fia(q, k, v, **OPTS)
        t = threading.Thread(target=intruder)
        t.start()
        t.join()
        second, _ = fia(q, k, v, **OPTS)
    assert len(errors) == 1 and "already capturing" in errors[0], errors
    assert g.num_dispatch_records == 2
    g.update(cpu_update_input=[{}])
    g.replay()
    expected = _eager(q, k, v)
    assert torch.equal(first, expected) and torch.equal(second, expected)
    _ok()


def reset_from_another_thread_during_auto_dispatch_capture():
    """g.reset() on another thread freed the records an auto-dispatch capture records into."""
    (q,), k, v = _tensors()
    for _ in range(20):
        g = npu.NPUGraph()
        try:
            with npu.graph(g, auto_dispatch_capture=True):
                fia(q, k, v, **OPTS)
                t = threading.Thread(target=g.reset)
                t.start()
                t.join()
                fia(q, k, v, **OPTS)
        except npugraph.StateError as e:
            assert "was reset (g.reset()) during its auto-dispatch capture" in str(e), e
        else:
            raise AssertionError("a call recorded into a graph reset meanwhile was accepted")
        assert g.num_dispatch_records == 0 and not g.auto_dispatch_capture
        with npu.graph(g, auto_dispatch_capture=True):  # the graph captures again
            out, _ = fia(q, k, v, **OPTS)
        g.update(cpu_update_input=[{}])
        g.replay()
        assert torch.equal(out, _eager(q, k, v))
    _ok()


def reset_while_another_thread_updates():
    """g.reset() while g.update() ran on another thread freed the records the update (its rollback)
    was using: 16 recorded calls, 200 repetitions."""
    qs, k, v = _tensors(16)
    allowed = ("was not captured with auto_dispatch_capture=True", "was reset by another thread",
               "another thread is resetting it", "another thread is updating it")
    errors = []
    updates = 0
    for rep in range(200):
        g = npu.NPUGraph()
        with npu.graph(g, auto_dispatch_capture=True):
            for q in qs:
                fia(q, k, v, **OPTS)
        started = threading.Event()

        def updater():
            nonlocal updates
            n = 0
            while True:
                started.set()
                try:
                    # An invalid length in the last call fails the update after every call was
                    # re-issued: the rollback path runs each time.
                    lens = [{"actual_seq_lengths_kv": [n % 8 + 1]}] * 15 + [
                        {"actual_seq_lengths_kv": [9 if n % 2 else 3]}]
                    g.update(cpu_update_input=lens)
                    updates += 1
                except ValueError as e:
                    assert "actual_seq_lengths_kv[0] = 9" in str(e), e
                except npugraph.StateError as e:
                    errors.append(str(e))
                    return
                n += 1

        t = threading.Thread(target=updater)
        t.start()
        started.wait()
        g.reset()
        t.join()
        assert g.num_dispatch_records == 0
    assert errors and all(any(a in e for a in allowed) for e in errors), set(errors)
    print("updates", updates, "errors", len(errors))
    _ok()


def two_threads_update_one_graph():
    """Two threads hammer g.update with different arguments while this one replays: every update
    either wins or gets the StateError that another thread is updating the graph (no torn reads),
    and every replay output is bitwise one of the two eager results."""
    qs, k, v = _tensors(3)
    g = npu.NPUGraph()
    outs = []
    with npu.graph(g, auto_dispatch_capture=True):
        for q in qs:
            outs.append(fia(q, k, v, **OPTS)[0])
    params = [dict(actual_seq_lengths_kv=[3], scale=0.5), dict(actual_seq_lengths_kv=[7], scale=0.125)]
    expected = [[_eager(q, k, v, **p) for q in qs] for p in params]
    errors, wins = [], [0, 0]
    start = threading.Barrier(3)
    sys.setswitchinterval(1e-5)  # interleave the threads between bytecodes, not every 5 ms

    rounds = threading.Barrier(2, timeout=60)

    def hammer(which):
        inputs = [dict(params[which])]
        start.wait()
        for _ in range(400):
            # Both threads start each attempt together, win or lose: with the try-lock, a winner
            # that came straight back would take the lock again before the other thread is
            # scheduled, and on a 2-core machine that can go on for every attempt (seen in CI:
            # wins [0, 60877]); in step, each round is a fresh race.
            rounds.wait()
            try:
                g.update(cpu_update_input=inputs)
                wins[which] += 1
            except Exception as e:  # noqa: BLE001 - every error is checked below
                errors.append(e)

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    start.wait()
    replays = 0
    while any(t.is_alive() for t in threads) or replays == 0:
        try:
            g.replay()
        except npugraph.StateError as e:  # no update since the last replay: try again
            assert "none was made since the capture or the last replay" in str(e), e
            if not any(t.is_alive() for t in threads):
                g.update(cpu_update_input=[{}])
            continue
        replays += 1
        for i, out in enumerate(outs):
            assert any(torch.equal(out, expected[p][i]) for p in range(2)), (replays, i)
    for t in threads:
        t.join()
    contention = [e for e in errors if isinstance(e, npugraph.StateError)
                  and "another thread is updating it" in str(e) and f"graph {g.id}" in str(e)]
    assert len(contention) == len(errors), [repr(e) for e in errors if e not in contention][:5]
    assert wins[0] > 0 and wins[1] > 0 and replays > 0, (wins, replays)
    print("wins", wins, "contention", len(contention), "replays", replays)
    _ok()


def nonblocking_replays_after_updates():
    """update -> replay(blocking=False), 300 times with no synchronize between: each update waits
    for the replay before it (Note [Updates after replays]), so no record collapses into a signal a
    replay has yet to consume, nothing stalls, and the last replay holds the last update's result."""
    qs, k, v = _tensors(3, seed=1)
    g = npu.NPUGraph()
    outs = []
    with npu.graph(g, auto_dispatch_capture=True):
        for q in qs:
            outs.append(fia(q, k, v, **OPTS)[0])
    lengths = [1 + i % 8 for i in range(300)]
    collapsed_before = npu.total_collapsed_records()
    for n in lengths:
        g.update(cpu_update_input=[dict(actual_seq_lengths_kv=[n])])
        g.replay(blocking=False)
    npu.synchronize()
    assert npu.total_collapsed_records() == collapsed_before, npu.total_collapsed_records() - collapsed_before
    for i, out in enumerate(outs):
        want = _eager(qs[i], k, v, actual_seq_lengths_kv=[lengths[-1]])
        assert torch.equal(out, want), i
    _ok()


def stream_dropped_while_python_work_is_queued():
    """Under the shim a temporary side stream gets torch ops queued behind its pending work and is
    dropped at once: its destruction joins a worker that needs the GIL, which the dealloc held (a
    hang before Note [Streams die without the GIL]). Exits through faulthandler if it hangs."""
    import faulthandler

    import npugraph.compat as compat

    faulthandler.dump_traceback_later(60, exit=True)
    compat.install()
    x = torch.ones(4, 4)

    def side_work(side):
        # pending for a while: the ops below queue behind it. A sleep, not a gate: the stream's
        # destructor drains its queue on this thread, and pybind11 runs weakref callbacks only
        # after the destructor, so nothing can open a gate as the stream dies; the result is
        # asserted whatever the timing.
        npu.launch_host_func(side, lambda _: time.sleep(0.05))
        with npu.stream(side):
            b = x / x
            b = b + x
        return b

    b = side_work(npu.Stream())  # the stream object is dropped here, its work still queued
    npu.synchronize()
    assert torch.equal(b, torch.full((4, 4), 2.0)), b
    compat.uninstall()
    faulthandler.cancel_dump_traceback_later()
    _ok()
