"""A real ``npu`` device for torch >= 2.3 under the torch_npu shim (``npugraph.compat.install(
npu_device=True)``, or ``NPUGRAPH_NPU_DEVICE=1`` for ``python -m npugraph.compat``).

Note [The npu device]
PyTorch lets an out-of-tree backend name a device through its PrivateUse1 dispatch key; torch >= 2.8
can do it from Python (``torch.utils.backend_registration._setup_privateuseone_for_python_backend``:
the rename, the ``Tensor.npu()`` / ``is_npu`` / ``Module.npu()`` methods, a device module, a device
guard). torch 2.3-2.7 take the device guard and the accelerator hooks only from C++: there
npugraph compiles them once against the installed torch (Note [The npu device on torch 2.3-2.7] in
npugraph/_npu_device_ext.py), and the rest is the same Python. A tensor on ``npu:0`` is an
``NpuTensor``: a wrapper subclass (``_make_wrapper_subclass``, PyTorch's own
test_privateuseone_python_backend.py pattern) whose device is ``npu:0`` and whose data is a CPU
tensor, ``_npugraph_data`` — npugraph's device is the host. Every op on it passes through
``NpuTensor.__torch_dispatch__``: the arguments are unwrapped, torch's CPU kernel runs, and tensor
results are wrapped again (an op that returns one of its arguments, ``add_`` or ``out=``, returns
that argument's wrapper). Factories (``torch.empty(..., device="npu")`` and everything built on
``empty`` / ``empty_strided``: zeros, rand, arange, full ...) and copies into the device
(``_copy_from``: ``.to("npu")``, ``torch.tensor(..., device="npu")``) are registered for the
PrivateUse1 key. torch routes a few ops of a non-CPU device to kernels that only its CUDA build has:
an LSTM on a device runs ``_thnn_fused_lstm_cell`` (and its backward) instead of the CPU's
unfused cell, so those are computed here from torch's CPU ops as the CUDA kernel
(aten/src/ATen/native/cuda/RNN.cu) computes them (``_DEVICE_ONLY_OPS``). ``.to("cpu")`` / ``.cpu()`` give plain CPU tensors; ``.numpy()`` refuses, as on a
device. npugraph's own ops (FIA, paged attention, the decode ops) read an NpuTensor's host data and
give npu results for npu queries; captures allocate npu outputs for ops on npu tensors.

Cost: the Python dispatch — a 64-float add took 28-30 us on an npu tensor against 4.5 us on a CPU
tensor under the same shim, torch 2.7 and 2.10 alike (2-core Xeon family 6 model 207, a build
beside it; tools/time_npu_add.py, docs/torch_npu.md). Captured ops cost nothing
per op at replay beyond the op itself. The rename is process-wide and cannot be undone: once
enabled, the device stays after ``compat.uninstall()``. torch 1.13 (no renaming) keeps ``npu`` as an
alias of the CPU.

Note [Autograd's npu thread at exit]
Backward over npu tensors runs on torch's autograd thread for the device ("pt_autograd_0"). That
thread drops its last reference to a finished backward (the GraphTask, whose future holds the
gradients: NpuTensors, Python objects) a moment after the caller has its result; the drop takes the
GIL. If the caller reaches interpreter shutdown first, Python ends the thread as it asks for the
GIL, the unwind crosses a noexcept frame in torch, and the process aborts ("terminate called
without an active exception") after a clean run — seen 11 times in 30 on a loaded 2-core machine.
So ``enable`` registers an atexit barrier (``_drain_autograd``): it runs one tiny backward on the
device, drops its gradient, and waits (GIL released, with a deadline) until a weak reference to that
gradient dies. The thread serves its queue in order, so by then it has dropped every earlier
backward too, and it is idle on its queue, where it holds no Python object.
"""
import atexit as _atexit
import time as _time
import weakref as _weakref

from . import _npu_device_ext

__all__ = ["available", "enable", "enabled", "wrap"]  # NpuTensor: made by enable() (_state["cls"])

_state = {"on": False, "cls": None}


def available(torch):
    """Whether this torch can have the device: torch >= 2.8 from Python alone, torch 2.3-2.7 with
    npugraph's C++ device guard (compiled on first use: Note [The npu device on torch 2.3-2.7])."""
    reg = getattr(getattr(torch, "utils", None), "backend_registration", None)
    return refusal(torch.__version__) is None and reg is not None \
        and (_python_route(torch) or _npu_device_ext.needed(torch))


def refusal(version):
    """Why a torch of this version cannot have the device, or None if it can."""
    if _npu_device_ext.version(version) >= (2, 3):
        return None
    if _npu_device_ext.version(version) < (2, 1):
        return (f"torch {version} cannot name a device (PyTorch's PrivateUse1 renaming came with "
                f"torch 2.1; the npu device needs torch >= 2.3)")
    return (f"torch {version} cannot hold the npu device: torch 2.1 and 2.2 run Python-registered "
            f"kernels where they cannot make tensor subclasses; the npu device needs torch >= 2.3")


