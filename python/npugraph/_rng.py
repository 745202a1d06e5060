"""Random numbers in captured graphs and on streams: host order, and the generator calls of a capture.

Note [Random numbers in a graph]
npugraph's device generator is torch's CPU generator (``torch.default_generator``, or the generator
passed to an op): a random op recorded into a graph (``torch.rand``, ``randn_like``, ``dropout``)
draws from it when the replay runs, so every replay draws new numbers, and a replay after
``manual_seed(s)`` draws what the same ops run eagerly after ``manual_seed(s)`` draw — torch_npu's
and torch.cuda's contract (there, a replay reserves its philox offsets when it is launched). Three
rules make that hold when replays are asynchronous:

- **Host order.** Work that draws runs in the order the host issued it, whatever the streams: a
  replay of a graph that draws (and an eager random op queued behind pending work, Note [Eager
  torch ops in stream order]) first waits on its stream for the event recorded after the previous
  drawing work, then records its own. Two graphs replayed on two streams draw as if replayed one
  after the other, in the order of the ``replay()`` calls. A random op run at once, and a host call
  on the generator (``manual_seed``, ``get_rng_state``, ``set_rng_state``, ``seed``,
  ``initial_seed``), first waits for the drawing work already issued — except from a host function
  on a stream worker, which runs in its stream's order already (waiting there could wait for work
  queued behind itself). A blocking replay waits after its launch, outside the ordering lock.
- **Generator calls inside a capture are recorded.** ``get_rng_state()`` during a capture returns a
  uint8 tensor that each replay fills, at that point of the graph, with the generator's state;
  ``set_rng_state(state)`` records a task that restores ``state`` (as each replay finds it) at that
  point. So the rewind of ``get_rng_state`` / ``rand`` / ``set_rng_state`` / ``rand`` gives equal
  draws on every replay, and activation checkpointing with ``preserve_rng_state`` recomputes the
  same dropout masks in a captured backward. A state whose seed differs from the generator's seed,
  and ``manual_seed`` with another seed, are refused during a capture with torch_npu's message (a
  graph cannot reseed; its replays follow the seed set outside); ``manual_seed`` with the same seed
  does nothing, as there.
- **Replays run below autograd.** Autograd's bookkeeping happened when the ops were captured; a
  replay runs them with grad mode off (a captured backward's ``out=`` ops on tensors that require
  grad would be refused otherwise).

The cost: a replay of a graph that draws waits on and records one event more; other graphs and
other ops pay one test of a module-level value.
"""
import threading as _threading

from . import _C

__all__ = ["draws", "issued", "wait_issued", "ordered", "graph_draws", "set_graph_draws",
           "get_state", "set_state", "manual_seed", "check_seed"]

_SEED_MISMATCH = ("NPUGeneratorImpl::set_current_seed can be called during stream capture only if new "
                  "seed is the same as the original seed.")
_lock = _threading.Lock()
issued = [None]  # the event recorded after the last drawing work issued on a stream (None: none pending)
_graphs = set()  # ids of graphs whose replays draw
_tagged = {}


def draws(func, kwargs):
    """Whether torch op `func` draws random numbers (torch's nondeterministic_seeded tag, or a
    generator argument)."""
    known = _tagged.get(func)
    if known is None:
        import torch

        known = torch.Tag.nondeterministic_seeded in getattr(func, "tags", ())
        _tagged[func] = known
    return known or kwargs.get("generator") is not None


def _on_stream_worker():
    """Whether this thread is one torch or npugraph started (a stream worker running a host
    function): Python's threading knows those only as dummy threads."""
    return isinstance(_threading.current_thread(), _threading._DummyThread)


def wait_issued():
    """Waits for the drawing work issued so far (host order). A generator call made by a host
    function on a stream worker does not wait: it runs in its stream's order already, and the
    drawing work it would wait for may be queued behind it."""
    event = issued[0]
    if event is None or _on_stream_worker():
        return
    event.synchronize()
    with _lock:
        if issued[0] is event:
            issued[0] = None


def ordered(stream, launch):
    """Issues drawing work on `stream` by `launch()` (which must not block: a blocking replay waits
    after, outside the lock), after every drawing work issued before it."""
    with _lock:
        previous = issued[0]
        if previous is not None:
            stream.wait_event(previous)
        launch()
        event = _C.npu.Event()
        event.record(stream)
        issued[0] = event


def graph_draws(graph_id):
    return graph_id in _graphs


def set_graph_draws(graph_id, drawing):
    if drawing:
        _graphs.add(graph_id)
    else:
        _graphs.discard(graph_id)


def _capturing():
    """The capturing stream a generator call here acts on: the current stream's, or the one of the
    capture whose backward this thread runs (Note [A backward inside a capture]), or None."""
    stream = _C.npu.current_stream()
    if stream.is_capturing():
        return stream
    from . import _torch_capture

    return _torch_capture.served_capture_stream()


def _seed_of(state):
    """The seed a CPU generator state starts with (its first 8 bytes), read without a torch op (a
    capture would refuse the host read)."""
    raw = state.detach().contiguous().numpy().tobytes()[:8]
    return int.from_bytes(raw, "little") if len(raw) == 8 else None


def get_state(torch):
    """The generator's state: now, or (inside a capture) a tensor each replay fills at this point."""
    stream = _capturing()
    if stream is None:
        wait_issued()
        return torch.default_generator.get_state()
    gen = torch.default_generator
    state = gen.get_state()  # its size and seed; replays write the state they find
    _record(stream, lambda: state.copy_(gen.get_state()))
    return state


def set_state(new_state, torch):
    """Restores a state: now, or (inside a capture) at this point of every replay."""
    if not isinstance(new_state, torch.Tensor) or new_state.dtype != torch.uint8:
        what = f"a {new_state.dtype} tensor" if isinstance(new_state, torch.Tensor) else type(new_state).__name__
        raise TypeError(f"set_rng_state: new_state = {what}: expected a uint8 tensor from get_rng_state()")
    stream = _capturing()
    gen = torch.default_generator
    if stream is None:
        wait_issued()
        gen.set_state(new_state)
        return
    size = gen.get_state().numel()
    if new_state.numel() != size:  # a replay would fail on it: refused now, while capturing
        raise ValueError(f"set_rng_state: new_state has {new_state.numel()} bytes: a state from "
                         f"get_rng_state() has {size}")
    if _seed_of(new_state) != gen.initial_seed():
        raise RuntimeError(_SEED_MISMATCH)
    _record(stream, lambda: gen.set_state(new_state))


def check_seed(seed, torch):
    """Inside a capture: refuses a seed other than the generator's (True: capturing, nothing to do)."""
    if _capturing() is None:
        wait_issued()
        return False
    if int(seed) & 0xFFFFFFFFFFFFFFFF != torch.default_generator.initial_seed():
        raise RuntimeError(_SEED_MISMATCH)
    return True


def manual_seed(seed, torch):
    if not check_seed(seed, torch):
        torch.default_generator.manual_seed(int(seed))


def _record(stream, fn):
    from . import _torch_capture

    _torch_capture.record_drawing_task(stream, fn)
