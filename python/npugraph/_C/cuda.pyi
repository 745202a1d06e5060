"""
the CUDA devices (torch.cuda names)
"""
from __future__ import annotations
__all__: list[str] = ['device_count', 'is_available']
def device_count() -> int:
    """
    The number of CUDA devices: 0 without a GPU, a driver, or the CUDA backend in this build.
    """
def is_available() -> bool:
    """
    Whether a cuda:N device can be used (device_count() > 0).
    """
