"""``torch_npu.testing`` under the shim (npugraph.compat): what torch_npu's own test files import
— ``testcase.TestCase`` / ``run_tests`` and ``common_utils.SupportedDevices`` /
``freeze_rng_state`` — so that those files run unmodified. Written here to torch_npu's documented
contracts:

- ``TestCase.setUp`` seeds torch and ``random`` from ``$SEED`` (666 by default);
- ``assertRtolEqual(x, y, prec=1e-4, prec16=1e-3)``: same shape and dtype; booleans exactly; every
  other dtype passes unless more than ``prec`` (float16: ``prec16``) of the elements, as a fraction,
  miss both the absolute tolerance and the relative one (``|x - y| <= prec`` /
  ``|x - y| / max(|x|, |y|) <= prec``); NaNs must sit in the same places;
- ``assertEqual(x, y, prec=None)``: tensors of one size whose largest difference is at most ``prec``
  (``self.precision``, 1e-5, when not given), compared in ``x``'s dtype (float32 for CPU half types)
  unless ``exact_dtype``; numbers likewise; sequences element by element; anything else as unittest;
- ``SupportedDevices([...])`` runs the test: npugraph stands in for every Ascend SoC, implementing
  the graph semantics those tests check the same way on all of them;
- ``_create_scaling_models_optimizers(device="npu", optimizer_ctor=SGD, optimizer_kwargs=None)`` and
  ``_create_scaling_case(device="npu", dtype=float, ...)``: the gradient-scaling fixtures of torch's
  ``common_cuda`` on the npu device (test/test_npu.py imports them): two ``Linear(8, 8)`` stacks with
  equal parameters and an optimizer each (``lr=1.0`` unless the keywords say otherwise), then four
  ``(input, target)`` pairs of 8x8 ``randn``, an ``MSELoss`` and ``skip_iter = 2``.
"""
import contextlib
import functools
import math
import os
import random
import sys
import unittest
from numbers import Number

__all__ = ["TestCase", "run_tests", "SupportedDevices", "freeze_rng_state",
           "_create_scaling_models_optimizers", "_create_scaling_case"]


def run_tests():
    """unittest.main over the calling module, with the script's arguments (-v, -k ...)."""
    unittest.main(argv=sys.argv)


def _numpy(x, torch, np):
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


