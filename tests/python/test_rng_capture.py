"""Random numbers in captured graphs (Note [Random numbers in a graph] in npugraph/_rng.py): replays
draw what the same ops draw eagerly from the same seed, generator calls inside a capture are
recorded, seeds cannot change inside a capture, drawing work runs in host order across streams, and
replays run below autograd. The expectations are eager runs of the same ops from the same seed."""
import threading

import pytest
import torch

import npugraph
from npugraph import npu

SEED_MISMATCH = ("NPUGeneratorImpl::set_current_seed can be called during stream capture only if new seed is "
                 "the same as the original seed.")


def test_replays_draw_what_eager_ops_draw_from_the_same_seed(shim):
    del shim
    torch.npu.manual_seed(7)
    eager = [torch.rand(5), torch.randn(3)]
    eager_next = torch.rand(4)
    g = npu.NPUGraph()
    with npu.graph(g):
        a, b = torch.rand(5), torch.randn(3)
    torch.npu.manual_seed(7)
    g.replay()
    npu.synchronize()
    assert torch.equal(a, eager[0]) and torch.equal(b, eager[1])
    assert torch.equal(torch.rand(4), eager_next)  # the generator moved on as far as eager ops move it
    first = a.clone()
    g.replay()
    npu.synchronize()
    assert not torch.equal(a, first)  # every replay draws new numbers


def test_get_and_set_rng_state_inside_a_capture_rewind_every_replay(shim):
    del shim
    torch.npu.manual_seed(3)
    torch.rand(2)
    state = torch.npu.get_rng_state()
    eager_first = torch.rand(6)
    g = npu.NPUGraph()
    with npu.graph(g):
        saved = torch.npu.get_rng_state()
        first = torch.rand(6)
        torch.npu.set_rng_state(saved)
        second = torch.rand(6)
    for _ in range(3):
        torch.npu.set_rng_state(state)
        g.replay()
        npu.synchronize()
        assert torch.equal(first, second) and torch.equal(first, eager_first)
        assert torch.equal(saved, state)  # the replay filled it with the state it found


def test_reseeding_inside_a_capture_is_refused_with_torch_npus_message(shim):
    del shim
    torch.npu.manual_seed(0)
    other = torch.Generator().manual_seed(1).get_state()
    for call in (lambda: torch.npu.manual_seed(1), lambda: torch.manual_seed(1),
                 lambda: torch.npu.set_rng_state(other)):
        g = npu.NPUGraph()
        with pytest.raises(RuntimeError, match=SEED_MISMATCH.replace(".", r"\.")):
            with npu.graph(g):
                call()
    g = npu.NPUGraph()
    with npu.graph(g):
        torch.npu.manual_seed(0)  # the same seed: nothing to do, as on the device
        x = torch.rand(3)
    torch.npu.manual_seed(0)
    expected = torch.rand(3)
    torch.npu.manual_seed(0)
    g.replay()
    npu.synchronize()
    assert torch.equal(x, expected)
    with pytest.raises(TypeError, match="new_state = list: expected a uint8 tensor"):
        torch.npu.set_rng_state([1, 2])


def test_graphs_on_two_streams_draw_in_the_order_their_replays_were_issued(shim, monkeypatch):
    del shim
    torch.npu.manual_seed(11)
    ref0, ref1 = torch.randn(16), torch.randn(16)
    capture_stream = npu.Stream()
    bufs, graphs = [torch.empty(16), torch.empty(16)], [npu.NPUGraph(), npu.NPUGraph()]
    for buf, g in zip(bufs, graphs):
        with npu.stream(capture_stream):
            g.capture_begin()
            buf.copy_(torch.randn_like(buf))
            g.capture_end()
    npu.current_stream().wait_stream(capture_stream)
    npu.synchronize()
    # the mechanism, seen deterministically: s1 waits for the event recorded after g0 on s0
    recorded, waits = [], []
    real_record, real_wait = npu.Event.record, npu.Stream.wait_event
    monkeypatch.setattr(npu.Event, "record", lambda ev, st=None: (recorded.append((ev, st)), real_record(ev, st))[1])
    monkeypatch.setattr(npu.Stream, "wait_event", lambda st, ev: (waits.append((st, ev)), real_wait(st, ev))[1])
    torch.npu.manual_seed(11)
    s0, s1 = npu.Stream(), npu.Stream()
    gate = threading.Event()
    npu.launch_host_func(s0, lambda _: gate.wait(60))  # s0 is held until both replays are issued
    graphs[0].replay(stream=s0, blocking=False)  # issued first: draws first, though s0 is held
    graphs[1].replay(stream=s1, blocking=False)
    gate.set()
    npu.synchronize()
    assert [st.id for _, st in recorded] == [s0.id, s1.id]
    assert [(st.id, ev) for st, ev in waits] == [(s1.id, recorded[0][0])]
    # the outcome: the draws of eager ops issued in the same order
    assert torch.equal(bufs[0], ref0) and torch.equal(bufs[1], ref1)


