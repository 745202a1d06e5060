"""``npugraph.compat``: run an unmodified torch_npu script on the CPU.

    import npugraph.compat; npugraph.compat.install()    # then: import torch_npu, torch.npu ...
    python -m npugraph.compat script.py [args...]         # the same, around a whole script

``install()`` makes ``import torch_npu`` give a module whose ``npu`` is ``npugraph.npu`` and whose
ops are npugraph's (``npu_fused_infer_attention_score`` and its ``.out``,
``_npu_fused_infer_attention_score_get_max_workspace``, ``npu_rms_norm`` ...); sets ``torch.npu`` to
``npugraph.npu``; makes ``Tensor.npu()`` return the tensor itself (npugraph's device is the CPU, so
the tensor is already where npugraph computes), and lets torch's tensor factories (``torch.empty``,
``zeros``, ``ones``, ``full``, ``rand``, ``randn``, ``randint``, ``arange``, ``tensor``, ``eye``,
``linspace``, ``*_like``), ``Tensor.to`` and ``nn.Module.to`` take ``device="npu"`` / ``"npu:0"`` (as
the CPU), and ``nn.Module.npu()`` returns the module as it is. Other device values pass through to
torch unchanged. ``torch.device("npu")`` / ``torch.device("npu", 0)`` give ``device(type='cpu')``:
torch 1.13 cannot name a new device type, so the name resolves to npugraph's device.
``Tensor.pin_memory()``, ``pin_memory=True`` in torch's factories and ``DataLoader(...,
pin_memory=True)`` give tensors in npugraph's pinned host blocks (Note [Pinned host memory]).
``torch.compile`` (torch >= 2.0) compiles code that runs under the shim; what it returns waits for
the current stream's pending work, and inside a capture runs op by op into the graph (Note
[torch.compile under the shim]). ``uninstall()`` restores torch.
"""
import functools as _functools
import sys as _sys
import types as _types

from . import _torch_capture

__all__ = ["install", "uninstall", "installed"]

_FACTORIES = ("empty", "zeros", "ones", "full", "rand", "randn", "randint", "arange", "tensor",
              "eye", "linspace", "empty_like", "zeros_like", "ones_like", "full_like", "rand_like",
              "randn_like", "randint_like", "as_tensor")
_saved = {}


def installed():
    """True between install() and uninstall()."""
    return bool(_saved)


def _npu_device(device):
    """device="npu" / "npu:N" -> "cpu" (after checking N names npugraph's one device)."""
    if isinstance(device, str) and (device == "npu" or device.startswith("npu:")):
        from . import _C

        _C.npu.set_device(device)  # raises naming the value for npu:1 and up
        return "cpu"
    return device


def _wrap_factory(fn):
    @_functools.wraps(fn)
    def factory(*args, **kwargs):
        if "device" in kwargs:
            kwargs["device"] = _npu_device(kwargs["device"])
        return fn(*args, **kwargs)

    return factory


def _tensor_npu(self, device=None, non_blocking=False, memory_format=None):
    """Tensor.npu(): the tensor itself (npugraph runs on the CPU, where it already is)."""
    del non_blocking, memory_format
    if device is not None:
        from . import _C

        _C.npu.set_device(device)
    return self


def _wrap_to(to):
    @_functools.wraps(to)
    def tensor_to(self, *args, **kwargs):
        if args:
            args = (_npu_device(args[0]),) + tuple(args[1:])
        if "device" in kwargs:
            kwargs["device"] = _npu_device(kwargs["device"])
        return to(self, *args, **kwargs)

    return tensor_to


