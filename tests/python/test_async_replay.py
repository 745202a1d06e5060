"""torch_npu's asynchronous semantics under the shim (npugraph.compat): replay() returns once
launched, eager torch ops queue behind the current stream's pending work (Note [Eager torch ops in
stream order]), vllm-ascend's replay-then-update order runs without a timeout, and a replay never
refuses while another thread's update of its graph is in flight (Note [Updates after replays])."""
import sys
import threading

import pytest
import torch

import npugraph
from npugraph import npu
from conftest import randn

fia = npugraph.npu_fused_infer_attention_score
get_ws = npugraph._npu_fused_infer_attention_score_get_max_workspace
DEADLINE = 20.0  # a regression ends in WaitTimeoutError, never a hang


def test_without_the_shim_replay_blocks_by_default():
    x = torch.zeros(3)
    g = npu.NPUGraph()
    with npu.graph(g):
        x.add_(1)
    g.replay()
    assert torch.equal(x, torch.ones(3))  # no torch op ordering needed: the replay has run


def test_under_the_shim_replay_returns_at_once_and_torch_ops_queue_behind_it(shim):
    gate = npu.ExternalEvent()
    gate.set_wait_deadline(DEADLINE)
    x = torch.zeros(4)
    g = npu.NPUGraph()
    with npu.graph(g):
        gate.wait(npu.current_stream())
        x.add_(1)
    g.replay()  # would block until the deadline if replays still blocked: the gate is closed
    y = x * 2  # queued behind the replay on the current stream: returns without waiting
    x.add_(10)  # likewise, after it
    gate.record(npu.Stream())  # only now can the replay (and the ops behind it) run
    assert torch.equal(y, torch.full((4,), 2.0))  # a host read: waits for the stream
    assert torch.equal(x, torch.full((4,), 11.0))
    gate.record(npu.Stream())  # the replay's wait consumed the first record: this one needs its own
    g.replay(blocking=True)  # blocking stays available: back only once the replay has run
    assert torch.equal(x.clone(), torch.full((4,), 12.0))


def test_host_reads_under_the_shim_wait_for_pending_work(shim):
    gate = npu.ExternalEvent()
    gate.set_wait_deadline(DEADLINE)
    x = torch.zeros(2)
    g = npu.NPUGraph()
    with npu.graph(g):
        gate.wait(npu.current_stream())
        x.fill_(3.0)
    g.replay()
    total = x.sum()  # queued
    gate.record(npu.Stream())
    assert total.item() == 6.0  # .item() waits for the stream before reading
    assert x.tolist() == [3.0, 3.0]


def _tiny_attention(rng):
    q = randn((1, 2, 1, 16), torch.float16, rng)
    k = randn((1, 2, 32, 16), torch.float16, rng)
    v = randn((1, 2, 32, 16), torch.float16, rng)
    return q, k, v


def test_vllm_ascend_order_replay_first_then_update_runs_without_timeout(shim, rng):
    """vllm-ascend's default order: replay, then update the attention tasks on the update stream
    and record their events (which release the replay's waits); every step equals eager bitwise."""
    q, k, v = _tiny_attention(rng)
    opts = dict(num_heads=2, input_layout="BNSD")
    g = npu.NPUGraph()
    event = npu.ExternalEvent()
    event.set_wait_deadline(DEADLINE)
    update_stream = npu.Stream()
    with npu.graph(g):
        s = npu.current_stream()
        ws = get_ws(q, k, v, actual_seq_lengths_kv=[32], **opts)
        out = npugraph.empty(1, 2, 1, 16, dtype=torch.float16)
        lse = npugraph.empty(1, dtype=torch.float32)
        event.wait(s)
        event.reset(s)
        npu.graph_task_group_begin(s)
        fia.out(q, k, v, workspace=ws, out=[out, lse], actual_seq_lengths_kv=[1], **opts)
        handle = npu.graph_task_group_end(s)
        result = out.float() * 2  # a torch op after the attention, in the same graph
    for length in (3, 17, 32, 9, 1):
        g.replay()  # returns at once: its wait needs the update below
        with npu.stream(update_stream):
            npu.graph_task_update_begin(update_stream, handle)
            fia.out(q, k, v, workspace=ws, out=[out, lse], actual_seq_lengths_kv=[length], **opts)
            npu.graph_task_update_end(update_stream)
            event.record(update_stream)
        expected = fia(q, k, v, actual_seq_lengths_kv=[length], **opts)[0].float() * 2
        assert torch.equal(result, expected), length


