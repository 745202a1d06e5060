"""Pinned host memory under the shim (Note [Pinned host memory] in npugraph/_pinned.py):
pin_memory()/is_pinned(), the block cache and its statistics, graph pools that keep captured blocks
from later pin_memory() calls and from host_empty_cache(), their release on reset, and torch_npu's
refusal to capture with expandable pinned segments."""
import gc

import pytest
import torch

import npugraph
from npugraph import npu


@pytest.fixture
def pinned_shim(shim):
    gc.collect()
    npu.host_empty_cache()
    npu.reset_peak_host_memory_stats()
    npu.reset_accumulated_host_memory_stats()
    yield shim
    gc.collect()
    npu.host_empty_cache()


def test_pin_memory_copies_into_a_pinned_block(pinned_shim):
    x = torch.arange(12.0).view(3, 4).t()  # not contiguous: the pinned copy is
    p = x.pin_memory()
    assert p.is_pinned() and not x.is_pinned() and p is not x
    assert torch.equal(p, x) and p.is_contiguous() and p.dtype == x.dtype
    assert p.pin_memory() is p  # already pinned
    assert p[1:].is_pinned()  # a view of a pinned tensor is pinned
    assert not torch.ones(0).is_pinned()
    with pytest.raises(RuntimeError, match="pin_memory: the tensor is on meta: only host"):
        torch.empty(2, device="meta").pin_memory()


def test_freed_blocks_are_cached_counted_and_emptied(pinned_shim):
    base = npu.host_memory_stats()
    p = torch.ones(100).pin_memory()  # 400 bytes: one 512-byte block
    address = p.data_ptr()
    stats = npu.host_memory_stats()
    assert stats["allocations.current"] == base["allocations.current"] + 1
    assert stats["allocated_bytes.current"] == base["allocated_bytes.current"] + 512
    assert stats["num_host_alloc"] == 1 and stats["allocations.peak"] >= 1
    del p
    gc.collect()
    q = torch.zeros(128).pin_memory()  # the same rounded size: the cached block again
    assert q.data_ptr() == address and npu.host_memory_stats()["num_host_alloc"] == 1
    del q
    gc.collect()
    npu.host_empty_cache()
    stats = npu.host_memory_stats()
    assert stats["allocations.current"] == base["allocations.current"]
    assert stats["num_host_free"] == 1 and stats["allocated_bytes.freed"] == 512


def test_a_block_pinned_in_a_capture_stays_with_the_graph_until_reset(pinned_shim):
    g = npu.NPUGraph()
    dst = torch.zeros(64)
    with npu.graph(g):
        src = torch.full((64,), 7.0).pin_memory()
        dst.copy_(src, non_blocking=True)
    captured = src.data_ptr()
    del src
    gc.collect()
    before = npu.host_memory_stats()["allocations.current"]
    npu.host_empty_cache()  # the graph's pool keeps its free block
    assert npu.host_memory_stats()["allocations.current"] == before
    others = [torch.full((64,), -1.0).pin_memory() for _ in range(8)]
    assert captured not in {t.data_ptr() for t in others}
    for _ in range(3):
        dst.zero_()
        g.replay()
        npu.synchronize()
        assert torch.equal(dst, torch.full((64,), 7.0))
    del others
    g.reset()  # the block goes back to the default pool, which host_empty_cache drains
    gc.collect()
    npu.host_empty_cache()
    assert npu.host_memory_stats()["allocations.current"] == 0


def test_expandable_pinned_segments_refuse_a_capture(pinned_shim, monkeypatch):
    monkeypatch.setenv("PYTORCH_NPU_ALLOC_CONF", "expandable_segments:False,pin_memory_expandable_segments:True")
    g = npu.NPUGraph()
    with pytest.raises(RuntimeError, match="pin_memory_expandable_segments:True: pinned host memory in "
                                           "expandable segments cannot be captured"):
        with npu.graph(g):
            pass
    s = npu.Stream()
    with npu.stream(s), pytest.raises(npugraph.StateError, match="pin_memory_expandable_segments"):
        g.capture_begin()
    monkeypatch.setenv("PYTORCH_NPU_ALLOC_CONF", "pin_memory_expandable_segments:False")
    with npu.graph(g):
        torch.ones(2).add_(1)
    g.replay()
    npu.synchronize()