def _device_class(real):
    """torch.device under the shim: ``torch.device("npu")``, ``("npu:0")``, ``("npu", 0)`` and
    ``(type="npu", index=0)`` give ``device(type='cpu')`` (npugraph's device), any other argument
    torch's own device; ``isinstance(d, torch.device)`` holds for torch's device objects. torch 1.13
    has no device type to name "npu" (its parser knows a fixed list, and renaming
    ``privateuseone`` came with torch 2.0), so the name resolves to the CPU, as ``device="npu"``
    strings do."""

    class _DeviceMeta(type):
        def __instancecheck__(cls, obj):
            return isinstance(obj, real)

        def __subclasscheck__(cls, sub):
            return issubclass(sub, real)

        def __call__(cls, *args, **kwargs):
            kind = args[0] if args else kwargs.get("type")
            if isinstance(kind, str) and (kind == "npu" or kind.startswith("npu:")):
                index = args[1] if len(args) > 1 else kwargs.get("index")
                _npu_device(kind if index is None else f"{kind}:{index}")
                return real("cpu")
            return real(*args, **kwargs)

    return _DeviceMeta("device", (), {"__doc__": _device_class.__doc__, "__module__": "torch"})


def _generator_class(real):
    """torch.Generator under the shim: ``torch.Generator(device="npu")`` (or ``"npu:0"``, or an npu
    ``torch.device``) is a CPU generator, the kind npugraph's device draws from, also with the npu
    device of ``install(npu_device=True)``, for which torch has no generator (a device named from
    Python has no ``PrivateUse1HooksInterface.getNewGenerator``): its ops run torch's CPU kernels,
    which draw from a CPU generator. ``isinstance(g, torch.Generator)`` holds for torch's
    generators."""

    class _GeneratorMeta(type):
        def __instancecheck__(cls, obj):
            return isinstance(obj, real)

        def __subclasscheck__(cls, sub):
            return issubclass(sub, real)

        def __call__(cls, device="cpu"):
            if getattr(device, "type", None) == "npu":  # torch.device("npu:0") of the npu device
                device = str(device)
            return real(device=_npu_device(device) if isinstance(device, str) else device)

    return _GeneratorMeta("Generator", (), {"__doc__": _generator_class.__doc__, "__module__": "torch"})


_RNG_FUNCTIONS = ("get_rng_state", "set_rng_state", "manual_seed", "seed")


def _rng_functions(saved, torch):
    """torch's CPU generator functions under the shim: the device's generator is the CPU one, so
    inside a capture they are recorded as torch.npu's are (Note [Random numbers in a graph] in
    npugraph/_rng.py) — activation checkpointing saves and restores the state through them."""
    from . import _rng

    def get_rng_state():
        return _rng.get_state(torch)

    def set_rng_state(new_state):
        _rng.set_state(new_state, torch)

    def manual_seed(seed):
        if _rng.check_seed(seed, torch):
            return torch.default_generator
        return saved["manual_seed"](seed)

    def seed():
        from . import _npu_api

        _npu_api.seed()  # refuses inside a capture; waits for the draws issued
        return saved["seed"]()

    return {"get_rng_state": get_rng_state, "set_rng_state": set_rng_state, "manual_seed": manual_seed,
            "seed": seed}


def _wrap_compile(real):
    """torch.compile under the shim (Note [torch.compile under the shim] in _torch_capture.py):
    torch's, whose result waits for the current stream's pending work and, called while that
    stream captures, runs the original code op by op into the graph."""

    @_functools.wraps(real)
    def compile(model=None, **kwargs):
        if model is None:  # @torch.compile(mode=...): a decorator
            return lambda m: compile(m, **kwargs)
        import torch

        result = real(model, **kwargs)
        if isinstance(result, torch.nn.Module):  # an OptimizedModule: its forward is the compiled call
            if result is not model:
                result.forward = _torch_capture.compiled_call(model, result.forward)
            return result
        return _torch_capture.compiled_call(model, result)

    return compile


def _module_npu(self, device=None):
    """nn.Module.npu(): the module itself (its parameters are where npugraph computes)."""
    if device is not None:
        from . import _C

        _C.npu.set_device(device)
    return self