def _python_route(torch):
    """torch >= 2.8: the device guard and hooks come from Python."""
    reg = getattr(getattr(torch, "utils", None), "backend_registration", None)
    return reg is not None and hasattr(reg, "_setup_privateuseone_for_python_backend") \
        and hasattr(torch._C, "_acc")


def enabled():
    return _state["on"]


def _fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    """aten::_thnn_fused_lstm_cell on host tensors: the gates (input, forget, cell, output, each a
    quarter of dim 1) summed with the biases, activated; returns (hy, cy, workspace), the workspace
    holding the activated gates, as RNN.cu's lstm_cell_forward does."""
    gates = input_gates + hidden_gates
    if input_bias is not None:
        gates = gates + input_bias + hidden_bias
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    hy = o * cy.tanh()
    return hy, cy, _cat((i, f, g, o), 1)


def _fused_lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    """aten::_thnn_fused_lstm_cell_backward_impl on host tensors (RNN.cu's lstm_cell_backward):
    (grad of the pre-activation gates, grad of cx, grad of the bias or None)."""
    if grad_hy is None and grad_cy is None:
        return None, None, None
    i, f, g, o = workspace.chunk(4, 1)
    tanh_cy = cy.tanh()
    grad_hy = grad_hy if grad_hy is not None else cy.new_zeros(())
    grad_c = grad_hy * o * (1 - tanh_cy * tanh_cy)
    if grad_cy is not None:
        grad_c = grad_c + grad_cy
    grad_gates = _cat((grad_c * g * i * (1 - i), grad_c * cx * f * (1 - f),
                       grad_c * i * (1 - g * g), grad_hy * tanh_cy * o * (1 - o)), 1)
    return grad_gates, grad_c * f, grad_gates.sum(0) if has_bias else None


def _cat(tensors, dim):
    import torch

    return torch.cat(tensors, dim)


def _device_only_ops(torch):
    """Ops torch sends a non-CPU device that only its CUDA build implements: overload -> host
    function (a ``.out`` overload writes the function's results into its ``out0``, ``out1`` ...)."""
    table = {}
    for packet, fn in ((torch.ops.aten._thnn_fused_lstm_cell, _fused_lstm_cell),
                       (torch.ops.aten._thnn_fused_lstm_cell_backward_impl, _fused_lstm_cell_backward)):
        table[packet.default] = fn

        def out_form(*args, _fn=fn, **kwargs):
            outs = [kwargs.pop(k) for k in sorted(k for k in list(kwargs) if k.startswith("out"))]
            results = _fn(*args, **kwargs)
            for dst, src in zip(outs, results):
                if dst is not None and src is not None:
                    dst.copy_(src)
            return tuple(outs)

        if "out" in packet.overloads():
            table[packet.out] = out_form
    return table


def _make_class(torch):
    from torch.utils._pytree import tree_map

    npu0 = torch.device("npu", 0)
    to_copy = torch.ops.aten._to_copy.default
    device_only = _device_only_ops(torch)

    class NpuTensor(torch.Tensor):
        """A tensor on npugraph's ``npu:0`` device: its data is the CPU tensor ``_npugraph_data``
        (Note [The npu device] in npugraph/_npu_device.py)."""

        @staticmethod
        def __new__(cls, data):
            r = torch.Tensor._make_wrapper_subclass(
                cls, data.size(), strides=data.stride(), storage_offset=data.storage_offset(),
                dtype=data.dtype, device=npu0, requires_grad=False)
            r._npugraph_data = data
            return r

        def __repr__(self, *, tensor_contents=None):
            del tensor_contents
            text = repr(self._npugraph_data)
            return text[:-1] + ", device='npu:0')" if text.endswith(")") else text

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            seen = {}

            def unwrap(x):
                if isinstance(x, NpuTensor):
                    seen[id(x._npugraph_data)] = x
                    return x._npugraph_data
                if isinstance(x, torch.device) and x.type == "npu":
                    return torch.device("cpu")
                return x

            out = device_only.get(func, func)(*tree_map(unwrap, args), **tree_map(unwrap, kwargs))
            if func is to_copy and kwargs.get("device") is not None \
                    and torch.device(kwargs["device"]).type != "npu":
                return out  # .to("cpu"): leaves the device

            def rewrap(x):
                if isinstance(x, torch.Tensor) and not isinstance(x, NpuTensor):
                    known = seen.get(id(x))
                    return known if known is not None else NpuTensor(x)
                return x

            return tree_map(rewrap, out)

    return NpuTensor