def test_uninstall_gives_torch_its_pinning_back():
    import npugraph.compat as compat

    compat.install()
    assert torch.Tensor.is_pinned is npugraph._pinned.is_pinned
    compat.uninstall()
    assert "is_pinned" not in torch.Tensor.__dict__ and "pin_memory" not in torch.Tensor.__dict__


def test_graphs_sharing_a_pool_keep_its_blocks_until_the_last_one_goes(pinned_shim):
    g1, g2, g3 = npu.NPUGraph(), npu.NPUGraph(), npu.NPUGraph()
    with npu.graph(g1):
        torch.ones(1).add_(1)
    with npu.graph(g2, pool=g1.pool()):
        t = torch.ones(64).pin_memory()  # held by g2's recorded copy
    with npu.graph(g3, pool=g1.pool()):  # another handle of the same pool
        u = torch.ones(64).pin_memory()
    del t, u
    g2.reset()  # its block is free, in the pool g3 still uses: host_empty_cache leaves it
    gc.collect()
    npu.host_empty_cache()
    assert npu.host_memory_stats()["allocations.current"] == 2
    del g3  # destroyed without a reset: the pool's last user is gone, its blocks are released
    gc.collect()
    npu.host_empty_cache()
    assert npu.host_memory_stats()["allocations.current"] == 0


def test_pin_memory_refuses_sparse_tensors_naming_the_layout(pinned_shim):
    sparse = torch.eye(3).to_sparse()
    assert not sparse.is_pinned()
    with pytest.raises(RuntimeError, match="layout is torch.sparse_coo: npugraph pins strided"):
        sparse.pin_memory()


def test_threads_pinning_at_once_share_the_cache_without_losing_a_block(pinned_shim):
    import threading

    errors = []

    def pin_many(value):
        try:
            for _ in range(300):
                p = torch.full((100,), float(value)).pin_memory()
                if not (p.is_pinned() and bool((p == value).all())):
                    errors.append(value)
                del p
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=pin_many, args=(v,)) for v in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and not any(t.is_alive() for t in threads), errors
    gc.collect()
    stats = npu.host_memory_stats()
    assert stats["allocations.current"] <= 3  # at most one block per thread in use at once, all cached
    npu.host_empty_cache()
    assert npu.host_memory_stats()["allocations.current"] == 0


def test_factories_with_pin_memory_true_give_pinned_tensors(pinned_shim):
    x = torch.arange(6.0).view(2, 3).t()  # strides (1, 3): *_like keeps them
    cases = {
        "empty": lambda **kw: torch.empty(100, **kw),
        "zeros": lambda **kw: torch.zeros(2, 3, dtype=torch.float64, **kw),
        "ones": lambda **kw: torch.ones(5, dtype=torch.int32, **kw),
        "full": lambda **kw: torch.full((4,), 2.5, **kw),
        "tensor": lambda **kw: torch.tensor([[1, 2], [3, 4]], **kw),
        "arange": lambda **kw: torch.arange(7, **kw),
        "linspace": lambda **kw: torch.linspace(0, 1, 5, **kw),
        "eye": lambda **kw: torch.eye(3, **kw),
        "empty_strided": lambda **kw: torch.empty_strided((2, 2), (1, 4), **kw),
        "zeros_like": lambda **kw: torch.zeros_like(x, **kw),
        "full_like": lambda **kw: torch.full_like(x, -1.0, **kw),
        "hann_window": lambda **kw: torch.hann_window(4, **kw),
        "new_ones": lambda **kw: x.new_ones((3,), **kw),
        "new_full": lambda **kw: x.new_full((2, 2), 9.0, **kw),
    }
    for name, make in cases.items():
        pinned, plain = make(pin_memory=True), make()
        assert pinned.is_pinned() and not plain.is_pinned(), name
        assert pinned.dtype == plain.dtype and pinned.shape == plain.shape, name
        assert pinned.stride() == plain.stride(), name
        if not name.startswith("empty"):
            assert torch.equal(pinned, plain), name
    assert torch.equal(torch.full((4,), 2.5, pin_memory=True), torch.tensor([2.5, 2.5, 2.5, 2.5]))
    assert torch.zeros_like(x, pin_memory=True).stride() == (1, 3)
    assert not torch.zeros(3, pin_memory=False).is_pinned()
    torch.manual_seed(7)
    drawn = torch.rand(8, pin_memory=True)
    torch.manual_seed(7)
    assert drawn.is_pinned() and torch.equal(drawn, torch.rand(8))  # the same draws
    leaf = torch.ones(3, requires_grad=True, pin_memory=True)
    assert leaf.is_pinned() and leaf.requires_grad and leaf.is_leaf