def test_a_replay_waits_for_another_threads_update_in_flight(rng):
    """An updater thread and a replaying thread: replay i starts once update i has begun, so it
    must wait for that update's records instead of being refused for want of one (the issue saw 286
    of 300 replays refused). The switch interval is raised so that the replaying thread cannot take
    the GIL between the updater's signal and its entering g.update."""
    q, k, v = _tiny_attention(rng)
    opts = dict(num_heads=2, input_layout="BNSD")
    g = npu.NPUGraph()
    with npu.graph(g, auto_dispatch_capture=True):
        out, _ = fia(q, k, v, actual_seq_lengths_kv=[32], **opts)
    steps = 60
    begun = [threading.Event() for _ in range(steps)]
    replayed = [threading.Event() for _ in range(steps)]
    errors = []

    def updater():
        try:
            for i in range(steps):
                if i and not replayed[i - 1].wait(DEADLINE):
                    raise TimeoutError(f"replay {i - 1} did not happen")
                begun[i].set()
                g.update(cpu_update_input=[{"actual_seq_lengths_kv": [1 + i % 32]}])
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)
            for e_ in begun:
                e_.set()

    def replayer():
        try:
            for i in range(steps):
                if not begun[i].wait(DEADLINE):
                    raise TimeoutError(f"update {i} did not begin")
                g.replay(blocking=True)
                replayed[i].set()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
            for e_ in replayed:
                e_.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    try:
        threads = [threading.Thread(target=updater), threading.Thread(target=replayer)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(4 * DEADLINE)
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors
    assert torch.equal(out, fia(q, k, v, actual_seq_lengths_kv=[1 + (steps - 1) % 32], **opts)[0])


def test_a_stream_dropped_with_python_work_queued_does_not_hang():
    from conftest import run_isolated

    run_isolated("stream_dropped_while_python_work_is_queued", timeout=120)


class _LengthsThatWaitForAReplay:
    """An update value whose parsing (inside g.update, the update already in flight) lets the
    replaying thread call g.replay first: it says the update is in flight, waits until that thread
    is about to replay, then gives it a moment to enter (widening the window; the result is
    asserted either way)."""

    def __init__(self, lengths, in_flight, about_to_replay):
        self.lengths, self.in_flight, self.about_to_replay = lengths, in_flight, about_to_replay

    def tolist(self):
        import time

        self.in_flight.set()
        if not self.about_to_replay.wait(DEADLINE):
            raise TimeoutError("the replaying thread never came")
        time.sleep(0.02)  # GIL released: the replay is entered while this update is in flight
        return self.lengths


def test_a_replay_entered_during_an_update_waits_for_it(rng):
    q, k, v = _tiny_attention(rng)
    opts = dict(num_heads=2, input_layout="BNSD")
    g = npu.NPUGraph()
    with npu.graph(g, auto_dispatch_capture=True):
        out, _ = fia(q, k, v, actual_seq_lengths_kv=[32], **opts)
    for n in (3, 17):
        in_flight, about_to_replay = threading.Event(), threading.Event()
        errors = []

        def replayer():
            try:
                if not in_flight.wait(DEADLINE):
                    raise TimeoutError("the update never began")
                about_to_replay.set()
                g.replay(blocking=True)
            except BaseException as e:  # noqa: BLE001 - asserted below
                errors.append(e)

        t = threading.Thread(target=replayer)
        t.start()
        lengths = _LengthsThatWaitForAReplay([n], in_flight, about_to_replay)
        g.update(cpu_update_input=[{"actual_seq_lengths_kv": lengths}])
        t.join(DEADLINE)
        assert not t.is_alive() and not errors, errors
        assert torch.equal(out, fia(q, k, v, actual_seq_lengths_kv=[n], **opts)[0])
