"""Torch ops issued inside a capture become tasks of the graph.

Note [Torch ops in a capture]
torch_npu (like torch.cuda) captures every op issued on the capturing stream, not only NPU custom
ops: a decode step is torch ops (matmul, add, copy, index_select, ``out[:n] = attn[:n]``) around
the attention call. npugraph does the same on the CPU. While a capture runs on a thread
(``with npugraph.npu.graph(g):``, ``g.capture_begin()`` ... ``g.capture_end()``, or
``make_graphed_callables``), a ``TorchDispatchMode`` sees that thread's torch ops (no other
thread's) and, when the thread's current stream is capturing, records each one as a host task of
the graph on that stream — in stream order with npugraph's own tasks (FIA, events, copies). Nothing
runs at capture time:

- an op that writes its arguments (``x.add_(1)``, ``copy_``, ``out=`` forms) is recorded as it was
  called; it returns the argument it will write;
- a functional op (``a + b``, ``mm``, ``index_select``) gets its outputs allocated now from the
  graph's pool (shapes, strides and dtypes from the op's meta kernel) and is recorded as its
  ``.out`` overload writing them; every replay rewrites the same tensors in place, which are
  uninitialised until the first replay, as in torch.cuda.graphs. An op without an ``.out`` overload
  is replayed functionally and its results copied into the captured outputs. An op without a meta
  kernel has its shapes found by running it once at capture, its result discarded;
- an op that writes an argument and also returns new tensors (``rrelu_with_noise`` writes its
  ``noise`` and returns its result) is recorded as it was called: every replay writes the same
  arguments again and its new results are copied into outputs allocated now from the pool;
- a view (``x[0]``, ``x.view(...)``, ``x.t()``) or an allocation (``torch.empty``) computes
  nothing: it runs now, and aliases memory every replay writes or reads;
- an op whose host value depends on sizes only (``is_same_size``) runs now;
- a profiler annotation (the ``profiler`` namespace: ``record_function``'s enter and exit, which
  torch.optim's ``step`` issues) is host work with no device counterpart: it runs now, at capture,
  as it does on the device, and is not recorded;
- an op whose output shape or value depends on the data (``nonzero``, ``masked_select``,
  ``.item()``, ``torch.equal``) — anything returning a host value instead of tensors — cannot be
  replayed: it raises ``npugraph.StateError`` naming the op, before anything is recorded. The
  capture stays valid, as torch_npu's does when it rejects a stream synchronization (a program that
  catches the error goes on capturing; one that lets it leave ``with npu.graph(g):`` abandons it).

A replay calls each recorded op on the thread that runs the graph's task, holding the GIL (Note
[Python callables on stream workers] in python/src/host_func.cpp). Consecutive ops of one stream
with nothing else recorded on it between them (``Stream.capture_mark()`` unchanged) share one task:
one executor task and one GIL acquisition for the run, not per op (a host task costs several
microseconds, more than a small op). Ops drawing random numbers
(``rand``, ``dropout``) draw new ones on every replay, in host order (Note [Random numbers in a
graph] in npugraph/_rng.py); replays run below autograd (grad mode off). The tensors a recorded op
reads stay alive as long as the graph does.

Note [A backward inside a capture]
On the npu device (Note [The npu device]) torch runs a backward pass on its autograd thread for the
device, not on the thread that called ``backward()``; on the device the engine sets that thread's
stream to the one the forward ran on, so a backward called inside a capture is captured. torch's
Python device guard cannot carry npugraph's streams, so the capture does it: torch hands its
autograd threads the caller's dispatch modes, so an op reaching a capturing thread's mode from
another thread is that thread's backward, and it is recorded on the capturing stream (the stream is
made current on the autograd thread for the op, so its outputs also come from the graph's pool).
Generator calls made by that backward (``get_rng_state`` / ``set_rng_state`` of activation
checkpointing's recompute) are recorded on the capturing stream too (``served_capture_stream``).
Python threads never see another thread's mode. (On the CPU, without the device, the backward runs
on the calling thread and is captured as any op.)

Note [Eager torch ops in stream order]
On the device, a torch op on npu tensors is queued on the current stream behind the work already
there (a replay launched with blocking=False, say), and only a host read (``.item()``,
``torch.equal``, ``print``) waits for it. Under the torch_npu shim (``npugraph.compat.install()``)
the installing thread's torch ops behave so: while its current stream has pending work, an op is
queued on it as a task exactly as it would be recorded into a capture (outputs allocated now,
written when the stream reaches it; views and allocations run now), and an op that returns a host
value first synchronizes the stream. With nothing pending, an op runs at once (the same result,
sooner). Other threads' torch ops are not seen (torch's dispatch modes are per thread): they run at
once, so a thread that reads what another thread's stream writes must synchronize that stream first.
Reading a tensor without a torch op (``.numpy()``, the buffer protocol) is not seen either: call
``torch.npu.synchronize()`` first, as on the device before a host copy. The cost: while the shim is installed every torch op of
the installing thread passes through this Python dispatch mode — about 3 µs per op on top of
torch's own (64-float ops: 4.4 µs instead of 1.3 µs on a Zen 5 core), which matters for models of
many small ops and not for large ones.

Note [torch.compile under the shim]
torch.compile (dynamo, torch >= 2.0) refuses to compile any frame while a user dispatch mode is on
the thread's stack ("non-infra torch dispatch mode present") and runs it eagerly instead, unless the
mode says ``ignore_compile_internals()`` (torch >= 2.8: the mode is switched off while dynamo
compiles and on again while the compiled code runs). So the thread's mode has two classes: while it
only orders eager ops (the shim installed, no capture on the thread) it is ``OrderingOps``, which
says so, and torch.compile compiles; while it captures it is ``StreamOps``, which does not, so
dynamo runs the function op by op and every op is recorded (a compiled kernel would run at capture
time and leave the graph without it). torch reads those flags when a mode is entered, so starting
or ending a capture swaps the thread's mode (``_refit``). Compiled kernels do not pass through the
mode, so the shim's ``torch.compile`` wraps what it returns: a call first waits for the current
stream's pending work (a queued replay's outputs are then what the compiled code reads, as on the
device, where the compiled kernels queue behind it), and a call made while the current stream
captures runs the original function, op by op, into the graph. ``Module.compile()`` (in place) is
not wrapped: call it outside captures, after synchronizing.

Note [float16 matrix products on torch 1.13]
torch 1.13 has no float16 matrix product on the CPU (``"addmm_impl_cpu_" not implemented for
'Half'``: mm, addmm, bmm, baddbmm, addbmm, mv, addmv, dot, vdot, and so matmul, linear and einsum);
torch 2.x computes them, accumulating in float32 and rounding each result once to float16. A
torch_npu program multiplies float16 npu tensors (torch_npu's multi-stream graph test does, inside
a capture), and under the shim npu tensors are CPU tensors. So on torch < 2, under the shim, the
installing thread's mode computes these ops, when every tensor argument is float16, as torch 2.x
does: the float16 arguments widened to float32 (exact), the same op in float32, the result rounded
once to float16 (``_HalfAsFloat``) — except ``addbmm``, which torch computes as one ``addmm_`` per
batch into its float16 result, rounding after each; an ``out=`` or in-place form writes the result
into its float16 tensor. Eager calls, calls queued behind pending work and captured calls run the same
function, so a replay is bitwise the eager result (and torch 2.10's, where its float32 sums are
added in the same order: always for sums whose float32 value is exact). The mode is the one the
shim keeps on that thread already (Note [Eager torch ops in stream order]); torch 1.13 has no
torch.compile to disturb. Not covered: other threads (no mode: torch's error), captures without the
shim (eager would fail, so the graph would not match it), torch 1.13's other float16 gaps
(softmax, layer_norm, exp, silu, convolutions ... still torch's error), and torch >= 2 (native).
"""
import functools as _functools
import threading as _threading

