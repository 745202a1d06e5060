"""The npu device's C++ half for torch 2.3-2.7: compiled once per torch, cached, loaded.

Note [The npu device on torch 2.3-2.7]
torch >= 2.8 takes a PrivateUse1 device guard and accelerator hooks from Python; torch 2.3-2.7 only
from C++ (the device guard: what torch asks for a device's current device and streams, the
autograd engine on every backward; the hooks: which autograd asks whether a device has a
context). ``_npu_device_ext.cpp`` is those two objects and nothing else: one device, npu:0,
whose one stream is the default stream and whose events are complete once recorded (npugraph's
device is the host; its work is done when the call returns). Everything else — the rename, the
generated methods, the device module, the wrapper subclass, factories and copies — is the same
Python as on torch >= 2.8 (Note [The npu device] in npugraph/_npu_device.py), and one more
duty on torch 2.3, whose ``torch.autocast`` hands a named device's autocast state to the device
module only: the module passes it on to torch's dispatcher through this library
(``autocast_setter``), so the npu autocast kernels run. torch 2.1 and 2.2 are refused
(``_npu_device.refusal``): they run a Python-registered kernel (the factories') with tensor
subclasses forbidden (torch::deploy's "hermetic" mode), and turning that off from here crashes in
torch (seen on 2.1.2).

The file is compiled here, not shipped built: it must match the installed torch's C++ ABI, which
changes with each release. The first ``enable`` on a given torch runs the C++ compiler (``$CXX``,
else ``c++`` / ``g++`` on PATH) against the headers the torch wheel ships (``torch/include``) and
links ``torch/lib``'s libc10 and libtorch_cpu — about 5 s on a 2-core Xeon — then every later
process loads the cached library: ``${XDG_CACHE_HOME:-~/.cache}/npugraph/torch-ext/``, one file per
torch version, C++ ABI and source digest (a changed source builds a new file). It is built under a
temporary name and renamed into place, so processes that start together never load half a file;
the files an earlier source built for the same torch are then removed.
No ninja and no setuptools (torch.utils.cpp_extension wants both): one compiler command suffices.
A missing compiler, or one that fails, raises UnsupportedError saying so.
"""
import ctypes as _ctypes
import hashlib as _hashlib
import os as _os
import shutil as _shutil
import subprocess as _subprocess
import tempfile as _tempfile

_SOURCE = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "_npu_device_ext.cpp")
_loaded = {}


def version(text):
    """(major, minor) of a torch version string ("2.7.1+cu126" -> (2, 7))."""
    major, minor = text.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def needed(torch):
    """Whether this torch needs the extension for the device: 2.3 <= torch < 2.8."""
    return (2, 3) <= version(torch.__version__) < (2, 8)


def _autocast_in_module(torch):
    """torch < 2.4: torch.autocast gives a named device's state to its device module, not to torch."""
    return version(torch.__version__) < (2, 4)


def autocast_setter(torch):
    """None, or on torch 2.3 set(enabled, dtype): the device module's autocast state handed to
    torch's dispatcher (which alone runs the npu autocast kernels)."""
    if not _autocast_in_module(torch):
        return None
    fn = _loaded["lib"].npugraph_npu_set_autocast
    fn.argtypes, fn.restype = [_ctypes.c_int, _ctypes.c_int], None
    codes = {torch.float16: 5, torch.float32: 6, torch.bfloat16: 15}  # c10::ScalarType's values
    return lambda enabled, dtype: fn(int(bool(enabled)), codes[dtype])


def cache_dir():
    base = _os.environ.get("XDG_CACHE_HOME") or _os.path.join(_os.path.expanduser("~"), ".cache")
    return _os.path.join(base, "npugraph", "torch-ext")


def compiler():
    """The C++ compiler's path: $CXX, else c++ or g++ on PATH; None if there is none."""
    named = _os.environ.get("CXX")
    if named:
        return _shutil.which(named)
    return _shutil.which("c++") or _shutil.which("g++")


def library_path(torch):
    """Where the library for this torch and this source lives (built or not)."""
    with open(_SOURCE, "rb") as f:
        digest = _hashlib.sha256(f.read()).hexdigest()[:16]
    abi = int(bool(torch._C._GLIBCXX_USE_CXX11_ABI))
    return _os.path.join(cache_dir(), f"npu_device-torch{torch.__version__}-abi{abi}-{digest}.so")


def build(torch, target, error):
    """Compiles the source for this torch into target; error(message) makes the exception to raise."""
    cxx = compiler()
    if cxx is None:
        raise error(f"npu_device=True: torch {torch.__version__} needs npugraph's C++ device guard, "
                    f"compiled once against it, and no C++ compiler was found ($CXX, c++ or g++ on "
                    f"PATH): install one (Debian: apt-get install g++), or use torch >= 2.8, which "
                    f"needs none")
    root = _os.path.dirname(_os.path.abspath(torch.__file__))
    include, lib = _os.path.join(root, "include"), _os.path.join(root, "lib")
    _os.makedirs(_os.path.dirname(target), exist_ok=True)
    fd, tmp = _tempfile.mkstemp(suffix=".so.tmp", dir=_os.path.dirname(target))
    _os.close(fd)
    cmd = [cxx, "-shared", "-fPIC", "-O2", "-std=c++17", "-w",
           f"-D_GLIBCXX_USE_CXX11_ABI={int(bool(torch._C._GLIBCXX_USE_CXX11_ABI))}",
           *(["-DNPUGRAPH_AUTOCAST_STATE_IN_MODULE"] if _autocast_in_module(torch) else []),
           "-isystem", include, _SOURCE, "-o", tmp, f"-L{lib}", "-lc10", "-ltorch_cpu",
           f"-Wl,-rpath,{lib}"]
    try:
        done = _subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise error(f"npu_device=True: compiling npugraph's C++ device guard for torch "
                        f"{torch.__version__} failed ({' '.join(cmd)}):\n{done.stderr[-3000:]}")
        _os.replace(tmp, target)
        _drop_stale(target)
    finally:
        if _os.path.exists(tmp):
            _os.unlink(tmp)


def _drop_stale(target):
    """Removes the libraries this torch had built from an earlier source (a process that has one
    loaded keeps its mapping)."""
    folder, name = _os.path.split(target)
    prefix = name.rsplit("-", 1)[0] + "-"
    for other in _os.listdir(folder):
        if other.startswith(prefix) and other.endswith(".so") and other != name:
            try:
                _os.unlink(_os.path.join(folder, other))
            except OSError:
                pass  # another process removed it first


def load(torch, error):
    """Builds the library if this torch has none cached, loads it (registering the device guard)
    and registers the hooks; once per process."""
    if "lib" in _loaded:
        return _loaded["lib"]
    path = library_path(torch)
    if not _os.path.exists(path):
        build(torch, path, error)
    lib = _ctypes.CDLL(path)
    register = lib.npugraph_npu_register_hooks
    register.restype = _ctypes.c_char_p
    failed = register()
    if failed is not None:
        raise error(f"npu_device=True: torch {torch.__version__} refused npugraph's PrivateUse1 "
                    f"hooks: {failed.decode(errors='replace')}")
    _loaded["lib"] = lib
    return lib