_TESTING = ("torch_npu.testing", "torch_npu.testing.testcase", "torch_npu.testing.common_utils")
# torch_npu master's module paths of the graph handler registry and the dump's aligned view
_NPU_SUBMODULES = ("torch_npu.npu._npugraph_handlers", "torch_npu.npu._npugraph_handlers.npugraph_handler",
                   "torch_npu.npu._npugraph_utils", "torch_npu.atb")


def _npu_submodules():
    from . import _npugraph_handlers, _npugraph_utils

    return dict(zip(_NPU_SUBMODULES[:3], (_npugraph_handlers, _npugraph_handlers, _npugraph_utils)))


def _wrap_record_stream(real):
    """Tensor.record_stream under the shim: an npugraph stream keeps the tensor alive until the work
    queued on that stream now has run (torch's contract: its memory is not reused before), by a task
    on the stream that holds it; inside a capture the graph keeps what it reads alive, so nothing is
    queued. Any other stream goes to torch's own."""

    @_functools.wraps(real)
    def record_stream(self, stream):
        from . import _C

        if isinstance(stream, _C.npu.Stream):
            if not stream.is_capturing():
                _C._launch_callable(stream, lambda _held=self: None)
            return None
        return real(self, stream)

    return record_stream


def _wrap_health_check(real):
    """torch.optim.Optimizer._cuda_graph_capture_health_check under the shim: a ``step()`` captured
    on an npu stream needs every param group ``capturable`` (a non-capturable step reads its step
    counter on the host), refused with torch's message for a capture, naming NPU as torch >= 2.11's
    ``_accelerator_graph_capture_health_check`` names the accelerator; then torch's own check (CUDA)."""

    @_functools.wraps(real)
    def health_check(self):
        from . import _C

        if _C.npu.current_stream().is_capturing() and not all(
                group.get("capturable", False) for group in self.param_groups):
            raise RuntimeError("Attempting NPU graph capture of step() for an instance of "
                               f"{type(self).__name__} but param_groups' capturable is False.")
        return real(self)

    return health_check


def _testing_modules():
    """torch_npu.testing and the two modules torch_npu's test files import from it."""
    from . import _torch_npu_testing as t

    testing = _types.ModuleType("torch_npu.testing", "npugraph's stand-in for torch_npu.testing.")
    testing.__path__ = []
    testcase = _types.ModuleType("torch_npu.testing.testcase", t.__doc__)
    testcase.TestCase, testcase.run_tests = t.TestCase, t.run_tests
    common = _types.ModuleType("torch_npu.testing.common_utils", t.__doc__)
    common.SupportedDevices, common.freeze_rng_state = t.SupportedDevices, t.freeze_rng_state
    common._create_scaling_models_optimizers = t._create_scaling_models_optimizers
    common._create_scaling_case = t._create_scaling_case
    testing.testcase, testing.common_utils = testcase, common
    return dict(zip(_TESTING, (testing, testcase, common)))


def _torch_npu_module(npugraph):
    mod = _types.ModuleType("torch_npu", "npugraph standing in for torch_npu (npugraph.compat).")
    mod.__path__ = []  # a package: torch_npu.testing is importable
    mod.npu = npugraph.npu
    for name in dir(npugraph):
        if name.startswith(("npu_", "_npu_")):
            setattr(mod, name, getattr(npugraph, name))
    mod.__version__ = "npugraph-compat"
    atb = _types.ModuleType("torch_npu.atb", "torch_npu's ATB ops that npugraph has.")
    atb.npu_multi_head_latent_attention = npugraph.npu_multi_head_latent_attention
    mod.atb = atb
    return mod