from . import _C
from . import _npu_device
from . import _rng

__all__ = ["begin", "end", "order_eager_ops", "compiled_call", "record_drawing_task"]

# Allocation-only ops: their memory comes from the graph's pool, nothing to replay.
_ALLOCATION_OPS = frozenset(
    ["aten.empty.memory_format", "aten.empty_like.default", "aten.empty_strided.default",
     "aten.new_empty.default", "aten.new_empty_strided.default"])
# torch ops that annotate the host timeline for the profiler (torch.autograd.profiler.record_function)
_HOST_ANNOTATIONS = ("profiler.",)
# ops whose host value depends on the tensors' sizes only, which a replay keeps (torch 1.13's
# autograd engine asks is_same_size through the dispatcher while it sums gradients)
_METADATA_OPS = frozenset(["aten.is_same_size.default"])
_out_overloads = {}
_get_ident = _threading.get_ident
_half_ops = {}  # torch < 2 only: float16 matrix-product overload -> its _HalfAsFloat
_HALF_PRODUCTS = ("mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot")


class _HalfAsFloat:
    """A float16 matrix product on torch < 2, computed as torch 2.x computes it (Note [float16 matrix
    products on torch 1.13]); `op` is the functional, ``.out`` or in-place overload it stands for,
    `compute` the functional product of float16 tensors giving float16."""

    __slots__ = ("op", "compute", "kind")

    def __init__(self, op, compute, kind):
        self.op, self.compute, self.kind = op, compute, kind

    def __call__(self, *args, **kwargs):
        out = kwargs.pop("out", None)
        result = self.compute(*args, **kwargs)
        if self.kind == "functional":
            return result
        target = args[0] if self.kind == "inplace" else out
        if target.shape != result.shape:
            target.resize_(result.shape)  # as torch's .out resizes
        return target.copy_(result)

    def __str__(self):
        return f"{self.op} (float16 computed in float32)"


