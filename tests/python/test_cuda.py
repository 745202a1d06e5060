"""npugraph on CUDA devices from Python: npugraph.cuda, device='cuda:N', torch CUDA tensors through
DLPack (Note [torch CUDA tensors] in python/src/convert.cpp). This machine has no GPU, so a stand-in
for a torch CUDA tensor (its DLPack capsule built with ctypes, as torch's __dlpack__ builds one) shows
the tensor reaching the runtime on the right device; the GPU-only checks skip without one."""
import ctypes
import os

import numpy as np
import pytest
import torch

import npugraph
from npugraph import npu

HAS_GPU = npugraph.cuda.device_count() > 0


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_CAPSULE_NAME = b"dltensor"
_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class _Device:
    def __init__(self, kind, index):
        self.type, self.index = kind, index

    def __str__(self):
        return f"{self.type}:{self.index}"


class FakeTorchTensor:
    """What npugraph reads of a torch tensor (device, dtype, requires_grad, __dlpack__), for memory
    at a made-up device address that nothing may dereference."""

    def __init__(self, shape, device_type="cuda", dl_device_type=2, index=0):
        self.device = _Device(device_type, index)
        self.dtype = torch.float32
        self.requires_grad = False
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._managed = _DLManagedTensor()
        t = self._managed.dl_tensor
        t.data, t.ndim, t.byte_offset = 0x7F0000000000, len(shape), 0
        t.device = _DLDevice(dl_device_type, index)
        t.dtype = _DLDataType(2, 32, 1)  # float32
        t.shape = self._shape
        t.strides = None
        self.dlpack_calls = 0

    def __dlpack__(self, stream=None):
        self.dlpack_calls += 1
        return _new_capsule(ctypes.addressof(self._managed), _CAPSULE_NAME, None)


FakeTorchTensor.__module__ = "torch.npugraph_test_stand_in"  # what npugraph takes for torch's


@pytest.fixture
def torch_stream_syncs(monkeypatch):
    """torch.cuda.current_stream(device).synchronize() calls, recorded (this torch may have no CUDA)."""
    calls = []

    class _Stream:
        def __init__(self, device):
            self.device = device

        def synchronize(self):
            calls.append(str(self.device))

    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: _Stream(device))
    return calls


def _no_device_message(device):
    # A CUDA build without a GPU, or a build without the CUDA backend: both name the device.
    return rf"device = {device}: (no CUDA device is present|this build has no backend for it)"


def test_device_count_matches_the_machine():
    if not os.path.exists("/dev/nvidiactl"):
        assert npugraph.cuda.device_count() == 0
        assert npugraph.cuda.is_available() is False
    else:
        assert npugraph.cuda.is_available() == (npugraph.cuda.device_count() > 0)
    assert npu.device_count() == 1  # npu is the cpu


@pytest.mark.skipif(HAS_GPU, reason="the no-GPU errors")
def test_cuda_streams_and_tensors_without_a_gpu_raise_naming_the_device():
    with pytest.raises(npugraph.UnsupportedError, match=_no_device_message("cuda:0")):
        npu.Stream(device="cuda:0")
    with pytest.raises(npugraph.UnsupportedError, match=_no_device_message("cuda:1")):
        npu.current_stream(torch.device("cuda", 1))
    with pytest.raises(npugraph.UnsupportedError, match=_no_device_message("cuda:0")):
        npugraph.empty(4, dtype=torch.float32, device="cuda:0")
    with pytest.raises(npugraph.UnsupportedError, match=_no_device_message("cuda:0")):
        npugraph.zeros(4, dtype=torch.float16, device="cuda:0")
    # The cpu is untouched.
    assert npugraph.zeros(3, dtype=torch.float32).tolist() == [0.0, 0.0, 0.0]


def test_numpy_dtypes_on_a_cuda_device_are_refused_before_allocating():
    for dtype in (np.float32, np.dtype("float16")):
        with pytest.raises(npugraph.ArgumentError,
                           match=r"empty: device = cuda:0, dtype = .*: a numpy array holds host memory "
                                 r"only; give a torch dtype"):
            npugraph.empty(2, 3, dtype=dtype, device="cuda:0")
    with pytest.raises(npugraph.ArgumentError, match=r"zeros: device = cuda:2, .*host memory only"):
        npugraph.zeros(2, dtype=np.int32, device="cuda:2")