def test_factory_pinned_blocks_are_counted(pinned_shim):
    base = npu.host_memory_stats()
    a = torch.empty(100, pin_memory=True)  # 400 bytes: one 512-byte block
    b = torch.zeros(200, dtype=torch.float64, pin_memory=True)  # 1600 bytes: 2048
    stats = npu.host_memory_stats()
    assert stats["allocations.current"] - base["allocations.current"] == 2
    assert stats["allocated_bytes.current"] - base["allocated_bytes.current"] == 512 + 2048
    assert stats["num_host_alloc"] == 2
    del a, b
    gc.collect()
    npu.host_empty_cache()
    stats = npu.host_memory_stats()
    assert stats["allocations.current"] == base["allocations.current"]
    assert stats["num_host_free"] == 2 and stats["allocated_bytes.freed"] == 512 + 2048


def test_factory_pin_memory_refuses_what_cannot_be_pinned(pinned_shim):
    with pytest.raises(RuntimeError, match=r"empty\(\.\.\., pin_memory=True\): the tensor is on meta: only "
                                           r"host \(CPU\) tensors can be pinned"):
        torch.empty(2, device="meta", pin_memory=True)
    with pytest.raises(RuntimeError, match=r"zeros\(\.\.\., pin_memory=True\): the tensor's layout is "
                                           r"torch.sparse_coo: npugraph pins strided"):
        torch.zeros(2, 2, layout=torch.sparse_coo, pin_memory=True)


def test_a_factory_pinned_inside_a_capture_is_in_the_graphs_pool(pinned_shim):
    g = npu.NPUGraph()
    dst = torch.zeros(64)
    with npu.graph(g):
        src = torch.full((64,), 7.0, pin_memory=True)
        dst.copy_(src, non_blocking=True)
    assert src.is_pinned()
    captured = src.data_ptr()
    del src
    gc.collect()
    others = [torch.full((64,), -1.0, pin_memory=True) for _ in range(4)]
    assert captured not in {t.data_ptr() for t in others}
    g.replay()
    npu.synchronize()
    assert torch.equal(dst, torch.full((64,), 7.0))
    del others
    g.reset()


@pytest.mark.parametrize("workers", [0, 2])
def test_a_dataloader_with_pin_memory_yields_pinned_batches(pinned_shim, workers):
    from torch.utils.data import DataLoader, TensorDataset

    data = TensorDataset(torch.arange(20.0).view(10, 2), torch.arange(10))
    plain = list(DataLoader(data, batch_size=4))
    pinned = list(DataLoader(data, batch_size=4, pin_memory=True, num_workers=workers))
    assert len(pinned) == len(plain) == 3
    for got, want in zip(pinned, plain):
        assert all(t.is_pinned() for t in got) and not any(t.is_pinned() for t in want)
        assert all(torch.equal(g, w) for g, w in zip(got, want))
    assert torch.equal(pinned[2][1], torch.tensor([8, 9]))
    assert not any(t.is_pinned() for t in next(iter(DataLoader(data, batch_size=4, pin_memory=False))))