def _rounded_once(functional, torch):
    """functional on float16 tensors: widened to float32 (exact), computed, rounded once."""
    half, single = torch.float16, torch.float32

    def widen(x):
        return x.to(single) if getattr(x, "dtype", None) is half else x

    def compute(*args, **kwargs):
        return functional(*[widen(a) for a in args], **{k: widen(v) for k, v in kwargs.items()}).to(half)

    return compute


def _addbmm_rounded_per_batch(addmm):
    """addbmm as torch's addbmm_impl_ computes it: a copy of self, then one addmm_ per batch (beta on
    the first only), so float16 rounds after each batch."""

    def compute(self, batch1, batch2, *, beta=1, alpha=1):
        result = self.expand(batch1.shape[1], batch2.shape[2]).clone()
        if batch1.shape[0] == 0:
            return result * beta if beta != 0 else result.zero_()
        for i in range(batch1.shape[0]):
            result = addmm(result, batch1[i], batch2[i], beta=beta if i == 0 else 1, alpha=alpha)
        return result

    return compute


def _make_half_ops(torch):
    """The float16 matrix products torch < 2 lacks on the CPU, by overload."""
    aten = torch.ops.aten
    for name in _HALF_PRODUCTS:
        functional = getattr(aten, name).default
        compute = _rounded_once(functional, torch)
        if name == "addbmm":
            compute = _addbmm_rounded_per_batch(_rounded_once(aten.addmm.default, torch))
        _half_ops[functional] = _HalfAsFloat(functional, compute, "functional")
        if "out" in getattr(aten, name).overloads():
            _half_ops[getattr(aten, name).out] = _HalfAsFloat(getattr(aten, name).out, compute, "out")
        inplace = getattr(getattr(aten, name + "_", None), "default", None)
        if inplace is not None:
            _half_ops[inplace] = _HalfAsFloat(inplace, compute, "inplace")


def _all_half(args, kwargs, torch):
    """Whether every tensor argument is float16 (mixed dtypes keep torch's own error)."""
    found = False
    for x in (*args, *kwargs.values()):
        if isinstance(x, torch.Tensor):
            if x.dtype != torch.float16:
                return False
            found = True
    return found
_grad_mode = []  # (torch.is_grad_enabled, torch._C._set_grad_enabled), once torch is seen


