#!/usr/bin/env python3
"""Writes the hand-made seed corpora of tests/fuzz/corpus/<harness>/ (run it after changing how a
harness decodes its input; the files are committed).

runtime_seq_fuzzer: each seed is a program spelled with the opcodes and operand order of
one_op() in runtime_seq_fuzzer.cpp. Operand conventions: stream 0/1 = the two streams, 2 = the
current stream; graph 0/1; handle 0-3; event 0/1; a "chance" byte of 0 takes the common path and
0xff the rare one.

fia_args_fuzzer: byte 0 picks the mode (0 eager, 2 `.out`, 5 shape functions, 6 graph: eager vs
captured vs updated), byte 1 >= 208 picks the simple kernel, bytes 2-5 seed the tensor contents,
byte 11 picks the layout (index into kLayouts) and byte 8 >= 216 makes key/value int8; every other
byte 0 takes the common, valid path (see decode_case()). The remaining bytes are left to the
fuzzer; a zero tail decodes to a small valid call.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# ---- runtime_seq_fuzzer --------------------------------------------------------------------
CAPTURE_BEGIN, CAPTURE_END, GROUP_BEGIN, GROUP_END, SCALE = 0, 1, 2, 3, 4
ADD, FILL, COPY, HOST, UPDATE_BEGIN, UPDATE_END, UPDATE_ABORT = 6, 7, 8, 9, 10, 12, 13
REPLAY, RESET, EXT_RECORD, EXT_WAIT, EXT_RESET, EV_RECORD, WAIT = 14, 16, 17, 18, 19, 20, 21
SYNC, DEVICE_SYNC, QUERY, SET_CURRENT, CAPTURE_SCOPE, GROUP_SCOPE = 22, 23, 24, 25, 26, 27
UPDATE_SCOPE, RECORD_EVENTS, DEADLINE, DROP_GRAPH, NEW_STREAM, ALLOC = 28, 29, 30, 31, 32, 33
GRAPHDEF, FAILING_HOST, EMPTY_CACHE, LAUNCH_UPDATE, HELPER_THREAD, MISMATCH = 34, 35, 36, 37, 38, 39


def capture_begin(g, s, mode=0, pool=0, pool_graph=0):
    b = [CAPTURE_BEGIN, g, s, mode, pool]
    return b + ([pool_graph] if pool == 2 else [])


def capture_end(g, s=None):  # None: the stream the capture began on
    return [CAPTURE_END, g, 0xff] if s is None else [CAPTURE_END, g, 0, s]


def group_begin(s): return [GROUP_BEGIN, s]
def group_end(s, h): return [GROUP_END, s, h]
def scale(s, x, y, alpha=8): return [SCALE, s, x, y, alpha]
def add(s, a, b, c): return [ADD, s, a, b, c]
def fill(s, t, v): return [FILL, s, t, v]
def copy(s, dst, src): return [COPY, s, dst, src]
def host(s, failing=None): return [HOST, s, 0] if failing is None else [HOST, s, 0xff, failing]


def update_begin(s, h, launch=False, batched_with=None):
    if batched_with is None:
        return [UPDATE_BEGIN, s, 1 if launch else 0, 0, h]
    return [UPDATE_BEGIN, s, 1 if launch else 0, 0xff, h, batched_with]


def update_end(s, record_event=None):
    return [UPDATE_END, s, 0] if record_event is None else [UPDATE_END, s, 0xff, record_event]


def update_abort(s): return [UPDATE_ABORT, s]
def replay(g, s): return [REPLAY, g, s]
def reset(g): return [RESET, g]
def ext_record(s, e): return [EXT_RECORD, s, e]
def ext_wait(s, e): return [EXT_WAIT, s, e]
def ext_reset(s, e): return [EXT_RESET, s, e]
def ev_record(s, e): return [EV_RECORD, s, e]
def wait_event(s, e): return [WAIT, s, 1, e]
def wait_stream(s, other): return [WAIT, s, 0, other]
def sync(s, ms=5): return [SYNC, s, 0, ms]
def sync_blocking(s): return [SYNC, s, 0xff]
def device_sync(): return [DEVICE_SYNC]
def query(kind, *operands): return [QUERY, kind, *operands]
def set_current(i): return [SET_CURRENT, i]


def capture_scope(g, body, mode=0, side_stream=False, s=0, propagate=False, explicit_end=False):
    b = [CAPTURE_SCOPE, g, mode, 0]
    b += [0xff] if side_stream else [0, s]
    b += [0xff if propagate else 0, len(body) - 1]
    for op in body:
        b += op
    return b + ([] if side_stream else [0xff if explicit_end else 0])


def group_scope(s, h, body, propagate=False, keep=True):
    b = [GROUP_SCOPE, s, h, 0xff if propagate else 0, len(body) - 1]
    for op in body:
        b += op
    return b + [0 if keep else 0xff]


def update_scope(s, h, body, launch=False, propagate=False, explicit_end=False):
    b = [UPDATE_SCOPE, s, 1 if launch else 0, h, 0xff if propagate else 0, len(body) - 1]
    for op in body:
        b += op
    return b + [0xff if explicit_end else 0]


def record_events(s, two=True): return [RECORD_EVENTS, s, 1 if two else 0]
def deadline(e, ms): return [DEADLINE, e, ms]
def drop_graph(g): return [DROP_GRAPH, g, 1]
def swap_graphs(): return [DROP_GRAPH, 0, 0]
def new_stream(i, threads=None): return [NEW_STREAM, i, 0] if threads is None else [NEW_STREAM, i, 0xff, threads - 1]
def alloc(s, big=True): return [ALLOC, s, 1 if big else 0]
def failing_host(s, kind): return [FAILING_HOST, s, kind]
def launch_update(s, h, alpha=3): return [LAUNCH_UPDATE, s, h, alpha]
def helper_thread(s): return [HELPER_THREAD, s]
def mismatch(s): return [MISMATCH, s]


def graphdef(nodes, s=0, twice=False):
    """nodes: list of (is_host, [deps])."""
    b = [GRAPHDEF, len(nodes) - 1]
    for is_host, deps in nodes:
        b += [len(deps)] + list(deps) + [1 if is_host else 0]
    return b + [s, 1 if twice else 0]


# The seed example: capture a gated task group, update it, record the gate, replay.
SEED_EXAMPLE = [
    capture_begin(0, 0),
    ext_wait(0, 0), ext_reset(0, 0),
    group_begin(0), scale(0, 0, 1), add(0, 1, 0, 2), group_end(0, 0),
    capture_end(0),
    update_begin(1, 0), scale(1, 0, 1, 16), add(1, 1, 0, 2), update_end(1),
    ext_record(1, 0),
    wait_stream(0, 1), replay(0, 0), sync(0), device_sync(),
]

RUNTIME_SEEDS = {
    "seed_example": SEED_EXAMPLE,
    "seed_example_scopes": [
        capture_scope(0, [ext_wait(2, 0), ext_reset(2, 0),
                          group_scope(2, 0, [scale(2, 0, 1), add(2, 1, 0, 2)])]),
        update_scope(1, 0, [scale(2, 0, 1, 16), add(2, 1, 0, 2)]),
        ext_record(1, 0), replay(0, 0), sync(0),
    ],
    "launch_order_update": [
        capture_begin(0, 0), group_begin(0), scale(0, 0, 1), group_end(0, 0), capture_end(0),
        replay(0, 1), update_begin(0, 0, launch=True), scale(0, 0, 1, 40), update_end(0),
        replay(0, 1), launch_update(0, 0), replay(0, 1), sync(1),
    ],
    "batched_update": [
        capture_begin(0, 0), group_begin(0), scale(0, 0, 1), group_end(0, 0),
        group_begin(0), add(0, 0, 1, 2), group_end(0, 1), capture_end(0),
        update_begin(1, 0, batched_with=1), scale(1, 0, 1, 2), add(1, 0, 1, 2), update_end(1, 1),
        ext_wait(0, 1), replay(0, 0), sync(0),
    ],
    "update_too_few_and_too_many": [
        capture_begin(0, 0), group_begin(0), scale(0, 0, 1), add(0, 1, 1, 2), group_end(0, 0),
        capture_end(0),
        update_begin(1, 0), scale(1, 0, 1), update_end(1),
        update_begin(1, 0), scale(1, 0, 1), add(1, 1, 1, 2), scale(1, 0, 1), update_end(1),
        update_begin(1, 0), add(1, 0, 1, 2), update_abort(1),
        update_begin(1, 0), fill(1, 0, 3), update_end(1), replay(0, 1), sync(1),
    ],
    "update_identity_mismatch": [
        capture_begin(0, 0), group_begin(0), scale(0, 0, 1), group_end(0, 0), capture_end(0),
        update_begin(1, 0), mismatch(2), update_end(1), replay(0, 1), sync(1),
    ],
    "update_stream_busy": [
        capture_begin(0, 0), group_begin(0), scale(0, 0, 1), group_end(0, 0), capture_end(0),
        update_begin(1, 0), update_begin(0, 0), update_begin(1, 0), capture_begin(1, 1),
        update_abort(1), update_abort(0),
    ],
    "collapsed_record": [
        ext_record(0, 0), ext_record(0, 0), ext_wait(1, 0), ext_wait(1, 0), sync(1, 7),
        query(4, 0), ext_record(0, 0), sync(1),
    ],
    "stalled_wait_blocking_sync": [
        deadline(0, 1), ext_wait(0, 0), host(0), sync_blocking(0), ext_record(1, 0), sync(0),
    ],
    "stalled_wait_through_event": [
        ext_wait(0, 0), ev_record(0, 0), wait_event(1, 0), host(1), sync_blocking(1),
        query(2, 0), ext_record(1, 0), sync(0), sync(1),
    ],
    "stalled_replay": [
        capture_begin(0, 0), ext_wait(0, 1), scale(0, 0, 1), capture_end(0),
        deadline(1, 0), replay(0, 1), replay(0, 1), sync_blocking(1), ext_record(0, 1), sync(1),
    ],
    "captured_record_and_reset": [
        capture_begin(0, 1), ext_record(1, 0), ext_reset(1, 0), ext_record(1, 1), capture_end(0),
        replay(0, 0), replay(0, 0), ext_wait(1, 1), ext_wait(1, 1), sync(1), sync(0),
    ],
    "record_events_batch": [
        record_events(0), ext_wait(1, 0), ext_wait(1, 1), sync(1),
        capture_begin(0, 0), record_events(0), capture_end(0), replay(0, 1), sync(1),
    ],
    "fork_join_capture": [
        ev_record(0, 0), capture_begin(0, 0), ev_record(0, 0), wait_event(1, 0), scale(1, 0, 1),
        ev_record(1, 1), wait_event(0, 1), add(0, 0, 1, 2), capture_end(0), replay(0, 0),
        replay(0, 1), sync(0), sync(1),
    ],
    "unjoined_fork": [
        capture_begin(0, 0), ev_record(0, 0), wait_event(1, 0), scale(1, 0, 1), capture_end(0),
        replay(0, 0), sync(0),
    ],
    "capture_errors": [
        capture_begin(0, 0), capture_begin(1, 0), capture_end(0, 1), sync(0), device_sync(),
        query(0, 0), query(1, 0), capture_end(0), replay(1, 0), capture_begin(0, 0),
    ],
    "capture_modes": [
        capture_begin(0, 0, mode=1), sync(1), helper_thread(1), capture_end(0),
        capture_begin(1, 1, mode=2), sync(0), query(0, 0), capture_end(1), replay(0, 0),
        replay(1, 1), sync(0), sync(1),
    ],
    "shared_pool": [
        capture_begin(0, 0, pool=1), alloc(0), scale(0, 0, 4), capture_end(0),
        capture_begin(1, 1, pool=2, pool_graph=0), alloc(1), add(1, 4, 5, 5), capture_end(1),
        replay(0, 0), replay(1, 0), reset(0), replay(1, 1), sync(0), sync(1),
    ],
    "group_errors": [
        group_begin(0), group_end(0, 0), capture_begin(0, 0), group_begin(0), group_begin(0),
        fill(0, 0, 1), copy(0, 1, 0), host(0), ext_record(0, 0), ev_record(0, 0),
        scale(0, 0, 1), group_end(1, 0), group_end(0, 0), group_begin(0), capture_end(0),
    ],
    "group_scope_abandoned": [
        capture_begin(0, 0),
        group_scope(0, 0, [scale(0, 0, 1), fill(0, 1, 2), scale(0, 1, 2)], propagate=True),
        group_scope(0, 1, [add(0, 0, 1, 2)], keep=False), capture_end(0),
        update_begin(1, 0), scale(1, 0, 1), update_end(1), replay(0, 1), sync(1),
    ],
    "capture_scope_exception": [
        capture_scope(0, [scale(2, 0, 1), sync(2), add(2, 0, 1, 2)], propagate=True),
        capture_scope(0, [scale(2, 0, 1)], side_stream=True), replay(0, 1), sync(1),
    ],
    "update_scope_exception": [
        capture_begin(0, 0), group_begin(0), scale(0, 0, 1), add(0, 0, 1, 2), group_end(0, 0),
        capture_end(0),
        update_scope(1, 0, [scale(2, 0, 1), fill(2, 0, 1)], propagate=True),
        update_scope(1, 0, [scale(2, 0, 1), add(2, 0, 1, 2)], launch=True, explicit_end=True),
        replay(0, 0), sync(0),
    ],
    "stale_handle": [
        capture_begin(0, 0), group_begin(0), scale(0, 0, 1), group_end(0, 0), capture_end(0),
        reset(0), update_begin(1, 0), replay(0, 1), query(6, 0),
        capture_begin(0, 0), group_begin(0), scale(0, 0, 1), group_end(0, 1), capture_end(0),
        drop_graph(0), update_begin(1, 1), update_begin(1, 0),
    ],
    "reset_during_replays": [
        capture_begin(0, 0), ext_wait(0, 0), scale(0, 0, 1), capture_end(0),
        replay(0, 1), replay(0, 1), reset(0), ext_record(0, 0), ext_record(0, 0), sync(1),
    ],
    "drop_graph_in_flight": [
        capture_begin(0, 0), scale(0, 0, 1), host(0), capture_end(0), replay(0, 1),
        drop_graph(0), swap_graphs(), replay(1, 1), sync(1),
    ],
    "drop_stream_mid_work": [
        ext_wait(0, 0), scale(0, 0, 1), new_stream(0), sync(0), capture_begin(0, 1),
        new_stream(1), scale(0, 0, 1), capture_end(0), new_stream(1, threads=2), replay(0, 1),
        sync(1),
    ],
    "drop_stream_updating": [
        capture_begin(0, 0), group_begin(0), scale(0, 0, 1), group_end(0, 0), capture_end(0),
        update_begin(1, 0), new_stream(1), update_begin(0, 0), update_abort(0),
    ],
    "task_errors": [
        failing_host(0, 1), failing_host(0, 2), host(0, failing=2), sync(0), sync(0),
        capture_begin(0, 1), failing_host(1, 1), capture_end(0), replay(0, 0), sync(0),
    ],
    "graphdef": [
        graphdef([(True, []), (False, [0]), (True, [0, 1]), (False, [2])], s=0, twice=True),
        graphdef([(True, [3])], s=1), sync(0), sync(1),
    ],
    "events_timing": [
        ev_record(0, 0), scale(0, 0, 1), ev_record(0, 1), query(3), sync(0), query(3),
        query(1, 0), query(2, 1), wait_event(1, 0), wait_stream(1, 0), sync(1),
    ],
    "alloc_and_copy": [
        alloc(0), alloc(0, big=False), fill(0, 4, 2), copy(0, 4, 0), copy(0, 5, 0),
        add(0, 4, 5, 4), scale(0, 4, 5), [EMPTY_CACHE], sync(0),
    ],
    "current_stream_ops": [
        set_current(1), scale(2, 0, 1), capture_begin(0, 2), scale(2, 0, 1), capture_end(0, 2),
        set_current(0), replay(0, 2), sync(2), query(5, 0), query(7, 0),
    ],
    "open_everything": [
        capture_begin(0, 0), group_begin(0), scale(0, 0, 1), capture_begin(1, 1),
        update_begin(1, 0), ext_wait(1, 0),
    ],
}

# ---- fia_args_fuzzer -----------------------------------------------------------------------
LAYOUTS = ["BSH", "BSND", "BNSD", "NSD", "TND", "NTD", "BNSD_BSND", "BSH_BNSD", "BSND_BNSD",
           "NTD_TND", "TND_NTD", "BSH_NBSD", "BSND_NBSD", "BNSD_NBSD"]


def fia_seed(mode, layout, simple=False, int8=False, seed=1, tail=64, tail_bytes=None):
    b = bytearray(12 + tail)
    b[0] = mode
    b[1] = 0xff if simple else 0
    b[2:6] = seed.to_bytes(4, "little")
    b[8] = 0xff if int8 else 0
    b[11] = LAYOUTS.index(layout)
    for i, v in (tail_bytes or {}).items():
        b[12 + i] = v
    return bytes(b)


def fia_seeds():
    seeds = {}
    for name in LAYOUTS:  # graph mode per layout: eager vs replayed vs updated
        seeds[f"graph_{name}"] = fia_seed(6, name, seed=LAYOUTS.index(name) + 1)
    for mode, what in ((0, "eager"), (2, "out"), (5, "shapes")):
        for name in ("BSH", "BNSD", "TND"):
            seeds[f"{what}_{name}"] = fia_seed(mode, name)
    seeds["graph_BNSD_simple_kernel"] = fia_seed(6, "BNSD", simple=True)
    seeds["graph_BSND_int8_kv"] = fia_seed(6, "BSND", int8=True)
    seeds["eager_BNSD_int8_kv"] = fia_seed(0, "BNSD", int8=True)
    # Non-zero heads / sizes right after the layout byte: N = 8 (kHeads index 3), KV_N = 2
    # (divisor index 1), B = 2, decode; N = 4 (index 1), KV_N = 2, B = 3, prefill.
    seeds["graph_BNSD_gqa_decode"] = fia_seed(6, "BNSD", tail_bytes={0: 3, 1: 1, 4: 1, 5: 1})
    seeds["graph_BSH_gqa_prefill"] = fia_seed(6, "BSH", tail_bytes={0: 1, 1: 1, 4: 2})
    seeds["out_BNSD_all_ones"] = bytes([2]) + bytes([1] * 160)
    seeds["eager_all_ff"] = bytes([0]) + bytes([0xff] * 160)
    seeds["graph_random_a"] = bytes([6]) + bytes((i * 37 + 11) % 256 for i in range(200))
    seeds["graph_random_b"] = bytes([7]) + bytes((i * 101 + 3) % 256 for i in range(200))
    return seeds


def write(dirname, seeds):
    path = os.path.join(HERE, "corpus", dirname)
    os.makedirs(path, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(path, name), "wb") as f:
            f.write(data)
    print(f"{path}: {len(seeds)} seeds")


def main():
    runtime = {}
    for name, ops in RUNTIME_SEEDS.items():
        data = []
        for op in ops:
            data += op
        runtime[name] = bytes(data)
    write("runtime_seq_fuzzer", runtime)
    write("fia_args_fuzzer", fia_seeds())
    return 0


if __name__ == "__main__":
    sys.exit(main())