def _device_module(npu_module, torch, to_torch=None):
    """torch.npu for torch's device machinery: npugraph.npu plus what torch asks a backend module
    (autocast queries among them: torch.autocast and checkpointing call them for every device).
    to_torch(enabled, dtype), on torch 2.3, hands the autocast state on to torch's dispatcher."""
    mod = npu_module
    autocast = {"enabled": False, "dtype": torch.float16}

    def set_enabled(enabled):
        autocast["enabled"] = bool(enabled)
        if to_torch is not None:
            to_torch(autocast["enabled"], autocast["dtype"])

    def set_dtype(dtype):
        autocast["dtype"] = dtype
        if to_torch is not None:
            to_torch(autocast["enabled"], autocast["dtype"])

    for name, value in (("is_available", lambda: True), ("current_device", lambda: 0),
                        ("device_count", lambda: 1), ("_is_in_bad_fork", lambda: False),
                        ("is_initialized", lambda: True), ("_lazy_init", lambda: None),
                        ("is_autocast_enabled", lambda: autocast["enabled"]),
                        ("set_autocast_enabled", set_enabled),
                        ("get_autocast_dtype", lambda: autocast["dtype"]),
                        ("set_autocast_dtype", set_dtype),
                        ("get_amp_supported_dtype", lambda: [torch.float16, torch.bfloat16])):
        if not hasattr(mod, name):
            setattr(mod, name, value)
    return mod


def enable(torch, npu_module):
    """Names the ``npu`` device (idempotent). Raises UnsupportedError on a torch that cannot."""
    if _state["on"]:
        return _state["cls"]
    from . import _C

    if not available(torch):
        why = refusal(torch.__version__) or f"torch {torch.__version__} has no PrivateUse1 registration"
        raise _C.UnsupportedError(f"npu_device=True: {why}; without it 'npu' stays an alias of the CPU")
    current = torch._C._get_privateuse1_backend_name()
    if current not in ("privateuseone", "npu"):
        raise _C.UnsupportedError(f"npu_device=True: torch's PrivateUse1 device is already named "
                                  f"'{current}' in this process")
    rename = "npu" if current == "privateuseone" else None
    if _python_route(torch):
        from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

        _setup_privateuseone_for_python_backend(rename, backend_module=_device_module(npu_module, torch))
    else:  # torch 2.3-2.7: the guard and hooks from C++ first (a failed build changes nothing)
        _npu_device_ext.load(torch, _C.UnsupportedError)
        if rename is not None:
            torch.utils.rename_privateuse1_backend(rename)
        torch.utils.generate_methods_for_privateuse1_backend()
        torch._register_device_module("npu", _device_module(npu_module, torch,
                                                             _npu_device_ext.autocast_setter(torch)))
    cls = _make_class(torch)
    lib = torch.library.Library("aten", "IMPL")

    def check(device):
        if device is not None and device.index not in (None, 0):
            raise _C.ArgumentError(f"device = {device}: npugraph has one device, npu:0")

    def empty(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
        del layout, pin_memory
        check(device)
        return cls(torch.empty(size, dtype=dtype, memory_format=memory_format))

    def empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
        del layout, pin_memory
        check(device)
        return cls(torch.empty_strided(size, stride, dtype=dtype))

    def copy_from(self, dst, non_blocking=False):
        del non_blocking
        src = self._npugraph_data if isinstance(self, cls) else self
        target = dst._npugraph_data if isinstance(dst, cls) else dst
        target.copy_(src)
        return dst

    lib.impl("empty.memory_format", empty, "PrivateUse1")
    lib.impl("empty_strided", empty_strided, "PrivateUse1")
    lib.impl("_copy_from", copy_from, "PrivateUse1")
    from . import _autocast

    _autocast.register(torch)  # Note [Autocast on the npu device]
    _state.update(on=True, cls=cls, lib=lib)
    _atexit.register(_drain_autograd, torch)
    return cls


def _drain_autograd(torch, deadline_s=10.0):
    """Note [Autograd's npu thread at exit]: returns once torch's autograd thread for npu has let go
    of every finished backward (True), or after deadline_s (False)."""
    try:
        with torch.enable_grad():
            leaf = _state["cls"](torch.ones(1)).requires_grad_()
            (grad,) = torch.autograd.grad((leaf * 2).sum(), leaf)
    except Exception:  # noqa: BLE001 - at exit, a failed barrier must not hide the program's own end
        return False
    gone = _weakref.ref(grad)
    del grad
    end = _time.monotonic() + deadline_s
    while gone() is not None:
        if _time.monotonic() > end:
            return False
        _time.sleep(0.001)  # lets the autograd thread take the GIL for its last decref
    return True


def wrap(t):
    """A CPU torch tensor as an npu tensor sharing its memory (npugraph's results for npu queries)."""
    return _state["cls"](t)


def is_npu_tensor(x):
    cls = _state["cls"]
    return cls is not None and isinstance(x, cls)