def _is_view(func):
    schema = func._schema
    if not schema.returns:
        return False
    return all(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def _refusal(func, torch):
    """Why func cannot be replayed from a capture, or None."""
    tags = getattr(func, "tags", ())
    if torch.Tag.data_dependent_output in tags or torch.Tag.dynamic_output_shape in tags:
        return "its output depends on the tensors' values (a host sync or a data-dependent shape)"
    for r in func._schema.returns:
        t = str(r.type)
        if t not in ("Tensor", "Tensor[]", "List[Tensor]"):
            return f"it returns a host value ({t}) computed from the data, which a replay cannot return"
    return None


def _find_out_overload(func):
    """The overload of func's packet with the same arguments plus one out= tensor per result."""
    if func in _out_overloads:
        return _out_overloads[func]
    found = None
    schema = func._schema
    returns = schema.returns
    if returns and all(str(r.type) == "Tensor" for r in returns):
        want = [(a.name, str(a.type)) for a in schema.arguments]
        packet = func.overloadpacket
        for name in packet.overloads():
            cand = getattr(packet, name)
            outs = [a for a in cand._schema.arguments
                    if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]
            rest = [(a.name, str(a.type)) for a in cand._schema.arguments
                    if not (a.kwarg_only and a.alias_info is not None and a.alias_info.is_write)]
            if len(outs) == len(returns) and rest == want:
                found = (cand, tuple(a.name for a in outs))
                break
    _out_overloads[func] = found
    return found


def _written_args(func, args, kwargs):
    """For an op whose results all alias arguments it writes: those arguments, as it returns them
    (None for an op that returns nothing)."""
    schema = func._schema
    if not schema.returns:
        return None
    by_set = {}
    for i, a in enumerate(schema.arguments):
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        value = args[i] if i < len(args) and not a.kwarg_only else kwargs.get(a.name)
        for s in a.alias_info.before_set:
            by_set[s] = value
    results = []
    for r in schema.returns:
        if r.alias_info is None or not r.alias_info.is_write:
            return None
        sets = list(r.alias_info.before_set)
        if not sets or sets[0] not in by_set:
            return None
        results.append(by_set[sets[0]])
    return results[0] if len(results) == 1 else tuple(results)


def _writes_any(func):
    return any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)


def _to_meta(x, torch):
    if isinstance(x, torch.Tensor):
        return torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device="meta")
    if isinstance(x, (list, tuple)):
        return type(x)(_to_meta(v, torch) for v in x)
    return x


def _storage_extent(size, stride):
    if any(s == 0 for s in size):
        return 0
    return 1 + sum((n - 1) * st for n, st in zip(size, stride))


def _pool_like(meta, torch):
    """A tensor shaped like `meta` whose memory comes from the capturing graph's pool."""
    n = _storage_extent(meta.size(), meta.stride())
    nbytes = n * meta.element_size()
    base = _C.empty(max(nbytes, 1), dtype=torch.uint8)[:nbytes]  # the graph's pool (a capture is running)
    return base.view(meta.dtype).as_strided(meta.size(), meta.stride())


def _shapes(func, args, kwargs, torch):
    """func's results as meta tensors (or real ones for an op without a meta kernel)."""
    margs, mkwargs = _to_meta(args, torch), _to_meta(dict(kwargs), torch)
    names = {a.name for a in func._schema.arguments}
    if "device" in names and not any(isinstance(a, torch.Tensor) for a in args):
        mkwargs["device"] = "meta"  # a factory op (zeros, arange, full)
    try:
        return func(*margs, **mkwargs)
    except (NotImplementedError, RuntimeError):
        return func(*args, **kwargs)  # no meta kernel: learn the shapes from one real run


def _structure(results, fn):
    if isinstance(results, (list, tuple)):
        return type(results)(fn(r) for r in results)
    return fn(results)


def _flat(results):
    return list(results) if isinstance(results, (list, tuple)) else [results]


class _Replay:
    """One recorded torch op, called by its graph task on every replay: func(*args, **kwargs), its
    results copied into `outs` (an op replayed functionally) or not (it writes its arguments)."""

    __slots__ = ("func", "args", "kwargs", "outs", "functional")

    def __init__(self, func, args, kwargs, outs=None, functional=None):
        self.func, self.args, self.kwargs, self.outs = func, args, kwargs, outs
        # an .out overload's functional form (func, kwargs, outs, the outs' layouts), for an .out
        # kernel that resizes its output on the way (mse_loss.out computes the elementwise loss in
        # it): a captured output's memory cannot grow, so the resize is refused (after it changed
        # the output's sizes, which are put back) and the op is replayed functionally from then on
        self.functional = functional

    def __call__(self):
        try:
            results = self.func(*self.args, **self.kwargs)
            if self.outs is not None:
                for dst, src in zip(self.outs, _flat(results)):
                    dst.copy_(src)
        except Exception as e:
            if self.functional is not None and "resiz" in str(e):
                self.func, self.kwargs, self.outs, layouts = self.functional
                self.functional = None
                for out, (size, stride, offset) in zip(self.outs, layouts):
                    out.as_strided_(size, stride, offset)  # the refused resize changed its sizes
                return self()
            raise RuntimeError(f"captured torch op {self.func} failed on replay: "
                               f"{type(e).__name__}: {e}") from None


