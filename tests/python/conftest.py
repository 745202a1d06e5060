import numpy as np
import pytest
import torch


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def randn(shape, dtype, rng, kind="torch"):
    """A tensor of standard normal values, as torch (any dtype) or numpy (float16/float32)."""
    values = rng.standard_normal(shape).astype(np.float32)
    if kind == "numpy":
        return values.astype(dtype)
    return torch.from_numpy(values).to(dtype)
