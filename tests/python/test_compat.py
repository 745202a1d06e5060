"""npugraph.compat: an unmodified torch_npu script runs on the CPU (the seed, verbatim, prints
equal: True), and uninstall() gives torch back as it was."""
import os
import re
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


def test_torch_device_npu_under_the_shim():
    real = torch.device
    compat.install()
    try:
        for made in (torch.device("npu"), torch.device("npu:0"), torch.device("npu", 0),
                     torch.device(type="npu", index=0)):
            assert made == real("cpu") and isinstance(made, torch.device)
        assert torch.device("cpu") == real("cpu") and torch.device("meta").type == "meta"
        assert torch.ones(2, device=torch.device("npu:0")).device.type == "cpu"
        with pytest.raises(npugraph.ArgumentError, match="npu:1"):
            torch.device("npu:1")
        with pytest.raises(npugraph.ArgumentError, match="npu:3"):
            torch.device("npu", 3)
    finally:
        compat.uninstall()
    assert torch.device is real


def test_torch_npu_testing_helpers_under_the_shim():
    """torch_npu's test files import TestCase/run_tests/SupportedDevices from torch_npu.testing; the
    shim's versions check what torch_npu's do (they fail on wrong values) and run every test."""
    compat.install()
    try:
        from torch_npu.testing.common_utils import SupportedDevices, freeze_rng_state
        from torch_npu.testing.testcase import TestCase, run_tests  # noqa: F401

        ran = []

        class Probe(TestCase):
            @SupportedDevices(["Ascend910B", "Ascend910_93"])
            def runTest(self):
                ran.append(True)
                x = torch.tensor([1.0, 2.0, 3.0])
                self.assertEqual(x, x + 1e-6)
                self.assertRtolEqual(x.half(), (x * (1 + 5e-4)).half())
                with self.assertRaises(AssertionError):
                    self.assertEqual(x, x + 1e-3)
                with self.assertRaises(AssertionError):
                    self.assertRtolEqual(x, x * 1.01)
                with self.assertRaises(AssertionError):
                    self.assertRtolEqual(x, x.double())  # dtype error
                self.assertEqual(torch.zeros(1, dtype=torch.float16), torch.zeros(1))  # values, not dtypes
                self.assertEqual([1, 2.0], (1, 2.0 + 1e-7))

        result = Probe().run()
        assert ran and result.wasSuccessful(), result.failures + result.errors
        with freeze_rng_state():
            a = torch.rand(3)
        assert torch.equal(a, torch.rand(3))
    finally:
        compat.uninstall()
    assert "torch_npu.testing" not in sys.modules


def test_torch_npu_housekeeping_names():
    stream = npugraph.npu.Stream()
    npugraph.npu.set_compile_mode(jit_compile=False)
    with pytest.raises(TypeError, match="jit_compile = 'no': expected a bool"):
        npugraph.npu.set_compile_mode(jit_compile="no")
    npugraph.npu._subscribe_report(stream)
    with pytest.raises(TypeError, match=r"_subscribe_report: stream = 3: expected an npugraph.npu.Stream"):
        npugraph.npu._subscribe_report(3)
    seen = []
    with npugraph.npu.stream(stream):
        npugraph.npu._sleep(1_000_000)  # 1 ms of stream time, then the host function behind it
        npugraph.npu._launch_host_func(stream, seen.append, "after sleep")
    npugraph.npu._unsubscribe_report(stream)
    stream.synchronize()
    assert seen == ["after sleep"]
    npugraph.npu.manual_seed(5)
    a = torch.rand(2)
    torch.manual_seed(5)
    assert torch.equal(a, torch.rand(2)) and npugraph.npu.initial_seed() == 5
    state = npugraph.npu.get_rng_state()
    b = torch.rand(2)
    npugraph.npu.set_rng_state(state)
    assert torch.equal(b, torch.rand(2)) and npugraph.npu.is_bf16_supported()
    props = npugraph.npu.get_device_properties(0)
    assert props.name == npugraph.npu.get_device_name() and props.total_memory > 2**26
    assert props.multi_processor_count >= 1 and "total_memory=" in repr(props)
    with pytest.raises(npugraph.ArgumentError, match="npu:1"):
        npugraph.npu.get_device_properties("npu:1")


def test_npu_device_refused_on_a_torch_that_cannot_name_it():
    from npugraph import _npu_device

    if _npu_device.available(torch):
        pytest.skip(f"torch {torch.__version__} names the device (tests/python/test_npu_device.py)")
    with pytest.raises(npugraph.UnsupportedError,
                       match=rf"npu_device=True: torch {re.escape(torch.__version__)} cannot (name a device \(|hold the npu "
                             rf"device: ).*the npu device needs torch >= 2\.3\)?; without it 'npu' stays "
                             rf"an alias of the CPU"):
        compat.install(npu_device=True)
    assert not compat.installed() and "torch_npu" not in sys.modules