class _Batch:
    """Consecutive torch ops recorded on one stream with nothing between them: one graph task
    calling each in order, below autograd (grad mode off: Note [Random numbers in a graph])."""

    __slots__ = ("calls",)

    def __init__(self, call):
        self.calls = [call]

    def __call__(self):
        enabled, set_enabled = _grad_mode
        was = enabled()
        set_enabled(False)
        try:
            for call in self.calls:
                call()
        finally:
            set_enabled(was)


class Capture:
    """One capture running on this thread: its graph, the first op it refused, and the task its
    next op may join (while the stream's capture mark is still `batch_mark`)."""

    __slots__ = ("graph_id", "violation", "recorded", "batch", "batch_mark", "draws", "pool", "stream")

    def __init__(self, graph_id, pool=None, stream=None):
        self.graph_id, self.violation, self.recorded = graph_id, None, 0
        self.stream = stream  # the capturing stream (None: begun on another thread)
        self.pool = pool  # the pool handle the capture allocates from (None: the graph's own)
        self.batch, self.batch_mark = None, 0
        self.draws = False  # a recorded task draws random numbers (Note [Random numbers in a graph])


def _make_mode(torch):
    from torch.utils._python_dispatch import TorchDispatchMode

    _route = _C._torch_op_route
    _grad_mode[:] = [torch.is_grad_enabled, torch._C._set_grad_enabled]
    if int(torch.__version__.split(".")[0]) < 2:
        _make_half_ops(torch)
    half_ops = _half_ops
    issued = _rng.issued
    draws = _rng.draws

    def pool_like(meta):
        return _pool_like(meta, torch)

    def plain_like(meta):
        return torch.empty_strided(meta.size(), meta.stride(), dtype=meta.dtype)

    class StreamOps(TorchDispatchMode):
        """This thread's torch ops as stream work: recorded into the graph while the current stream
        captures (Note [Torch ops in a capture]); with `ordering` (the torch_npu shim), queued
        behind the current stream's pending work (Note [Eager torch ops in stream order])."""

        def __init__(self):
            super().__init__()
            self.captures = []
            self.ordering = False
            self.owner = _get_ident()  # the thread whose mode this is

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if self.captures and _get_ident() != self.owner and self.captures[-1].stream is not None:
                # torch's autograd thread running a backward for the capturing thread (Note [A
                # backward inside a capture]): on the capturing stream, as the engine would set it
                stream = self.captures[-1].stream
                before = _C.npu.current_stream()
                _C.npu.set_stream(stream)
                try:
                    return self._dispatch(func, args, kwargs)
                finally:
                    _C.npu.set_stream(before)
            return self._dispatch(func, args, kwargs)

        def _dispatch(self, func, args, kwargs):
            half = half_ops and self.ordering and func in half_ops and _all_half(args, kwargs, torch)
            route = _route(self.ordering)  # one C++ call on the path every op takes
            if route == 0:  # not capturing, nothing pending: run it now
                if half:  # torch < 2 under the shim (Note [float16 matrix products on torch 1.13])
                    return half_ops[func](*args, **kwargs)
                if issued[0] is not None and draws(func, kwargs):
                    _rng.wait_issued()  # after the draws of replays issued before it
                return func(*args, **kwargs)
            stream = _C.npu.current_stream()
            return self._issue(func, args, kwargs, stream, self._capture() if route == 1 else None,
                               half)

        def _capture(self):
            if not self.captures:  # a stream of a capture begun on another thread (joined by an event)
                self.captures.append(Capture("(begun on another thread)"))
            return self.captures[-1]

        def _refuse(self, capture, name, why):
            raise _C.StateError(f"torch op {name} cannot be captured into graph {capture.graph_id}: {why}. "
                                f"Nothing was recorded; issue the op before or after the capture")

        def _issue(self, func, args, kwargs, stream, capture, half=False):
            """Records func as a task on `stream`: a graph task when `capture`, else eager work
            queued behind the stream's pending work; `half`: a float16 matrix product torch < 2
            lacks, recorded as its _HalfAsFloat."""
            name = str(func)
            run = (lambda op: half_ops.get(op, op)) if half else (lambda op: op)
            alloc = pool_like if capture is not None else plain_like
            if _npu_outputs(args, kwargs):  # ops on npu tensors give npu tensors (Note [The npu device])
                host_alloc = alloc

                def alloc(meta):
                    return _npu_device.wrap(host_alloc(meta))
            if name in _ALLOCATION_OPS:
                return _structure(_shapes(func, args, kwargs, torch), alloc)
            if name.startswith(_HOST_ANNOTATIONS) or name in _METADATA_OPS:  # host work, now
                return func(*args, **kwargs)
            if _is_view(func):
                return func(*args, **kwargs)
            why = _refusal(func, torch)
            if why is not None:
                if capture is None:  # a host read: wait for the stream, as the device's would
                    stream.synchronize()
                    return func(*args, **kwargs)
                self._refuse(capture, name, why)
            written = _written_args(func, args, kwargs) if _writes_any(func) else None
            if written is not None:  # in place or out=: replays write the same arguments
                task, result = _Replay(run(func), args, kwargs), written
            elif not func._schema.returns and _writes_any(func):  # returns nothing (_foreach_add_)
                task, result = _Replay(run(func), args, kwargs), None
            elif _writes_any(func):
                if capture is None:
                    stream.synchronize()
                    return func(*args, **kwargs)
                # writes some arguments and returns new tensors (rrelu_with_noise): every replay
                # writes the same arguments and its results are copied into the captured outputs
                result = _structure(_shapes(func, args, kwargs, torch), alloc)
                task = _Replay(run(func), args, kwargs, _flat(result))
            else:
                result = _structure(_shapes(func, args, kwargs, torch), alloc)
                outs = _flat(result)
                overload = _find_out_overload(func)
                if overload is not None:
                    cand, out_names = overload
                    functional = None if draws(func, kwargs) else (
                        run(func), kwargs, outs, [(o.size(), o.stride(), o.storage_offset()) for o in outs])
                    task = _Replay(run(cand), args, dict(kwargs, **dict(zip(out_names, outs))),
                                   functional=functional)
                else:
                    task = _Replay(run(func), args, kwargs, outs)
            try:
                if capture is None:
                    if draws(func, kwargs):
                        _rng.ordered(stream, lambda: _C._launch_callable(stream, _Batch(task)))
                    else:
                        _C._launch_callable(stream, _Batch(task))
                elif capture.batch is not None and capture.batch_mark == stream._capture_mark():
                    capture.batch.calls.append(task)  # nothing recorded on the stream since
                else:
                    batch = _Batch(task)
                    _C._launch_callable(stream, batch)
                    capture.batch, capture.batch_mark = batch, stream._capture_mark()
            except _C.Error as e:
                if capture is not None and capture.violation is None:
                    capture.violation = f"torch op {name}: {e}"
                raise type(e)(f"torch op {name}: {e}") from None
            if capture is not None:
                capture.recorded += 1
                capture.draws = capture.draws or draws(func, kwargs)
            return result

    class OrderingOps(StreamOps):
        """StreamOps while the thread only orders its eager ops (no capture on it): a mode that
        torch.compile compiles under (Note [torch.compile under the shim])."""

        @classmethod
        def ignore_compile_internals(cls):
            return True

    return StreamOps, OrderingOps