def test_checkpointed_dropout_in_a_captured_backward_recomputes_the_same_mask(shim):
    del shim
    import torch.utils.checkpoint as checkpoint

    def fn(x):  # x * x: torch 1.13's checkpoint under any dispatch mode fails on a saved Python scalar
        return torch.nn.functional.dropout(x * x, p=0.5, training=True)

    def step(x):
        out = checkpoint.checkpoint(fn, x, use_reentrant=False, preserve_rng_state=True)
        return torch.autograd.grad(out.sum(), x)[0]

    torch.npu.manual_seed(5)
    eager = step(torch.ones(64, requires_grad=True))
    g = npu.NPUGraph()
    with npu.graph(g):
        graph_grad = step(torch.ones(64, requires_grad=True))
    torch.npu.manual_seed(5)
    g.replay()
    npu.synchronize()
    assert torch.equal(graph_grad, eager)
    assert 0 < int((eager == 0).sum()) < 64  # dropout dropped some, kept some: the mask mattered


def test_register_generator_state_and_npu_generators(shim):
    del shim
    gen = torch.Generator(device="npu")  # a CPU generator under the shim
    assert isinstance(gen, torch.Generator) and gen.device.type == "cpu"
    gen.manual_seed(0)
    g = npu.NPUGraph()
    with torch.inference_mode():
        g.register_generator_state(gen)
    with npu.graph(g):
        out = torch.rand(8, generator=gen)
    expected = torch.rand(8, generator=torch.Generator().manual_seed(0))
    gen.manual_seed(0)
    g.replay()
    npu.synchronize()
    assert torch.equal(out, expected)
    with pytest.raises(TypeError, match="generator = int: expected a torch.Generator"):
        g.register_generator_state(3)


def test_generator_calls_outside_captures_wait_for_issued_draws(shim):
    del shim
    torch.npu.manual_seed(2)
    expected_draw = torch.rand(32)
    expected_state = torch.npu.get_rng_state()
    g = npu.NPUGraph()
    with npu.graph(g):
        out = torch.rand(32)
    s = npu.Stream()
    gate = threading.Event()
    torch.npu.manual_seed(2)
    npu.launch_host_func(s, lambda _: gate.wait(60))
    g.replay(stream=s, blocking=False)
    threading.Thread(target=gate.set).start()  # releases the stream while this thread waits below
    state = torch.npu.get_rng_state()  # waits for the replay's draw, issued before it
    assert torch.equal(state, expected_state) and torch.equal(out, expected_draw)
    assert npugraph.npu.initial_seed() == 2


def _finishes(fn, deadline=60):
    """Runs fn on a thread; True when it returned within the deadline (a hang fails, not blocks)."""
    done = threading.Event()
    errors = []

    def run():
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    finished = done.wait(deadline)
    assert not errors, errors
    return finished


def _drawing_graph():
    g = npu.NPUGraph()
    with npu.graph(g):
        out = torch.rand(4)
    return g, out


def test_generator_calls_from_host_functions_and_blocking_replays_do_not_deadlock(shim):
    del shim
    g, _ = _drawing_graph()
    s = npu.Stream()
    gate = threading.Event()
    seen = []

    def scenario():
        g.replay(stream=s, blocking=False)
        npu.launch_host_func(s, lambda _: (gate.wait(60), seen.append(torch.npu.get_rng_state())))
        threading.Thread(target=gate.set).start()
        g.replay(stream=s, blocking=True)  # waits outside the ordering lock
        npu.launch_host_func(s, lambda _: seen.append(npugraph.npu.initial_seed()))
        g.replay(stream=s, blocking=False)  # drawing work issued after a host function that asks
        npu.synchronize()

    assert _finishes(scenario)
    assert len(seen) == 2


def test_a_wrong_state_or_a_reseed_inside_a_capture_is_refused_when_issued(shim):
    del shim
    g = npu.NPUGraph()
    with pytest.raises(ValueError, match=r"set_rng_state: new_state has 100 bytes: a state from get_rng_state\(\) "
                                         r"has \d+"):
        with npu.graph(g):
            torch.npu.set_rng_state(torch.zeros(100, dtype=torch.uint8))
    with pytest.raises(TypeError, match="new_state = a torch.float32 tensor: expected a uint8 tensor"):
        torch.npu.set_rng_state(torch.zeros(3))
    with pytest.raises(npugraph.StateError, match="seed: a graph cannot reseed the generator"):
        with npu.graph(g):
            torch.seed()


def test_replays_that_draw_keep_blocking_by_default_without_the_shim():
    g, out = _drawing_graph()
    torch.manual_seed(4)
    expected = torch.rand(4)
    torch.manual_seed(4)
    g.replay()  # npugraph's default: returns once the replay ran
    assert torch.equal(out, expected)