def test_uninstall_gives_torch_its_factories_and_dataloader_back():
    import torch.utils.data.dataloader as loading

    import npugraph.compat as compat

    init, empty = loading._BaseDataLoaderIter.__init__, torch.empty
    compat.install()
    assert torch.empty(2, pin_memory=True).is_pinned()
    assert loading._BaseDataLoaderIter.__init__ is not init and "new_zeros" in torch.Tensor.__dict__
    compat.uninstall()
    assert torch.empty is empty and loading._BaseDataLoaderIter.__init__ is init
    assert "new_zeros" not in torch.Tensor.__dict__
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError):  # torch's own refusal: no CUDA to pin for
            torch.empty(2, pin_memory=True)


def test_host_stats_have_torch_npus_keys(pinned_shim):
    # torch_npu master's THNPModule_npu_hostMemoryStats (torch 2.x's HostStats): four Stats, two
    # DurationStats, two counters
    stats = [f"{n}.{f}" for n in ("allocations", "allocated_bytes", "active_requests", "active_bytes")
             for f in ("current", "peak", "allocated", "freed")]
    times = [f"{n}.{f}" for n in ("host_alloc_time", "host_free_time") for f in ("total", "max", "min", "count", "avg")]
    assert set(npu.host_memory_stats()) == set(stats + times + ["num_host_alloc", "num_host_free"])


def test_host_stats_count_blocks_handed_out_and_time_system_calls(pinned_shim):
    a = torch.ones(100).pin_memory()  # 400 bytes: a new 512-byte block
    b = torch.ones(1000).pin_memory()  # 4000 bytes: a new 4096-byte block
    del a
    gc.collect()  # a's block is cached: no longer handed out
    c = torch.zeros(10).pin_memory()  # 40 bytes: a's cached block handed out again
    s = npu.host_memory_stats()
    assert [s["active_requests." + f] for f in ("current", "peak", "allocated", "freed")] == [2, 2, 3, 1]
    assert [s["active_bytes." + f] for f in ("current", "peak", "allocated", "freed")] == [4608, 4608, 5120, 512]
    assert [s["allocations." + f] for f in ("current", "peak", "allocated", "freed")] == [2, 2, 2, 0]
    assert s["host_alloc_time.count"] == s["num_host_alloc"] == 2
    assert s["host_alloc_time.min"] <= s["host_alloc_time.avg"] <= s["host_alloc_time.max"] <= s["host_alloc_time.total"]
    assert s["host_alloc_time.avg"] == s["host_alloc_time.total"] // 2
    assert [s["host_free_time." + f] for f in ("total", "max", "min", "count", "avg")] == [0, 0, 0, 0, 0]
    del b, c
    gc.collect()
    npu.host_empty_cache()
    s = npu.host_memory_stats()
    assert [s["active_requests." + f] for f in ("current", "peak", "allocated", "freed")] == [0, 2, 3, 3]
    assert s["active_bytes.current"] == 0 and s["active_bytes.freed"] == 5120
    assert s["allocations.current"] == 0 and s["allocations.freed"] == 2
    assert s["host_free_time.count"] == s["num_host_free"] == 2
    npu.reset_peak_host_memory_stats()  # peak -> current; a time's max and min -> 0
    s = npu.host_memory_stats()
    assert s["active_requests.peak"] == 0 and s["active_bytes.peak"] == 0
    assert s["host_alloc_time.max"] == s["host_alloc_time.min"] == 0 and s["host_alloc_time.count"] == 2
    npu.reset_accumulated_host_memory_stats()  # allocated, freed, a time's total and count -> 0
    s = npu.host_memory_stats()
    assert s["active_requests.allocated"] == s["active_requests.freed"] == 0
    assert s["host_alloc_time.count"] == s["host_alloc_time.total"] == s["host_alloc_time.avg"] == 0
    nested = npu.host_memory_stats_as_nested_dict()
    assert nested["active_requests"] == {"current": 0, "peak": 0, "allocated": 0, "freed": 0}
    assert nested["num_host_alloc"] == 0 and set(nested["host_free_time"]) == {"total", "max", "min", "count", "avg"}
