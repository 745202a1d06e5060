"""A real `npu` device under the shim (npugraph.compat.install(npu_device=True), torch >= 2.3;
Note [The npu device] in npugraph/_npu_device.py, and on torch 2.3-2.7 its C++ device guard, Note
[The npu device on torch 2.3-2.7] in npugraph/_npu_device_ext.py). The device's name is process-wide
and for good, so every check runs in a fresh interpreter. Skipped on a torch that cannot name a
device (1.13: tests/python/test_compat.py checks the refusal)."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import npugraph
from npugraph import _npu_device, _npu_device_ext

pytestmark = pytest.mark.skipif(not _npu_device.available(torch),
                                reason=f"torch {torch.__version__} cannot name a device")
HERE = os.path.dirname(os.path.abspath(__file__))
# torch 2.3-2.7: the device guard and hooks come from npugraph's C++ extension, built on first use
needs_extension = pytest.mark.skipif(
    not _npu_device_ext.needed(torch),
    reason=f"torch {torch.__version__} builds no C++ device guard (only torch 2.3-2.7 do)")


def run(body, env=None, expect_ok=True):
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(npugraph.__file__)))
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_root, HERE, os.environ.get("PYTHONPATH", "")]),
                    **(env or {}))
    script = "import torch, npugraph, npugraph.compat as compat\n" + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-c", script], cwd=HERE, env=full_env, capture_output=True,
                          text=True, timeout=300)
    if expect_ok:
        assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
        assert "SCENARIO OK" in proc.stdout, proc.stdout[-3000:]
    return proc


def test_tensors_live_on_npu_and_compute():
    run("""
        compat.install(npu_device=True)
        import torch_npu
        d = torch.device("npu:0")
        assert d.type == "npu" and d.index == 0 and torch.device("npu", 0) == d
        x = torch.arange(6.0).npu()
        assert x.device == d and x.is_npu and x.device.type == "npu"
        for t in (torch.empty(3, device="npu"), torch.zeros(3, device="npu"), torch.ones(2, 3, device="npu:0"),
                  torch.rand(4, device="npu"), torch.arange(5, device="npu"), torch.full((2,), 7.0, device="npu"),
                  torch.tensor([1.0, 2.0], device="npu"), torch.ones(3).to("npu")):
            assert t.device == d, t
        y = x * 2 + 1
        assert y.device == d and y.cpu().tolist() == [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]
        z = x.add_(1)
        assert z is x and x.cpu().tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        v = x[2:]
        v.fill_(0)  # a view writes its base
        assert x.cpu().tolist() == [1.0, 2.0, 0.0, 0.0, 0.0, 0.0]
        assert (x + torch.ones(6)).device == d  # a CPU operand joins the npu one, as a scalar would
        assert x.cpu().device.type == "cpu" and type(x.cpu()) is torch.Tensor
        m = torch.nn.Linear(3, 2).npu()
        assert m.weight.device == d and m(torch.ones(1, 3, device="npu")).device == d
        w = torch.ones(2, device="npu", requires_grad=True)
        (g,) = torch.autograd.grad((w * 3).sum(), w)
        assert g.device == d and g.cpu().tolist() == [3.0, 3.0]
        try:
            torch.empty(2, device="npu:1")
        except npugraph.ArgumentError as e:
            assert "device = npu:1: npugraph has one device, npu:0" in str(e)
        else:
            raise AssertionError("npu:1 was accepted")
        print("SCENARIO OK")
    """)


def test_exit_waits_for_autograds_npu_thread():
    # Note [Autograd's npu thread at exit]: the barrier is registered, and it returns once the
    # device's autograd thread has dropped the gradients of every finished backward.
    run("""
        import atexit, gc, weakref
        from npugraph import _npu_device, _npu_device_ext
        before = atexit._ncallbacks()
        compat.install(npu_device=True)
        assert atexit._ncallbacks() == before + 1
        grads = []
        for _ in range(20):
            w = torch.ones(3, device="npu", requires_grad=True)
            (g,) = torch.autograd.grad((w * w).sum(), w)
            grads.append(weakref.ref(g))
            del g
        torch.set_grad_enabled(False)  # the barrier's own backward turns grad on for itself
        assert _npu_device._drain_autograd(torch) is True
        gc.collect()
        assert all(r() is None for r in grads), "a gradient outlived the barrier"
        print("SCENARIO OK")
    """)


def test_npugraph_ops_take_and_give_npu_tensors_bitwise():
    run("""
        compat.install(npu_device=True)
        import torch_npu
        g0 = torch.Generator().manual_seed(0)
        q = torch.randn(1, 4, 1, 16, generator=g0).half()
        k = torch.randn(1, 4, 8, 16, generator=g0).half()
        kw = dict(num_heads=4, input_layout="BNSD", scale=0.25, actual_seq_lengths_kv=[8])
        want, _ = npugraph.npu_fused_infer_attention_score(q, k, k, **kw)
        out, lse = torch_npu.npu_fused_infer_attention_score(q.npu(), k.npu(), k.npu(), **kw)
        assert out.device.type == "npu" and type(want) is torch.Tensor
        assert torch.equal(out.cpu(), want)
        g = torch.npu.NPUGraph()
        qn, kn = q.npu(), k.npu()
        with torch.npu.graph(g, auto_dispatch_capture=True):
            o, _ = torch_npu.npu_fused_infer_attention_score(qn, kn, kn, **kw)
        assert o.device.type == "npu"
        for n in (3, 8, 1):
            g.update(cpu_update_input=[{"actual_seq_lengths_kv": [n]}])
            g.replay()
            torch.npu.synchronize()
            ref, _ = npugraph.npu_fused_infer_attention_score(q, k, k, **dict(kw, actual_seq_lengths_kv=[n]))
            assert torch.equal(o.cpu(), ref), n
        print("SCENARIO OK")
    """)


def test_captured_torch_ops_on_npu_tensors_replay_in_place():
    run("""
        compat.install(npu_device=True)
        x = torch.zeros(4, device="npu")
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g):
            y = x * 2 + 1
            z = torch.empty(4, device="npu")
            z.copy_(y)
        assert y.device.type == "npu" and z.device.type == "npu"
        for value in (3.0, -1.0):
            x.fill_(value)
            g.replay()
            torch.npu.synchronize()
            assert y.cpu().tolist() == [2 * value + 1] * 4 and z.cpu().tolist() == y.cpu().tolist()
        print("SCENARIO OK")
    """)


def test_the_seed_runs_verbatim_on_the_device():
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(npugraph.__file__)))
    env = dict(os.environ, NPUGRAPH_NPU_DEVICE="1",
               PYTHONPATH=os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")]))
    seed = subprocess.run([sys.executable, "-m", "npugraph.compat", os.path.join(HERE, "data", "torch_npu_seed.py")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert seed.returncode == 0, seed.stderr[-3000:]
    assert "equal: True" in seed.stdout and "device='npu:0'" in seed.stdout, seed.stdout[-2000:]


def test_generators_for_the_npu_device_are_cpu_generators():
    run("""
        compat.install(npu_device=True)
        for made in (torch.Generator(device="npu"), torch.Generator("npu:0"),
                     torch.Generator(device=torch.device("npu:0"))):
            assert isinstance(made, torch.Generator) and made.device.type == "cpu", made.device
        g = torch.Generator(device="npu")
        g.manual_seed(5)
        drawn = torch.rand(8, device="npu", generator=g)
        cpu = torch.Generator()
        cpu.manual_seed(5)
        assert drawn.device == torch.device("npu:0") and torch.equal(drawn.cpu(), torch.rand(8, generator=cpu))
        graph = torch.npu.NPUGraph()  # torch_npu's test_register_generator_state_under_inference_mode
        with torch.inference_mode():
            graph.register_generator_state(g)
        with torch.npu.graph(graph):
            out = torch.rand(8, device="npu", generator=g)
        g.manual_seed(0)
        graph.replay()
        torch.npu.synchronize()
        cpu.manual_seed(0)
        assert out.device == torch.device("npu:0") and torch.equal(out.cpu(), torch.rand(8, generator=cpu))
        try:
            torch.Generator(device="npu:1")
            raise AssertionError("npu:1 accepted")
        except npugraph.ArgumentError as e:
            assert "device = 'npu:1': this build has one device, 0 (the cpu)" in str(e), e
        compat.uninstall()  # torch's own class again: no generator for a device named from Python
        try:
            torch.Generator(device="npu")
            raise AssertionError("torch made an npu generator")
        except NotImplementedError as e:
            assert "getNewGenerator" in str(e), e
        except RuntimeError as e:  # torch < 2.5 says it so
            assert "Please register a generator to the PrivateUse1 dispatch key" in str(e), e
        print("SCENARIO OK")
    """)


def test_without_the_option_npu_stays_the_cpu_alias():
    run("""
        compat.install()
        assert torch.ones(2, device="npu").device.type == "cpu"
        assert torch._C._get_privateuse1_backend_name() == "privateuseone"
        print("SCENARIO OK")
    """)


def test_an_lstm_on_the_device_computes_what_torchs_cpu_lstm_does():
    # on a device torch runs the fused cell (_thnn_fused_lstm_cell and its backward, CUDA-only
    # kernels); on the CPU its own unfused cell: the two must agree, forward and gradients
    run("""
        compat.install(npu_device=True)
        torch.manual_seed(0)
        cpu = torch.nn.LSTM(5, 7, 2)
        dev = torch.nn.LSTM(5, 7, 2).npu()
        dev.load_state_dict(cpu.state_dict())
        x = torch.randn(4, 3, 5)
        y_cpu, (h_cpu, c_cpu) = cpu(x)
        y_dev, (h_dev, c_dev) = dev(x.npu())
        assert y_dev.device.type == "npu"
        for a, b in ((y_cpu, y_dev), (h_cpu, h_dev), (c_cpu, c_dev)):
            assert torch.allclose(a, b.cpu(), atol=1e-6), (a - b.cpu()).abs().max()
        (y_cpu.sum() + c_cpu.sum()).backward()
        (y_dev.sum() + c_dev.sum()).backward()
        for (name, p), q in zip(cpu.named_parameters(), dev.parameters()):
            assert torch.allclose(p.grad, q.grad.cpu(), atol=1e-5), (name, (p.grad - q.grad.cpu()).abs().max())
        g = torch.npu.NPUGraph()
        s = torch.npu.Stream()
        with torch.npu.stream(s):
            g.capture_begin()
            y_cap, _ = dev(x.npu())
            g.capture_end()
        g.replay()
        torch.npu.synchronize()
        assert torch.allclose(y_cap.cpu(), y_cpu, atol=1e-6)
        print("SCENARIO OK")
    """)


def test_a_backward_inside_a_capture_is_captured():
    # torch runs the backward on its autograd thread for the device; the capture records it on
    # the capturing stream (Note [A backward inside a capture]): d(sum(w * x * scale))/dw = x * scale
    run("""
        compat.install(npu_device=True)
        import torch_npu
        w = torch.ones(4, device="npu", requires_grad=True)
        x = torch.ones(4, device="npu")
        scaler = torch_npu.npu.amp.GradScaler(init_scale=4.0)
        s = torch_npu.npu.Stream()
        with torch_npu.npu.stream(s):
            scaler.scale((w.half() * x).sum()).backward()  # warm-up, eager
        assert w.grad.cpu().tolist() == [4.0] * 4
        w.grad = None
        g = torch_npu.npu.NPUGraph()
        with torch_npu.npu.stream(s):
            g.capture_begin()
            scaler.scale((w.half() * x).sum()).backward()
            g.capture_end()
        assert w.grad is not None and g.num_tasks >= 1
        for value, want in ((5.0, 20.0), (0.5, 2.0)):
            x.fill_(value)
            g.replay()
            torch_npu.npu.synchronize()
            assert w.grad.cpu().tolist() == [want] * 4, (value, w.grad)
        print("SCENARIO OK")
    """)


def test_a_checkpointed_backward_inside_a_capture_restores_the_generator_where_it_replays():
    # activation checkpointing recomputes the forward in the backward, on torch's autograd thread,
    # restoring the generator first: that restore is recorded too, so a replay after manual_seed(s)
    # draws what the eager run after manual_seed(s) drew
    run("""
        compat.install(npu_device=True)
        import torch.utils.checkpoint

        def fn(x):
            return x * torch.sigmoid(torch.randn(3, device="npu"))

        def grad_of(x):
            out = torch.utils.checkpoint.checkpoint(fn, x, use_reentrant=False, preserve_rng_state=True)
            return torch.autograd.grad(out.sum(), x)[0]

        fn(torch.ones(3, device="npu"))
        torch.npu.manual_seed(7)
        want = grad_of(torch.ones(3, device="npu", requires_grad=True)).cpu()
        torch.npu.manual_seed(7)
        noise = torch.randn(3)
        assert torch.equal(want, torch.sigmoid(noise))  # d(x * sigmoid(n))/dx, the first draw after the seed
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g):
            got = grad_of(torch.ones(3, device="npu", requires_grad=True))
        for _ in range(2):
            torch.npu.manual_seed(7)
            g.replay()
            torch.npu.synchronize()
            assert torch.equal(got.cpu(), want), (got, want)
        print("SCENARIO OK")
    """)


def test_autocast_on_the_device_casts_as_cuda_autocast_does():
    # Note [Autocast on the npu device]: matrix products in float16, range-hungry functions in
    # float32, promoting ops to the promoted type, doubles left alone; the expectation is the same
    # casts made by hand on CPU tensors
    run("""
        compat.install(npu_device=True)
        import torch_npu
        if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4 keeps each device's autocast state
            enabled, dtype = (lambda: torch.is_autocast_enabled("npu")), (lambda: torch.get_autocast_dtype("npu"))
        else:  # torch 2.3: the device module keeps it
            enabled, dtype = torch.npu.is_autocast_enabled, torch.npu.get_autocast_dtype
        torch.manual_seed(0)
        a, b = torch.randn(4, 4), torch.randn(4, 4)
        na, nb = a.npu(), b.npu()
        with torch_npu.npu.amp.autocast(False, cache_enabled=False):
            assert (na @ nb).dtype == torch.float32 and not enabled()
        with torch_npu.npu.amp.autocast(cache_enabled=False):
            assert enabled() and dtype() == torch.float16
            mm = na @ nb
            assert mm.dtype == torch.float16 and torch.equal(mm.cpu(), a.half() @ b.half())
            lin = torch.nn.functional.linear(na, nb)
            assert lin.dtype == torch.float16 and torch.equal(lin.cpu(), torch.nn.functional.linear(a.half(), b.half()))
            e = torch.exp(mm)
            assert e.dtype == torch.float32 and torch.equal(e.cpu(), torch.exp(mm.cpu().float()))
            p = torch.addcmul(na, mm, mm)
            assert p.dtype == torch.float32 and torch.equal(p.cpu(), torch.addcmul(a, mm.cpu().float(), mm.cpu().float()))
            assert (na.double() @ nb.double()).dtype == torch.float64 and (na + 1).dtype == torch.float32
            assert (a @ b).dtype == torch.float32  # CPU tensors: not the npu's autocast
        with torch_npu.npu.amp.autocast(dtype=torch.bfloat16, cache_enabled=False):
            assert (na @ nb).dtype == torch.bfloat16
        w = torch.ones(4, 4, device="npu", requires_grad=True)
        with torch_npu.npu.amp.autocast():
            (na @ w).float().sum().backward()  # the cast is differentiable: float32 gradients
        assert w.grad.dtype == torch.float32 and torch.equal(w.grad.cpu(), a.half().sum(0).float()[:, None].expand(4, 4))
        with torch_npu.npu.amp.autocast():
            try:  # torch's rule: graphed callables cannot keep autocast's cast cache
                torch_npu.npu.make_graphed_callables(lambda t: t * 2, (torch.ones(2, device="npu", requires_grad=True),))
            except RuntimeError as e:
                assert "make_graphed_callables does not support the autocast caching" in str(e), e
            else:
                raise AssertionError("autocast caching was accepted")
        print("SCENARIO OK")
    """)


@needs_extension
def test_the_device_guard_has_one_device_whose_stream_is_the_default():
    # what torch asks a device through the C++ guard (torch.accelerator: torch >= 2.6)
    run("""
        compat.install(npu_device=True)
        if hasattr(torch, "accelerator"):
            assert torch.accelerator.is_available() and torch.accelerator.device_count() == 1
            assert torch.accelerator.current_accelerator() == torch.device("npu")
            assert torch.accelerator.current_device_index() == 0
            s = torch.accelerator.current_stream()
            assert (s.device, s.stream_id) == (torch.device("npu:0"), 0), s
            torch.accelerator.synchronize()  # nothing is ever pending on the host
            try:
                torch.accelerator.set_device_index(1)
                raise AssertionError("npu:1 accepted")
            except RuntimeError as e:
                assert "device = npu:1: npugraph has one device, npu:0" in str(e), e
        print("SCENARIO OK")
    """)


@needs_extension
def test_the_guard_is_built_once_per_torch_and_then_loaded_without_a_compiler(tmp_path):
    # an empty cache: this test compiles the guard (the other tests may load the user's cached one)
    folder = tmp_path / "npugraph" / "torch-ext"
    folder.mkdir(parents=True)
    abi = int(bool(torch._C._GLIBCXX_USE_CXX11_ABI))
    stale = folder / f"npu_device-torch{torch.__version__}-abi{abi}-0123456789abcdef.so"  # an older source's
    other = folder / "npu_device-torch2.0.0-abi1-0123456789abcdef.so"  # another torch's
    stale.write_bytes(b"")
    other.write_bytes(b"")
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    run(f"""
        import os
        from npugraph import _npu_device_ext as ext
        compat.install(npu_device=True)
        path = ext.library_path(torch)
        assert os.path.dirname(path) == {str(folder)!r} and f"torch{{torch.__version__}}-" in path, path
        assert sorted(os.listdir({str(folder)!r})) == sorted([os.path.basename(path), {other.name!r}])
        print("SCENARIO OK")
    """, env=env)
    run("""
        compat.install(npu_device=True)  # the cached library: no compiler needed
        assert (torch.ones(2, device="npu") + 1).cpu().tolist() == [2.0, 2.0]
        print("SCENARIO OK")
    """, env=dict(env, CXX="/nonexistent/c++"))


@needs_extension
def test_without_a_compiler_the_device_is_refused_and_nothing_renamed(tmp_path):
    run("""
        try:
            compat.install(npu_device=True)
            raise AssertionError("installed without a compiler")
        except npugraph.UnsupportedError as e:
            assert f"npu_device=True: torch {torch.__version__} needs npugraph's C++ device guard" in str(e), e
            assert "no C++ compiler was found ($CXX, c++ or g++ on PATH)" in str(e), e
        assert torch._C._get_privateuse1_backend_name() == "privateuseone"
        print("SCENARIO OK")
    """, env={"CXX": "/nonexistent/c++", "XDG_CACHE_HOME": str(tmp_path)})


@needs_extension
def test_a_failing_compiler_is_reported_with_its_command(tmp_path):
    fake = tmp_path / "fake-c++"
    fake.write_text("#!/bin/sh\necho 'fake-c++: no such luck' >&2\nexit 1\n")
    fake.chmod(0o755)
    run(f"""
        import os
        try:
            compat.install(npu_device=True)
            raise AssertionError("installed with a failing compiler")
        except npugraph.UnsupportedError as e:
            assert f"compiling npugraph's C++ device guard for torch {{torch.__version__}} failed ({fake} " in str(e), e
            assert "fake-c++: no such luck" in str(e), e
        assert torch._C._get_privateuse1_backend_name() == "privateuseone"
        assert not any(n.endswith(".so") for n in os.listdir(os.path.join({str(tmp_path)!r}, "npugraph", "torch-ext")))
        print("SCENARIO OK")
    """, env={"CXX": str(fake), "XDG_CACHE_HOME": str(tmp_path)})


@needs_extension
def test_hooks_torch_already_has_are_refused_with_torchs_reason():
    # torch takes PrivateUse1 hooks once per process: a second registration is refused
    run("""
        import ctypes, os
        from npugraph import _npu_device_ext as ext
        path = ext.library_path(torch)
        if not os.path.exists(path):
            ext.build(torch, path, RuntimeError)
        register = ctypes.CDLL(path).npugraph_npu_register_hooks
        register.restype = ctypes.c_char_p
        assert register() is None  # hooks registered before the shim's: someone else's
        try:
            compat.install(npu_device=True)
            raise AssertionError("hooks registered twice")
        except npugraph.UnsupportedError as e:
            assert f"npu_device=True: torch {torch.__version__} refused npugraph's PrivateUse1 hooks: " in str(e), e
            assert "registered once" in str(e) and "frame #" not in str(e), e
        assert torch._C._get_privateuse1_backend_name() == "privateuseone"
        print("SCENARIO OK")
    """)