def _npu_outputs(args, kwargs):
    """Whether an op's outputs belong on the npu device: npu tensor arguments, or device="npu"."""
    if not _npu_device.enabled():
        return False
    for x in (*args, *kwargs.values()):
        if _npu_device.is_npu_tensor(x):
            return True
        if isinstance(x, (list, tuple)) and any(_npu_device.is_npu_tensor(y) for y in x):
            return True
    device = kwargs.get("device")
    return device is not None and str(device).startswith("npu")


_local = _threading.local()
_mode_classes = None


def _torch():
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "utils") or not hasattr(torch, "Tag"):
        return None
    return torch


def _mode_class_for(mode_state_captures):
    """The mode class a thread needs: StreamOps while it captures, OrderingOps when it only orders."""
    global _mode_classes
    if _mode_classes is None:
        _mode_classes = _make_mode(_torch())
    return _mode_classes[1] if not mode_state_captures else _mode_classes[0]


def _thread_mode(create):
    """This thread's StreamOps mode, pushed on torch's mode stack while it has work to do."""
    mode = getattr(_local, "mode", None)
    if mode is None and create:
        if _torch() is None:
            return None
        mode = _mode_class_for(False)()
        mode.__enter__()
        _local.mode = mode
    return mode


def _refit(mode):
    """Swaps this thread's mode for the class its state needs (Note [torch.compile under the
    shim]): torch reads a mode's class-level flags when the mode is entered, so a thread that starts
    or ends a capture while it orders its eager ops exits one mode and enters the other."""
    if not mode.captures and not mode.ordering:
        _local.mode = None
        mode.__exit__(None, None, None)
        return None
    want = _mode_class_for(bool(mode.captures))
    if type(mode) is want:
        return mode
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    if _get_current_dispatch_mode() is not mode:
        return mode  # a mode pushed after ours is on top: exiting would pop it; keep ours as it is
    fresh = want()
    fresh.captures, fresh.ordering = mode.captures, mode.ordering
    mode.__exit__(None, None, None)
    fresh.__enter__()
    _local.mode = fresh
    return fresh