def install(npu_device=False):
    """Installs the shim (idempotent); returns the ``torch_npu`` module it made. ``npu_device=True``
    (torch >= 2.3; torch 2.3-2.7 compile a C++ device guard on first use) makes ``npu`` a real torch
    device whose tensors live in host memory (Note [The npu device] in npugraph/_npu_device.py); by
    default ``npu`` names the CPU."""
    if _saved:
        return _sys.modules["torch_npu"]
    import torch

    import npugraph
    from . import _npu_device

    if npu_device:
        _npu_device.enable(torch, npugraph.npu)  # raises on a torch that cannot; irreversible

    mod = _torch_npu_module(npugraph)
    testing = _testing_modules()
    mod.testing = testing["torch_npu.testing"]
    _saved["modules"] = {k: _sys.modules.get(k)
                         for k in ("torch_npu", "torch_npu.npu", "torch_npu.npu.amp") + _TESTING + _NPU_SUBMODULES}
    _saved["torch.npu"] = getattr(torch, "npu", None)
    _saved["Tensor.npu"] = getattr(torch.Tensor, "npu", None)
    _saved["Tensor.to"] = torch.Tensor.to
    _saved["Module.npu"] = getattr(torch.nn.Module, "npu", None)
    _saved["Module.to"] = torch.nn.Module.to
    _saved["device"] = torch.device
    from . import _pinned

    _saved["factories"] = {n: getattr(torch, n) for n in _FACTORIES + _pinned.PIN_FACTORIES
                           if hasattr(torch, n)}
    _saved["pin_methods"] = {n: torch.Tensor.__dict__.get(n) for n in _pinned.PIN_METHODS}
    import torch.utils.data.dataloader as loading

    _saved["loader_iter"] = {n: loading._BaseDataLoaderIter.__dict__[n] for n in ("__init__", "__next__")}
    _saved["compile"] = getattr(torch, "compile", None)  # torch >= 2.0
    _saved["record_stream"] = torch.Tensor.__dict__.get("record_stream")  # None: inherited (C)
    _saved["Generator"] = torch.Generator
    import torch.optim  # noqa: F401

    # None on a torch that checks through torch.accelerator (>= 2.11) or has no check
    _saved["health_check"] = torch.optim.Optimizer.__dict__.get("_cuda_graph_capture_health_check")
    _saved["pinning"] = {n: torch.Tensor.__dict__.get(n) for n in ("pin_memory", "is_pinned")}
    import torch.utils.checkpoint  # noqa: F401  torch_npu's import makes torch.utils.checkpoint an attribute

    _saved["rng"] = {(m, n): getattr(m, n) for m in (torch, torch.random) for n in _RNG_FUNCTIONS}
    _sys.modules["torch_npu"] = mod
    _sys.modules["torch_npu.npu"] = npugraph.npu
    _sys.modules.update(testing)
    _sys.modules.update(_npu_submodules())
    from . import _amp

    amp = _amp.make_module(torch, _npu_device.enabled())  # torch_npu.npu.amp (torch >= 2.3)
    _saved["amp"] = getattr(npugraph.npu, "amp", None)
    if amp is not None:
        npugraph.npu.amp = amp
        _sys.modules["torch_npu.npu.amp"] = amp
    _sys.modules["torch_npu.atb"] = mod.atb
    torch.npu = npugraph.npu
    _saved["npu_device"] = _npu_device.enabled()
    if not _saved["npu_device"]:  # npu names the CPU: torch's device names resolve it here
        torch.Tensor.npu = _tensor_npu
        torch.Tensor.to = _wrap_to(_saved["Tensor.to"])
        torch.nn.Module.npu = _module_npu
        torch.device = _device_class(_saved["device"])
        torch.nn.Module.to = _wrap_to(_saved["Module.to"])
    torch.Generator = _generator_class(_saved["Generator"])
    for name, fn in _saved["factories"].items():
        if name in _FACTORIES and not _saved["npu_device"]:
            fn = _wrap_factory(fn)
        if name in _pinned.PIN_FACTORIES:  # pin_memory=True: npugraph's pinned host blocks
            fn = _pinned.pinning_factory(name, fn)
        setattr(torch, name, fn)
    for name in _pinned.PIN_METHODS:
        setattr(torch.Tensor, name, _pinned.pinning_factory(name, getattr(torch.Tensor, name)))
    torch.Tensor.pin_memory, torch.Tensor.is_pinned = _pinned.pin_memory, _pinned.is_pinned
    loading._BaseDataLoaderIter.__init__, loading._BaseDataLoaderIter.__next__ = \
        _pinned.loader_iter_methods(*_saved["loader_iter"].values())
    wrapped = _rng_functions({n: _saved["rng"][(torch, n)] for n in _RNG_FUNCTIONS}, torch)
    for (module, name) in _saved["rng"]:
        setattr(module, name, wrapped[name])
    if _saved["compile"] is not None:
        torch.compile = _wrap_compile(_saved["compile"])
    torch.Tensor.record_stream = _wrap_record_stream(torch.Tensor.record_stream)
    if _saved["health_check"] is not None:
        torch.optim.Optimizer._cuda_graph_capture_health_check = _wrap_health_check(_saved["health_check"])
    # torch_npu's semantics: replays return once launched, and this thread's eager torch ops queue
    # behind its current stream's pending work (Note [Eager torch ops in stream order]).
    npugraph._graph_module.set_replay_blocking_default(False)
    _torch_capture.order_eager_ops(True)
    return mod


