"""A forgotten ExternalEvent record: the stalled replay raises, the next correct step gives the right
result, and exiting the interpreter with a replay still stalled (its tensors dropped) neither hangs
nor crashes (Note [Stalls], Note [Keep-alive]). Each scenario runs in a fresh interpreter."""
import os
import subprocess
import sys
import textwrap

SCENARIO = textwrap.dedent(
    """
    import numpy as np
    import npugraph
    from npugraph import npu

    fia = npugraph.npu_fused_infer_attention_score
    get_ws = npugraph._npu_fused_infer_attention_score_get_max_workspace
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 4, 1, 32)).astype(np.float16)
    k = rng.standard_normal((1, 4, 64, 32)).astype(np.float16)
    v = rng.standard_normal((1, 4, 64, 32)).astype(np.float16)
    opts = dict(num_heads=4, input_layout="BNSD", scale=0.2)

    def eager(length):
        out, _ = fia(q, k, v, actual_seq_lengths_kv=[length], **opts)
        return out.copy()

    event = npu.ExternalEvent("step_ready")
    event.set_wait_deadline(0.2)
    update_stream = npu.Stream()
    g = npu.NPUGraph()
    ws = get_ws(q, k, v, actual_seq_lengths_kv=[29], **opts)
    out = np.zeros((1, 4, 1, 32), np.float16)
    lse = np.zeros((1,), np.float32)
    with npu.graph(g):
        s = npu.current_stream()
        event.wait(s)
        event.reset(s)
        npu.graph_task_group_begin(s)
        fia.out(q, k, v, workspace=ws, out=[out, lse], actual_seq_lengths_kv=[29], **opts)
        handle = npu.graph_task_group_end(s)

    def update(length):
        with npu.stream(update_stream):
            npu.graph_task_update_begin(update_stream, handle)
            fia.out(q, k, v, workspace=ws, out=[out, lse], actual_seq_lengths_kv=[length], **opts)
            npu.graph_task_update_end(update_stream)

    update(40)
    try:
        g.replay()  # the record is forgotten
        raise SystemExit("the stalled replay did not raise")
    except npugraph.WaitTimeoutError as e:
        assert "step_ready" in str(e), str(e)
    for length in (40, 17, 64):  # the correct next steps
        update(length)
        event.record(update_stream)
        g.replay()
        assert np.array_equal(out, eager(length)), length
    # Forgotten again, asynchronously, and everything dropped before exit.
    update(50)
    g.replay(blocking=False)
    del q, k, v, out, lse, ws, g, handle
    print("scenario finished")
    """
)


def test_a_forgotten_record_recovers_and_exit_with_a_stalled_replay_is_clean():
    env = dict(os.environ)
    result = subprocess.run([sys.executable, "-c", SCENARIO], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr[-3000:])
    assert "scenario finished" in result.stdout