class TestCase(unittest.TestCase):
    _precision = 1e-5
    maxDiff = None
    exact_dtype = False

    @property
    def precision(self):
        return self._precision

    @precision.setter
    def precision(self, prec):
        self._precision = prec

    def setUp(self):
        import torch

        seed = int(os.getenv("SEED", "666"))
        torch.manual_seed(seed)
        random.seed(seed)

    def assertRtolEqual(self, x, y, prec=1.e-4, prec16=1.e-3, auto_trans_dtype=False, message=None):
        import numpy as np
        import torch

        if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
            for a, b in zip(x, y):
                self.assertRtolEqual(a, b, prec, prec16, auto_trans_dtype, message)
            return
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if auto_trans_dtype:
                x = x.to(y.dtype)
            if x.dtype == torch.bfloat16 and y.dtype == torch.bfloat16:
                if x.shape != y.shape:
                    self.fail(message or f"shape error: {tuple(x.shape)} vs {tuple(y.shape)}")
                if not torch.allclose(x.float(), y.float(), rtol=prec16, atol=prec16):
                    self.fail(message or "result error")
                return
        elif isinstance(x, torch.Tensor):
            y = torch.as_tensor(y, dtype=x.dtype)
        elif isinstance(y, torch.Tensor):
            x = torch.as_tensor(x, dtype=y.dtype)
        a, b = _numpy(x, torch, np), _numpy(y, torch, np)
        if a.shape != b.shape:
            self.fail(message or f"shape error: {a.shape} vs {b.shape}")
        if a.dtype != b.dtype:
            self.fail(message or f"dtype error: {a.dtype} vs {b.dtype}")
        if a.dtype == np.bool_:
            if not np.array_equal(a, b):
                self.fail(message or "result error")
            return
        tol = prec16 if a.dtype == np.float16 else prec
        tiny = 6e-8 if a.dtype == np.float16 else 1e-9
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        nan = np.isnan(a64)
        if not np.array_equal(nan, np.isnan(b64)):
            self.fail(message or "result error: NaNs differ in place")
        diff = np.where(nan, 0.0, np.abs(a64 - b64))
        scale = np.maximum(np.abs(np.where(nan, 0.0, a64)), np.abs(np.where(nan, 0.0, b64))) + tiny
        abs_miss = np.count_nonzero(diff > tol)
        rel_miss = np.count_nonzero(diff / scale > tol)
        if abs_miss > a.size * tol and rel_miss > a.size * tol:
            self.fail(message or f"result error: {abs_miss} of {a.size} elements off by more than {tol} "
                                 f"(largest difference {float(diff.max())})")

    def assertEqual(self, x, y, prec=None, message="", allow_inf=False, exact_dtype=None):
        import torch

        if isinstance(prec, str) and not message:  # assertEqual(x, y, "message"), as torch's old TestCase
            prec, message = None, prec
        if exact_dtype is None:
            exact_dtype = self.exact_dtype
        if prec is None:
            prec = self.precision
        if isinstance(x, torch.Tensor) and isinstance(y, Number):
            y = torch.full_like(x, y)
        elif isinstance(y, torch.Tensor) and isinstance(x, Number):
            x = torch.full_like(y, x)
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            self._tensors_equal(x, y, prec, message, allow_inf, exact_dtype, torch)
        elif isinstance(x, Number) and isinstance(y, Number) and not isinstance(x, bool):
            if math.isnan(x) or math.isnan(y):
                self.assertTrue(math.isnan(x) and math.isnan(y), message)
            elif math.isinf(x) or math.isinf(y):
                super().assertEqual(x, y, message)
            else:
                self.assertLessEqual(abs(x - y), prec, message)
        elif isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)) and not isinstance(x, str):
            super().assertEqual(len(x), len(y), message)
            for a, b in zip(x, y):
                self.assertEqual(a, b, prec, message, allow_inf, exact_dtype)
        else:
            super().assertEqual(x, y, message)

    def _tensors_equal(self, a, b, prec, message, allow_inf, exact_dtype, torch):
        super().assertEqual(a.size(), b.size(), message)
        if exact_dtype:
            super().assertEqual(a.dtype, b.dtype, message)
        if a.numel() == 0:
            return
        if a.dtype in (torch.float16, torch.bfloat16):
            a = a.float()
        b = b.to(a.dtype)
        if a.dtype == torch.bool:
            a, b = a.int(), b.int()
        if a.dtype.is_floating_point:
            nan = torch.isnan(a)
            self.assertTrue(torch.equal(nan, torch.isnan(b)), message)
            a, b = a.masked_fill(nan, 0), b.masked_fill(nan, 0)
            if allow_inf:
                inf = torch.isinf(a)
                self.assertTrue(torch.equal(a[inf], b[inf]), message)
                a, b = a.masked_fill(inf, 0), b.masked_fill(inf, 0)
        diff = (a - b).abs() if a.dtype != torch.uint8 else (a.int() - b.int()).abs()
        self.assertLessEqual(diff.max().item(), prec, message)


class SupportedDevices:
    """@SupportedDevices(["Ascend910B", ...]): runs the test (npugraph stands in for every SoC)."""

    def __init__(self, supported_devices):
        self.supported_devices = list(supported_devices)

    def __call__(self, fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            return fn(*args, **kwargs)

        return run


@contextlib.contextmanager
def freeze_rng_state():
    """Restores torch's CPU generator state (npugraph's device generator) on exit."""
    import torch

    state = torch.get_rng_state()
    try:
        yield
    finally:
        torch.set_rng_state(state)


def _create_scaling_models_optimizers(device="npu", optimizer_ctor=None, optimizer_kwargs=None):
    """A module and optimizer that will use gradient scaling, and a control pair that will not."""
    import torch

    if optimizer_ctor is None:
        optimizer_ctor = torch.optim.SGD
    mod_control = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)).to(device=device)
    mod_scaling = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)).to(device=device)
    with torch.no_grad():
        for c, s in zip(mod_control.parameters(), mod_scaling.parameters()):
            s.copy_(c)
    kwargs = {"lr": 1.0}
    if optimizer_kwargs is not None:
        kwargs.update(optimizer_kwargs)
    opt_control = optimizer_ctor(mod_control.parameters(), **kwargs)
    opt_scaling = optimizer_ctor(mod_scaling.parameters(), **kwargs)
    return mod_control, mod_scaling, opt_control, opt_scaling


def _create_scaling_case(device="npu", dtype=None, optimizer_ctor=None, optimizer_kwargs=None):
    """``_create_scaling_models_optimizers``' four values, then the data, the loss and ``skip_iter``."""
    import torch

    if dtype is None:
        dtype = torch.float
    data = [(torch.randn((8, 8), dtype=dtype, device=device),
             torch.randn((8, 8), dtype=dtype, device=device)) for _ in range(4)]
    loss_fn = torch.nn.MSELoss().to(device)
    skip_iter = 2
    return _create_scaling_models_optimizers(
        device=device, optimizer_ctor=optimizer_ctor, optimizer_kwargs=optimizer_kwargs,
    ) + (data, loss_fn, skip_iter)