def uninstall():
    """Restores torch and sys.modules as they were before install()."""
    if not _saved:
        return
    import torch

    for k, v in _saved["modules"].items():
        if v is None:
            _sys.modules.pop(k, None)
        else:
            _sys.modules[k] = v
    if _saved["npu_device"]:
        torch.npu = _saved["torch.npu"] or torch.npu  # the device module stays: the rename is for good
    elif _saved["torch.npu"] is None:
        delattr(torch, "npu")
    else:
        torch.npu = _saved["torch.npu"]
    if not _saved["npu_device"]:
        if _saved["Tensor.npu"] is None:
            del torch.Tensor.npu
        else:
            torch.Tensor.npu = _saved["Tensor.npu"]
        torch.Tensor.to = _saved["Tensor.to"]
        if _saved["Module.npu"] is None:
            del torch.nn.Module.npu
        else:
            torch.nn.Module.npu = _saved["Module.npu"]
        torch.nn.Module.to = _saved["Module.to"]
        torch.device = _saved["device"]
    torch.Generator = _saved["Generator"]
    for name, fn in _saved["factories"].items():
        setattr(torch, name, fn)
    import torch.utils.data.dataloader as loading

    for name, fn in _saved["loader_iter"].items():
        setattr(loading._BaseDataLoaderIter, name, fn)
    for (module, name), fn in _saved["rng"].items():
        setattr(module, name, fn)
    for name, fn in list(_saved["pinning"].items()) + list(_saved["pin_methods"].items()):
        if fn is None:
            delattr(torch.Tensor, name)
        else:
            setattr(torch.Tensor, name, fn)
    if _saved["compile"] is not None:
        torch.compile = _saved["compile"]
    if _saved["health_check"] is not None:
        torch.optim.Optimizer._cuda_graph_capture_health_check = _saved["health_check"]
    if _saved["record_stream"] is None:
        del torch.Tensor.record_stream
    else:
        torch.Tensor.record_stream = _saved["record_stream"]
    import npugraph
    from . import _C

    if _saved["amp"] is None:
        npugraph.npu.__dict__.pop("amp", None)
    else:
        npugraph.npu.amp = _saved["amp"]
    _C.npu.synchronize()  # eager ops queued behind pending work run before the shim goes
    npugraph._graph_module.set_replay_blocking_default(True)
    _torch_capture.order_eager_ops(False)
    _saved.clear()


def _main(argv):
    import runpy

    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m npugraph.compat SCRIPT [ARGS...]  (runs SCRIPT with torch_npu = npugraph)")
        return 0 if argv else 2
    import os

    install(npu_device=os.environ.get("NPUGRAPH_NPU_DEVICE", "0") not in ("", "0"))
    # child processes the script starts import torch_npu too (npugraph/_shim/torch_npu)
    shim = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_shim")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (shim, os.environ.get("PYTHONPATH")) if p)
    _sys.argv = list(argv)
    runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(_sys.argv[1:]))
