"""torch.cuda's memory API on npugraph's allocator: memory_stats with torch's keys (checked against
the sizes the allocator documents: blocks round up to 512 B under 1 MiB and to 64 KiB above,
torch's small pool is under 1 MiB), memory_snapshot in torch's shape, MemPool and use_mem_pool."""
import gc
import threading

import numpy as np
import pytest

import npugraph
from npugraph import npu

STATS = ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
         "active_bytes", "inactive_split_bytes", "requested_bytes")
POOLS = ("all", "small_pool", "large_pool")
METRICS = ("current", "peak", "allocated", "freed")
EVENTS = ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free")


def rounded(nbytes):
    unit = 512 if nbytes < (1 << 20) else 64 * 1024
    return max(unit, -(-nbytes // unit) * unit)


def delta(after, before, key):
    return after[key] - before[key]


def test_every_key_torch_documents():
    s = npu.memory_stats()
    want = {f"{a}.{p}.{m}" for a in STATS for p in POOLS for m in METRICS}
    want |= set(EVENTS) | {"max_split_size", "pools"}
    want |= {f"oversize_{k}.{m}" for k in ("allocations", "segments") for m in METRICS}
    assert set(s) == want
    assert all(isinstance(v, int) for v in s.values())
    assert s["max_split_size"] == -1


@pytest.mark.parametrize("nbytes,pool", [(1000 * 7 + 4, "small_pool"), (3 * (1 << 20) + 4, "large_pool")])
def test_an_allocation_counts_in_its_pool_type(nbytes, pool):
    other = "large_pool" if pool == "small_pool" else "small_pool"
    before = npu.memory_stats()
    x = npugraph.empty(nbytes // 4, dtype="float32")
    mid = npu.memory_stats()
    size = rounded(nbytes)
    for p in ("all", pool):
        assert delta(mid, before, f"allocation.{p}.current") == 1
        assert delta(mid, before, f"allocation.{p}.allocated") == 1
        assert delta(mid, before, f"allocated_bytes.{p}.current") == size
        assert delta(mid, before, f"requested_bytes.{p}.current") == nbytes
        assert delta(mid, before, f"active_bytes.{p}.current") == size
    assert delta(mid, before, f"allocation.{other}.current") == 0
    # a new segment, or a cached block of that size reused: the counters agree with the events
    assert delta(mid, before, "segment.all.allocated") == delta(mid, before, "num_device_alloc")
    assert delta(mid, before, f"reserved_bytes.{pool}.allocated") == size * delta(mid, before, "num_device_alloc")
    assert mid[f"allocated_bytes.{pool}.peak"] >= mid[f"allocated_bytes.{pool}.current"]
    del x
    after = npu.memory_stats()
    assert delta(after, before, f"allocation.{pool}.current") == 0
    assert delta(after, mid, f"allocation.{pool}.freed") == 1
    assert delta(after, mid, f"allocated_bytes.{pool}.freed") == size
    assert delta(after, mid, "segment.all.current") == 0  # the block stays cached


def test_empty_cache_returns_the_cached_segments():
    x = npugraph.empty(12345, dtype="float32")
    del x
    # Earlier tests' tensors that queued work or a garbage cycle still holds become free blocks only
    # when that work ends or the collector runs, and empty_cache synchronizes first: settle both
    # before counting what is cached, and keep the collector out of the count.
    gc.collect()
    npu.synchronize()
    gc.disable()
    try:
        before = npu.memory_stats()
        cached = [s for s in npu.memory_snapshot() if s["blocks"][0]["state"] == "inactive"
                  and s["segment_pool_id"] == (0, 0)]
        assert cached
        npu.empty_cache()
        after = npu.memory_stats()
    finally:
        gc.enable()
    assert delta(after, before, "num_sync_all_streams") == 1
    assert delta(after, before, "num_device_free") == len(cached)
    assert delta(after, before, "reserved_bytes.all.freed") == sum(s["total_size"] for s in cached)


def test_peaks_and_accumulated_totals_reset():
    x = npugraph.empty(1 << 20, dtype="float32")
    del x
    npu.reset_peak_memory_stats()
    s = npu.memory_stats()
    for stat in ("allocation", "allocated_bytes", "segment", "reserved_bytes", "requested_bytes"):
        assert s[f"{stat}.all.peak"] == s[f"{stat}.all.current"], stat
    npu.reset_accumulated_memory_stats()
    s = npu.memory_stats()
    assert all(s[f"{a}.{p}.{m}"] == 0 for a in STATS for p in POOLS for m in ("allocated", "freed"))
    assert all(s[e] == 0 for e in EVENTS)


def test_out_of_memory_is_counted():
    before = npu.memory_stats()
    with pytest.raises(npugraph.ResourceError, match="would exceed allowed memory"):
        npugraph.empty(1 << 45, dtype="float32")
    after = npu.memory_stats()
    assert delta(after, before, "num_alloc_retries") == 1  # the cache was emptied and it retried
    assert delta(after, before, "num_ooms") == 1


def _address(a):
    return a.__array_interface__["data"][0]


def test_snapshot_shows_live_and_cached_blocks_in_torchs_shape():
    x = npugraph.empty(777, dtype="float32")  # 3108 bytes
    segs = {s["address"]: s for s in npu.memory_snapshot()}
    seg = segs[_address(x)]
    assert seg["segment_type"] == "small" and seg["segment_pool_id"] == (0, 0)
    assert seg["total_size"] == seg["allocated_size"] == seg["active_size"] == rounded(3108)
    assert seg["requested_size"] == 3108 and seg["device"] == 0 and seg["frames"] == []
    assert seg["blocks"] == [{"address": _address(x), "size": rounded(3108), "requested_size": 3108,
                              "state": "active_allocated", "frames": []}]
    addr = _address(x)
    del x
    seg = {s["address"]: s for s in npu.memory_snapshot()}[addr]
    assert seg["blocks"][0]["state"] == "inactive" and seg["allocated_size"] == 0
    addresses = [s["address"] for s in npu.memory_snapshot()]
    assert addresses == sorted(addresses)


def test_mem_pool_and_use_mem_pool():
    pool = npu.MemPool()
    assert isinstance(pool.id, tuple) and pool.id[0] == 0 and pool.id != (0, 0)
    with npu.use_mem_pool(pool):
        x = npugraph.empty(999, dtype="float32")
        seen = {}
        t = threading.Thread(target=lambda: seen.update(y=npugraph.empty(999, dtype="float32")))
        t.start()
        t.join()
    z = npugraph.empty(999, dtype="float32")
    mine = {s["address"] for s in pool.snapshot()}
    assert _address(x) in mine
    assert _address(seen["y"]) not in mine  # another thread keeps its own choice
    assert _address(z) not in mine  # the block ended: the default pool again
    assert all(s["segment_pool_id"] == pool.id for s in pool.snapshot())
    g = npu.NPUGraph()
    with npu.graph(g, pool=pool):  # a MemPool is a pool handle for captures too
        w = npugraph.zeros(16, dtype="float32")
    g.replay()
    assert _address(w) in {s["address"] for s in pool.snapshot()}
    assert np.all(w == 0)


def test_mem_pool_errors_name_the_value():
    with pytest.raises(npugraph.UnsupportedError, match="MemPool: allocator = 'mine': npugraph has one"):
        npu.MemPool(allocator="mine")
    with pytest.raises(TypeError, match=r"use_mem_pool: pool = 3: expected an npugraph.npu.MemPool"):
        with npu.use_mem_pool(3):
            pass


def _mem_available():
    with open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no MemAvailable in /proc/meminfo")


def test_mem_get_info_is_the_hosts_available_and_physical_memory():
    import os

    before = _mem_available()
    free, total = npu.mem_get_info()
    after = _mem_available()
    assert total == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert total == npu.get_device_properties(0).total_memory
    slack = 256 << 20  # other processes allocate between the three reads
    assert min(before, after) - slack <= free <= max(before, after) + slack and 0 < free <= total
    assert npu.mem_get_info("npu:0")[1] == total
    with pytest.raises(npugraph.ArgumentError, match="npu:1"):
        npu.mem_get_info("npu:1")
