"""``torch_npu.npu.amp`` under the torch_npu shim (npugraph.compat), torch >= 2.3: ``GradScaler``.

torch_npu's ``GradScaler(init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5,
growth_interval=2000, enabled=True, dynamic=True)`` is torch's device-generic ``torch.amp.GradScaler``
on the npu device: ``scale`` multiplies by the scale, ``unscale_`` / ``step`` divide the gradients
by it and skip the step when one is inf or NaN, ``update`` halves the scale after such a step
(``backoff_factor``) and doubles it after ``growth_interval`` clean ones. Here it is torch's own on
npugraph's device: ``npu`` with the real device (Note [The npu device]), the CPU where ``npu``
names the CPU; torch's CPU kernels (``_amp_foreach_non_finite_check_and_unscale_``,
``_amp_update_scale_``) do the work, so scaling, captured or eager, is torch's arithmetic.

``autocast(enabled=True, dtype=torch.float16, cache_enabled=True)``, with the real device only, is
torch's ``torch.autocast("npu", ...)``, as torch_npu's is; its kernels are npugraph's (Note
[Autocast on the npu device] in npugraph/_autocast.py: CUDA's cast lists). Where ``npu`` names the
CPU there is no ``autocast`` (CPU autocast casts other ops to other types than the NPU's).
"""
import types as _types

__all__ = ["available", "make_module"]


def available(torch):
    """Whether this torch has the device-generic GradScaler (torch >= 2.3)."""
    amp = getattr(torch, "amp", None)
    return amp is not None and hasattr(amp, "GradScaler")


def make_module(torch, npu_device):
    """The ``torch_npu.npu.amp`` module for this torch, or None where it has no generic GradScaler."""
    if not available(torch):
        return None
    from . import _C

    device = "npu" if npu_device else "cpu"

    class GradScaler(torch.amp.GradScaler):
        """torch_npu.npu.amp.GradScaler: torch.amp.GradScaler on npugraph's device."""

        def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                     growth_interval=2000, enabled=True, dynamic=True):
            if not dynamic:
                raise _C.UnsupportedError("GradScaler(dynamic=False): a static loss scale is not "
                                          "implemented; use dynamic=True (torch's scaler)")
            super().__init__(device, init_scale=init_scale, growth_factor=growth_factor,
                             backoff_factor=backoff_factor, growth_interval=growth_interval,
                             enabled=enabled)

    mod = _types.ModuleType("torch_npu.npu.amp", __doc__)
    mod.GradScaler = GradScaler
    if npu_device:
        class autocast(torch.amp.autocast):  # noqa: N801  torch_npu's name
            """torch_npu.npu.amp.autocast: torch.autocast on the npu device."""

            def __init__(self, enabled=True, dtype=torch.float16, cache_enabled=True):
                super().__init__("npu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

        mod.autocast = autocast
    return mod
