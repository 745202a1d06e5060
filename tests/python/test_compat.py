"""npugraph.compat: an unmodified torch_npu script runs on the CPU (the seed, verbatim, prints
equal: True), and uninstall() gives torch back as it was."""
import os
import subprocess
import sys

import pytest
import torch

import npugraph
import npugraph.compat as compat

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = os.path.join(HERE, "data", "torch_npu_seed.py")


def test_the_seed_is_the_torch_npu_page_verbatim():
    text = open(SEED, encoding="utf-8").read()
    # What makes it a torch_npu script: none of the edits the non-shim example needs.
    assert text.startswith("import torch\nimport torch_npu\n")
    assert text.count(".npu()") == 3 and 'device="npu"' in text
    assert "npugraph" not in text


def test_the_verbatim_seed_prints_equal_true_under_the_shim():
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(npugraph.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "npugraph.compat", SEED], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "equal: True" in proc.stdout, proc.stdout[-2000:]


def test_install_and_uninstall():
    empty = torch.empty
    to = torch.Tensor.to
    mod = compat.install()
    try:
        assert compat.installed() and compat.install() is mod
        import torch_npu  # noqa: F401 - the shim's module

        assert torch_npu is mod and torch_npu.npu is npugraph.npu and torch.npu is npugraph.npu
        assert torch_npu.npu_fused_infer_attention_score is npugraph.npu_fused_infer_attention_score
        x = torch.ones(3, device="npu")
        assert x.npu() is x and x.device.type == "cpu"
        assert torch.equal(torch.zeros_like(x, device="npu:0") + 1, x.to("npu"))
        with pytest.raises(npugraph.ArgumentError, match="npu:1"):
            torch.empty(2, device="npu:1")
    finally:
        compat.uninstall()
    assert not compat.installed()
    assert torch.empty is empty and torch.Tensor.to is to and not hasattr(torch.Tensor, "npu")
    assert "torch_npu" not in sys.modules


def test_module_npu_and_to_npu_under_the_shim():
    """A model moved to the device as torch_npu code does (model.npu(), model.to("npu")) stays
    where npugraph computes, its parameters untouched; uninstall() takes the names back."""
    to = torch.nn.Module.to
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    weight = model[0].weight
    compat.install()
    try:
        assert model.npu() is model and model.npu(0) is model and model[0].weight is weight
        assert model.to("npu") is model and model.to(device="npu:0", dtype=torch.float32) is model
        assert model[0].weight.device.type == "cpu"
        with pytest.raises(npugraph.ArgumentError, match="npu:1"):
            model.to("npu:1")
        with pytest.raises(npugraph.ArgumentError, match="npu:1"):
            model.npu("npu:1")
        half = torch.nn.Linear(2, 2).to("npu", torch.float16)  # other arguments pass through
        assert half.weight.dtype == torch.float16
    finally:
        compat.uninstall()
    assert torch.nn.Module.to is to and not hasattr(torch.nn.Module, "npu")