def begin(graph_id, pool=None):
    """Starts recording this thread's torch ops into graph `graph_id` (allocating from `pool`, or
    the graph's own pool); returns its Capture (None when torch is not imported: then there are no
    torch ops to record)."""
    mode = _thread_mode(True)
    if mode is None:
        return None
    capture = Capture(graph_id, pool, _C.npu.current_stream())
    mode.captures.append(capture)
    _refit(mode)
    return capture


def end(graph_id):
    """Stops recording into graph `graph_id` on this thread; returns its Capture (or None)."""
    mode = _thread_mode(False)
    if mode is None:
        return None
    found = None
    for i in range(len(mode.captures) - 1, -1, -1):
        if mode.captures[i].graph_id == graph_id:
            found = mode.captures.pop(i)
            break
    _refit(mode)
    return found


def current_pool_key():
    """(the key of the pool the capture on this thread allocates from, its graph's id), or None
    when no capture runs here. A pool handle's key is its pool's id: every handle of one pool
    (``g.pool()`` gives a new handle each call) names the same pool."""
    mode = _thread_mode(False)
    if mode is None or not mode.captures:
        return None
    capture = mode.captures[-1]
    if capture.pool is None:
        return ("graph", capture.graph_id), capture.graph_id
    return ("pool", capture.pool.id), capture.graph_id


def _served_mode():
    """The capturing thread's mode when this thread is torch's autograd thread running that
    thread's backward (Note [A backward inside a capture]), else None."""
    if _torch() is None:
        return None
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    mode = _get_current_dispatch_mode()
    if not getattr(mode, "captures", None) or mode.owner == _get_ident() or mode.captures[-1].stream is None:
        return None
    return mode


def served_capture_stream():
    """The stream a backward run here for a capturing thread is captured on, or None: generator
    calls of that backward (activation checkpointing's state restore) are recorded there too."""
    mode = _served_mode()
    return None if mode is None else mode.captures[-1].stream


def record_drawing_task(stream, fn):
    """Records fn() as a task of the capture on `stream` that touches the generator (Note [Random
    numbers in a graph]); the graph's replays then draw in host order."""
    mode = _thread_mode(False) or _served_mode()
    capture = mode.captures[-1] if mode is not None and mode.captures else None
    if capture is None:
        raise _C.StateError("a generator call inside a capture begun on another thread is not "
                            "recorded: call it on the capturing thread")
    _C._launch_callable(stream, fn)
    capture.recorded += 1
    capture.draws = True


def order_eager_ops(enabled):
    """Under the torch_npu shim: this thread's eager torch ops run after its current stream's
    pending work (Note [Eager torch ops in stream order])."""
    mode = _thread_mode(bool(enabled))
    if mode is None:
        return
    mode.ordering = bool(enabled)
    _refit(mode)


def compiled_call(original, compiled):
    """What the shim's torch.compile returns for a function (Note [torch.compile under the shim]):
    `compiled` after the current stream's pending work, or `original` while that stream captures."""

    @_functools.wraps(original)
    def call(*args, **kwargs):
        stream = _C.npu.current_stream()
        if stream.is_capturing():
            return original(*args, **kwargs)
        if not stream.query():
            stream.synchronize()
        return compiled(*args, **kwargs)

    return call