@pytest.mark.skipif(HAS_GPU, reason="the no-GPU errors")
def test_no_dtype_or_a_dtype_name_on_a_cuda_device_means_a_torch_tensor():
    # Not refused as numpy: they reach the device, which this machine does not have.
    for dtype in (None, "float16", "bfloat16"):
        with pytest.raises(npugraph.UnsupportedError, match=_no_device_message("cuda:0")):
            npugraph.empty(2, 3, dtype=dtype, device="cuda:0")


@pytest.mark.skipif(HAS_GPU, reason="the stand-in's memory is not real device memory")
def test_a_torch_cuda_tensor_reaches_the_runtime_on_its_device(torch_stream_syncs):
    x, gamma = FakeTorchTensor([2, 8], index=1), FakeTorchTensor([8], index=1)
    with pytest.raises(npugraph.UnsupportedError, match=_no_device_message("cuda:1")):
        npugraph.npu_rms_norm(x, gamma, 1e-6)
    assert x.dlpack_calls == 1 and gamma.dlpack_calls == 1
    # torch's stream of the tensor's device was finished before the memory was shared.
    assert torch_stream_syncs == ["cuda:1", "cuda:1"]
    q = FakeTorchTensor([1, 2, 1, 16])
    with pytest.raises(npugraph.UnsupportedError, match=_no_device_message("cuda:0")):
        npugraph.npu_fused_infer_attention_score(q, q, q, num_heads=2, input_layout="BNSD")
    # The runtime stays usable on the cpu.
    a = torch.ones(2, 8)
    out = npugraph.npu_rms_norm(a, torch.ones(8), 1e-6)[0]
    assert torch.allclose(out, torch.ones(2, 8), atol=1e-3)


def test_tensors_of_other_torch_devices_are_refused_naming_them(torch_stream_syncs):
    with pytest.raises(npugraph.ArgumentError,
                       match=r"x: torch tensor on device 'mps': npugraph takes cpu and cuda tensors"):
        npugraph.npu_rms_norm(FakeTorchTensor([2, 8], device_type="mps"), torch.ones(8), 1e-6)
    with pytest.raises(npugraph.ArgumentError,
                       match=r"DLPack device type 7 is neither the cpu \(1\) nor CUDA \(2\)"):
        npugraph.npu_rms_norm(FakeTorchTensor([2, 8], dl_device_type=7), torch.ones(8), 1e-6)
    assert torch_stream_syncs == ["cuda:0"]  # only the cuda-typed one was synchronized


@pytest.mark.skipif(not (HAS_GPU and torch.cuda.is_available()), reason="needs a GPU and torch with CUDA")
def test_torch_cuda_tensors_round_trip_on_the_gpu():
    x = torch.randn(4, 64, device="cuda", dtype=torch.float16)
    gamma = torch.randn(64, device="cuda", dtype=torch.float16)
    ours = npugraph.npu_rms_norm(x, gamma, 1e-6)[0]
    assert ours.device.type == "cuda"
    cpu = npugraph.npu_rms_norm(x.cpu(), gamma.cpu(), 1e-6)[0]
    assert torch.equal(ours.cpu(), cpu)


def test_the_engine_takes_a_device_and_names_a_bad_one():
    with pytest.raises(npugraph.ArgumentError,
                       match=r"Engine: device = 'tpu:0': must be 'cpu', 'npu\[:N\]' or 'cuda\[:N\]'"):
        npugraph.llm.Engine("no-such-model.gguf", device="tpu:0")
    with pytest.raises(npugraph.ArgumentError,
                       match=r"activations = 'int8': must be 'q8', 'f32' or None \(q8 on the cpu, f32 on cuda\)"):
        npugraph.llm.Engine("no-such-model.gguf", activations="int8")
    # q8 activations on a cuda device: refused before the model loads, GPU or not.
    with pytest.raises(npugraph.UnsupportedError, match=r"device = cuda:0: activations = q8 runs on the cpu only"):
        npugraph.llm.Engine("no-such-model.gguf", device="cuda:0", activations="q8")
    if not HAS_GPU:
        # Refused before the model file is opened: the path does not exist.
        with pytest.raises(npugraph.UnsupportedError, match=_no_device_message("cuda:0")):
            npugraph.llm.Engine("no-such-model.gguf", device="cuda:0")
