"""torch.compile under the torch_npu shim (Note [torch.compile under the shim] in
npugraph/_torch_capture.py): frames compile while the shim orders eager ops, a compiled call waits
for the current stream's pending work, and inside a capture the function is recorded op by op.
torch >= 2.8 (a dispatch mode that torch.compile compiles under); skipped on torch 1.13."""
import pytest
import torch

import npugraph.compat as compat
from npugraph import npu

pytestmark = pytest.mark.skipif(
    not hasattr(torch, "compile")
    or not hasattr(torch.utils._python_dispatch.TorchDispatchMode, "ignore_compile_internals"),
    reason="torch.compile with ignore_compile_internals needs torch >= 2.8")
DEADLINE = 20.0


@pytest.fixture
def shim():
    torch._dynamo.reset()
    compat.install()
    try:
        yield
    finally:
        compat.uninstall()
        torch._dynamo.reset()


class CountingBackend:
    """A torch.compile backend that counts the FX graphs dynamo hands it and runs each as a
    compiled kernel does (inductor's C++ / Triton code): outside torch's dispatch modes, so the
    shim's mode never sees its ops."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        del example_inputs
        self.graphs += 1

        def kernel(*args):
            with torch.utils._python_dispatch._disable_current_modes():
                return gm.forward(*args)

        return kernel


def scale_shift(x):
    return x * 2 + 1


def test_frames_compile_under_the_shim(shim):
    backend = CountingBackend()
    fn = torch.compile(scale_shift, backend=backend)
    x = torch.arange(6, dtype=torch.float32)
    assert torch.equal(fn(x), x * 2 + 1)
    assert backend.graphs == 1  # dynamo compiled the frame instead of skipping it for the mode


def test_decorator_form_and_modules_compile(shim):
    backend = CountingBackend()

    @torch.compile(backend=backend)
    def f(x):
        return x.sin() + x

    lin = torch.nn.Linear(3, 2)
    model = torch.compile(lin, backend=backend)
    x = torch.ones(4, 3)
    assert torch.equal(f(x), torch.ones(4, 3).sin() + 1)
    assert torch.allclose(model(x), lin(x))
    assert backend.graphs == 2


def test_a_compiled_call_waits_for_the_streams_pending_work(shim):
    """A replay returns once launched; the compiled call must read what it writes."""
    gate = npu.ExternalEvent()
    gate.set_wait_deadline(DEADLINE)
    x = torch.zeros(8)
    g = npu.NPUGraph()
    with npu.graph(g):
        gate.wait(npu.current_stream())
        x.fill_(5.0)
    fn = torch.compile(scale_shift, backend=CountingBackend())
    assert torch.equal(fn(x), torch.ones(8))  # compiled now, not while the replay is pending
    opener = npu.Stream()
    npu._sleep(50_000_000)  # the gate opens ~50 ms from now, from another stream
    g.replay()
    npu._sleep(0)
    with npu.stream(opener):
        npu._sleep(50_000_000)
        gate.record(opener)
    assert torch.equal(fn(x), torch.full((8,), 11.0))  # reads the replay's 5s, not the zeros


def test_a_compiled_call_inside_a_capture_is_recorded_op_by_op(shim):
    backend = CountingBackend()
    fn = torch.compile(scale_shift, backend=backend)
    x = torch.ones(4)
    fn(x)  # compiled once outside the capture
    g = npu.NPUGraph()
    with npu.graph(g):
        y = fn(x)
    x.fill_(3.0)
    g.replay()
    npu.synchronize()
    assert torch.equal(y, torch.full((4,), 7.0))  # computed by the replay, from x's new values
    x.fill_(-1.0)
    g.replay()
    npu.synchronize()
    assert torch.equal(y, torch.full((4,), -1.0))


def test_uninstall_gives_torch_compile_back():
    real = torch.compile
    compat.install()
    try:
        assert torch.compile is not real
    finally:
        compat.uninstall()
    assert torch.compile is real


def test_a_mode_pushed_over_the_shims_survives_a_capture(shim):
    from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode

    class Counting(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops += 1
            return func(*args, **(kwargs or {}))

    x = torch.ones(3)
    with Counting() as counting:
        g = npu.NPUGraph()
        with npu.graph(g):
            y = x + 1
        assert _get_current_dispatch_mode() is counting  # still on top after the capture ended
        x.mul_(2)
    assert counting.ops >= 2
    g.replay()
    npu.synchronize()
    assert torch.equal(y, torch.full((3,), 3.0))