def test_torches_before_2_3_are_refused_with_their_reason():
    from npugraph import _npu_device

    assert _npu_device.refusal("2.2.2+cu121") == (
        "torch 2.2.2+cu121 cannot hold the npu device: torch 2.1 and 2.2 run Python-registered kernels "
        "where they cannot make tensor subclasses; the npu device needs torch >= 2.3")
    assert _npu_device.refusal("2.0.1") == (
        "torch 2.0.1 cannot name a device (PyTorch's PrivateUse1 renaming came with torch 2.1; the npu "
        "device needs torch >= 2.3)")
    assert [_npu_device.refusal(v) for v in ("2.3.1", "2.7.1+cu126", "2.10.0", "2.11.0a0+git1")] == [None] * 4


def test_child_processes_of_the_launcher_import_torch_npu(tmp_path):
    # torch_npu's test_capture_rejects_expandable_segments runs `python -c "import torch_npu ..."`
    script = tmp_path / "parent.py"
    script.write_text(
        "import subprocess, sys\n"
        "out = subprocess.run([sys.executable, '-c', 'import torch, torch_npu; "
        "print(torch_npu.__version__, torch.npu.is_available())'], capture_output=True, text=True)\n"
        "print(out.stdout.strip(), out.stderr[-500:])\n")
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(npugraph.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")]))
    env.pop("NPUGRAPH_NPU_DEVICE", None)
    proc = subprocess.run([sys.executable, "-m", "npugraph.compat", str(script)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("npugraph-compat True"), proc.stdout[-2000:]


def test_capturing_a_non_capturable_optimizer_step_is_refused_with_torchs_message():
    # torch's health check names the accelerator (torch >= 2.11: "Attempting NPU graph capture of
    # step() ..."); the shim says so for a step captured on an npu stream
    compat.install()
    try:
        import torch_npu

        w = torch.nn.Parameter(torch.ones(2))
        w.grad = torch.ones(2)
        opt = torch.optim.Adam([w], lr=0.1)  # capturable=False
        g = torch_npu.npu.NPUGraph()
        with pytest.raises(RuntimeError, match=r"^Attempting NPU graph capture of step\(\) for an instance "
                                               r"of Adam but param_groups' capturable is False\.$"):
            with torch_npu.npu.graph(g):
                opt.step()
        opt.step()  # outside a capture: torch's step, w - lr * sign(grad) on the first Adam step
        assert torch.allclose(w.detach(), torch.full((2,), 0.9))
    finally:
        compat.uninstall()
    from torch.optim import Optimizer

    assert not hasattr(Optimizer._cuda_graph_capture_health_check, "__wrapped__")  # torch's own again


def test_torch_npus_scaling_fixtures_under_the_shim():
    # torch_npu.testing.common_utils' copies of torch's common_cuda gradient-scaling fixtures
    compat.install()
    try:
        from torch_npu.testing.common_utils import _create_scaling_case, _create_scaling_models_optimizers

        control, scaling, opt_c, opt_s, data, loss_fn, skip_iter = _create_scaling_case(device="cpu")
        assert skip_iter == 2 and isinstance(loss_fn, torch.nn.MSELoss) and len(data) == 4
        assert all(x.shape == (8, 8) and t.shape == (8, 8) and x.dtype == torch.float for x, t in data)
        for c, s in zip(control.parameters(), scaling.parameters()):
            assert torch.equal(c, s) and c is not s
        assert [type(m) for m in control] == [torch.nn.Linear, torch.nn.Linear]
        assert isinstance(opt_c, torch.optim.SGD) and opt_c.param_groups[0]["lr"] == 1.0
        *_, opt = _create_scaling_models_optimizers(device="cpu", optimizer_ctor=torch.optim.Adam,
                                                    optimizer_kwargs={"lr": 0.5})
        assert isinstance(opt, torch.optim.Adam) and opt.param_groups[0]["lr"] == 0.5
    finally:
        compat.uninstall()


def test_torch_npu_amp_grad_scaler_under_the_shim():
    from npugraph import _amp

    compat.install()
    try:
        import torch_npu

        if not _amp.available(torch):
            assert not hasattr(torch_npu.npu, "amp")  # torch < 2.3 has no device-generic scaler
            return
        w = torch.nn.Parameter(torch.ones(3))
        opt = torch.optim.SGD([w], lr=0.5)
        scaler = torch_npu.npu.amp.GradScaler(init_scale=8.0, growth_interval=1)
        scaler.scale((w * torch.tensor([1.0, 2.0, 3.0])).sum()).backward()
        assert w.grad.tolist() == [8.0, 16.0, 24.0]  # scaled by 8
        scaler.step(opt)  # unscaled to 1, 2, 3, then w - 0.5 * grad
        scaler.update()
        assert w.detach().tolist() == [0.5, 0.0, -0.5] and scaler.get_scale() == 16.0  # grown after a clean step
        opt.zero_grad()
        scaler.scale((w * float("inf")).sum()).backward()
        scaler.step(opt)  # an inf gradient: the step is skipped
        scaler.update()
        assert w.detach().tolist() == [0.5, 0.0, -0.5] and scaler.get_scale() == 8.0  # backed off
        with pytest.raises(npugraph.UnsupportedError, match=r"dynamic=False"):
            torch_npu.npu.amp.GradScaler(dynamic=False)
    finally:
        compat.uninstall()
    assert not hasattr(npugraph.npu, "amp") and "torch_npu.npu.amp" not in sys.modules
