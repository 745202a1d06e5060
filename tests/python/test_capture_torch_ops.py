"""Torch ops inside a capture become tasks of the graph, in stream order with npugraph's own tasks
(Note [Torch ops in a capture] in npugraph/_torch_capture.py): nothing runs at capture time, every
replay rewrites the captured outputs in place, and what cannot be replayed is refused naming the op.
The torch.cuda.graphs test patterns (capture simple, shared pools, reset and recapture,
make_graphed_callables) and a captured decode step of a small torch model, bitwise against eager."""
import threading

import numpy as np
import pytest
import torch

import npugraph
from npugraph import npu
from conftest import randn

fia = npugraph.npu_fused_infer_attention_score
get_ws = npugraph._npu_fused_infer_attention_score_get_max_workspace


def test_capture_simple_runs_nothing_at_capture_and_everything_on_replay():
    a = torch.full((1000,), 1.0)
    g = npu.NPUGraph()
    with npu.graph(g):
        b = a
        for _ in range(10):
            b = b + 1
    assert g.num_tasks == 1  # the run of ten ops is one host task (nothing else recorded between)
    g.replay()
    assert torch.equal(b, torch.full((1000,), 11.0))
    a.fill_(5.0)  # a static input changed in place: the next replay reads it
    g.replay()
    assert torch.equal(b, torch.full((1000,), 15.0))


def test_direct_capture_begin_end_records_torch_ops_instead_of_running_them():
    x = torch.zeros(4)
    y = torch.arange(4.0)
    g = npu.NPUGraph()
    s = npu.Stream()
    with npu.stream(s):
        g.capture_begin()
        x.add_(1)
        z = torch.mul(y, 2)
        x.add_(z)
        g.capture_end()
    assert torch.equal(x, torch.zeros(4))  # not run at capture time: the old silent eager run is gone
    g.replay()
    assert torch.equal(x, 1 + 2 * torch.arange(4.0))
    g.replay()
    assert torch.equal(x, 2 + 4 * torch.arange(4.0))


def test_two_successive_captures_share_a_pool():
    a = torch.arange(6.0).reshape(2, 3)
    g0, g1 = npu.NPUGraph(), npu.NPUGraph()
    with npu.graph(g0):
        b = a * 3 + 1
    with npu.graph(g1, pool=g0.pool()):
        c = b.sum(dim=1)
        d = torch.mm(b, b.t())
    before = npu.memory_stats()["pools"]
    g0.replay()
    g1.replay()
    assert torch.equal(b, a * 3 + 1)
    assert torch.equal(c, (a * 3 + 1).sum(dim=1))
    assert torch.equal(d, torch.mm(a * 3 + 1, (a * 3 + 1).t()))
    assert npu.memory_stats()["pools"] == before  # replays allocate nothing


def test_reset_and_recapture():
    a = torch.ones(3)
    g = npu.NPUGraph()
    with npu.graph(g):
        b = a * 2
    g.replay()
    assert torch.equal(b, torch.full((3,), 2.0))
    g.reset()
    with pytest.raises(npugraph.StateError, match="has not been captured"):
        g.replay()
    with npu.graph(g):
        c = a - 4
    g.replay()
    assert torch.equal(c, torch.full((3,), -3.0))


def test_make_graphed_callables_on_a_small_mlp_equals_eager():
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).eval()
    for p in mlp.parameters():
        p.requires_grad_(False)
    x = torch.randn(4, 16)
    graphed = npu.make_graphed_callables(mlp, (x,))
    for step in range(3):
        new = torch.randn(4, 16)
        expected = mlp(new)
        assert torch.equal(graphed(new), expected), step


def test_torch_ops_keep_stream_order_with_npugraph_ops(rng):
    """q is computed by a torch op, FIA reads it, a torch op reads FIA's output: one replay runs all
    three in that order, and a changed input changes every stage."""
    src = randn((1, 2, 1, 16), torch.float16, rng)
    k = randn((1, 2, 8, 16), torch.float16, rng)
    opts = dict(num_heads=2, input_layout="BNSD", actual_seq_lengths_kv=[8])
    g = npu.NPUGraph()
    with npu.graph(g):
        q = src * 2
        ws = get_ws(q, k, k, **opts)
        out = npugraph.empty(1, 2, 1, 16, dtype=torch.float16)
        lse = npugraph.empty(1, dtype=torch.float32)
        fia.out(q, k, k, workspace=ws, out=[out, lse], **opts)
        final = out.float() + 1
    for _ in range(2):
        g.replay()
        expected = fia(src * 2, k, k, **opts)[0].float() + 1
        assert torch.equal(final, expected)
        src.copy_(randn((1, 2, 1, 16), torch.float16, rng))


def test_consecutive_ops_share_a_task_and_anything_recorded_between_splits_them():
    """A run of torch ops on one stream is one graph task (one GIL acquisition per run); an event
    record between two runs ends the first, so the graph has two host tasks."""
    x = torch.zeros(4)
    event = npu.Event()
    g = npu.NPUGraph()
    with npu.graph(g):
        for _ in range(10):
            x.add_(1)
        event.record()
        for _ in range(5):
            x.mul_(2)
    assert g.dot().count("host_func") == 2, g.dot()
    g.replay()
    assert torch.equal(x, torch.full((4,), 320.0))


def test_torch_ops_across_forked_streams_keep_their_joins():
    """s1: a = x + 1; s2 (forked after a): b = a * 3; s1 waits for s2, then c = b + a. The join
    splits s1's run, so c runs after b on every replay."""
    x = torch.ones(8)
    g = npu.NPUGraph()
    with npu.graph(g):
        s1 = npu.current_stream()
        a = x + 1
        s2 = npu.Stream()
        s2.wait_stream(s1)
        with npu.stream(s2):
            b = a * 3
        s1.wait_stream(s2)
        c = b + a
    for value in (1.0, 5.0, -2.0):
        x.fill_(value)
        g.replay()
        assert torch.equal(c, torch.full((8,), (value + 1) * 4)), value


@pytest.mark.parametrize("op, pattern", [
    (lambda x: x.sum().item(), r"aten\._local_scalar_dense\.default cannot be captured.*depends on the tensors' values"),
    (lambda x: torch.nonzero(x), r"aten\.nonzero\.default cannot be captured.*depends on the tensors' values"),
    (lambda x: torch.equal(x, x), r"aten\.equal\.default cannot be captured.*depends on the tensors. values"),
])
def test_ops_that_cannot_be_replayed_are_refused_naming_the_op(op, pattern):
    x = torch.ones(4)
    g = npu.NPUGraph()
    with pytest.raises(npugraph.StateError, match=pattern + r".*Nothing was recorded"):
        with npu.graph(g):
            y = x + 1
            op(y)
    with pytest.raises(npugraph.StateError, match="has not been captured"):
        g.replay()
    with npu.graph(g):  # the graph captures again afterwards
        y = x + 1
    g.replay()
    assert torch.equal(y, torch.full((4,), 2.0))


def test_a_refusal_caught_inside_the_capture_keeps_it_valid():
    # torch_npu master (test_graph_rng_after_failed_capture): a rejected host sync raises and the
    # capture goes on; what was recorded before and after replays.
    x = torch.ones(4)
    g = npu.NPUGraph()
    with npu.graph(g):
        y = x + 1
        try:
            torch.nonzero(x)
        except npugraph.StateError as e:
            assert "Nothing was recorded" in str(e)
        else:
            raise AssertionError("nonzero was captured")
        z = y * 3
    s = npu.Stream()
    with npu.stream(s):
        g2 = npu.NPUGraph()
        g2.capture_begin()
        w = x * 5
        with pytest.raises(npugraph.StateError, match=r"aten\._local_scalar_dense\.default cannot be captured"):
            x.sum().item()
        g2.capture_end()
    x.fill_(2.0)
    g.replay()
    g2.replay()
    npu.synchronize()
    assert torch.equal(z, torch.full((4,), 9.0)) and torch.equal(w, torch.full((4,), 10.0))


def test_torch_op_inside_a_task_group_is_refused_naming_it():
    x = torch.ones(4)
    g = npu.NPUGraph()
    with pytest.raises(npugraph.Error, match=r"torch op aten\.add_\.Tensor: .*host_func"):
        with npu.graph(g):
            s = npu.current_stream()
            npu.graph_task_group_begin(s)
            x.add_(1)
    assert torch.equal(x, torch.ones(4))


def test_views_and_allocations_run_at_capture_and_alias_what_replays_write():
    a = torch.arange(8.0)
    g = npu.NPUGraph()
    with npu.graph(g):
        scratch = torch.empty(2, 3)
        b = a * 10
        view = b[2:5]
        scratch.copy_(b[:6].view(2, 3))
    assert scratch.shape == (2, 3) and view.shape == (3,)
    g.replay()
    assert torch.equal(view, torch.tensor([20.0, 30.0, 40.0]))
    assert torch.equal(scratch, (10 * torch.arange(6.0)).view(2, 3))


def test_multi_output_ops_and_dtype_conversions_replay_in_place():
    x = torch.tensor([[3.0, 1.0, 2.0], [0.5, 4.0, -1.0]])
    g = npu.NPUGraph()
    with npu.graph(g):
        values, indices = torch.max(x, dim=1)
        half = x.to(torch.float16)
        cat = torch.cat([x, x], dim=0)
    g.replay()
    assert torch.equal(values, torch.tensor([3.0, 4.0])) and torch.equal(indices, torch.tensor([0, 1]))
    assert torch.equal(half, x.to(torch.float16)) and torch.equal(cat, torch.cat([x, x]))
    x.neg_()
    g.replay()
    assert torch.equal(values, torch.tensor([-1.0, 1.0])) and torch.equal(indices, torch.tensor([1, 2]))


def test_ops_returning_tensor_lists_are_captured():
    """unsafe_split (an LSTM's gates) returns List[Tensor] without alias annotations: recorded as a
    functional op, its results written on every replay."""
    x = torch.arange(8.0)
    g = npu.NPUGraph()
    with npu.graph(g):
        a, b = x.unsafe_split(4)
        y = a * b
    for shift in (0.0, 3.0):
        x.copy_(torch.arange(8.0) + shift)
        g.replay()
        want = (torch.arange(4.0) + shift) * (torch.arange(4.0, 8.0) + shift)
        assert torch.equal(y, want), shift


def test_other_threads_and_non_capturing_streams_run_eagerly():
    x = torch.zeros(2)
    g = npu.NPUGraph()
    with npu.graph(g):
        t = threading.Thread(target=lambda: x.add_(1))
        t.start()
        t.join()
        with npu.stream(npu.Stream()):  # a stream that is not capturing
            x.add_(10)
        y = x * 2
    assert torch.equal(x, torch.full((2,), 11.0))
    g.replay()
    assert torch.equal(y, torch.full((2,), 22.0))


def test_numpy_work_in_a_capture_is_not_torch_and_an_empty_graph_warns_as_torch_npu():
    a = np.zeros(2, np.float32)
    g = npu.NPUGraph()
    with pytest.warns(UserWarning, match=r"The NPU Graph is empty: graph \d+ recorded no task"):
        with npu.graph(g):
            a += 1
    assert (a == 1).all()
    g2 = npu.NPUGraph()
    with npu.stream(npu.Stream()), pytest.warns(UserWarning, match="The NPU Graph is empty"):
        g2.capture_begin()
        g2.capture_end()


def test_a_replayed_op_that_fails_raises_task_error_naming_it():
    x = torch.ones(4)
    idx = torch.tensor([0, 1])
    g = npu.NPUGraph()
    with npu.graph(g):
        y = torch.index_select(x, 0, idx)
    g.replay()
    assert torch.equal(y, torch.ones(2))
    idx.fill_(7)  # out of range for x: the replay's index_select fails
    with pytest.raises(npugraph.TaskError, match=r"captured torch op aten\.index_select.* failed on replay"):
        g.replay()
    idx.fill_(3)
    g.replay()  # the stream and the graph stay usable
    assert torch.equal(y, torch.ones(2))


class _TinyAttentionStep(torch.nn.Module):
    """One decode step of a one-layer attention model: projections, a KV-cache write at a position
    read from a tensor, FIA over the cache, an output projection and a residual."""

    def __init__(self, hidden=32, heads=2, head_dim=16, max_len=24):
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.heads, self.head_dim = heads, head_dim
        self.wq, self.wk, self.wv = (torch.randn(hidden, heads * head_dim, generator=g) * 0.2 for _ in range(3))
        self.wo = torch.randn(heads * head_dim, hidden, generator=g) * 0.2
        self.k_cache = torch.zeros(1, heads, max_len, head_dim, dtype=torch.float16)
        self.v_cache = torch.zeros(1, heads, max_len, head_dim, dtype=torch.float16)

    def project(self, x, pos):
        shape = (1, self.heads, 1, self.head_dim)
        q = (x @ self.wq).view(shape).to(torch.float16)
        self.k_cache.index_copy_(2, pos, (x @ self.wk).view(shape).to(torch.float16))
        self.v_cache.index_copy_(2, pos, (x @ self.wv).view(shape).to(torch.float16))
        return q

    def finish(self, x, attn):
        return x + attn.reshape(1, -1).float() @ self.wo

    def opts(self, length):
        return dict(num_heads=self.heads, input_layout="BNSD", actual_seq_lengths_kv=[length])


def test_captured_decode_step_with_per_step_fia_update_equals_eager_bitwise():
    eager_model, graph_model = _TinyAttentionStep(), _TinyAttentionStep()
    gen = torch.Generator().manual_seed(2)
    inputs = [torch.randn(1, 32, generator=gen) for _ in range(6)]

    eager_out = []
    for step, x in enumerate(inputs):
        q = eager_model.project(x, torch.tensor([step]))
        attn, _ = fia(q, eager_model.k_cache, eager_model.v_cache, **eager_model.opts(step + 1))
        eager_out.append(eager_model.finish(x, attn))

    m = graph_model
    x_static, pos = torch.zeros(1, 32), torch.zeros(1, dtype=torch.long)
    g = npu.NPUGraph()
    update_stream = npu.Stream()
    with npu.graph(g):
        s = npu.current_stream()
        q = m.project(x_static, pos)
        ws = get_ws(q, m.k_cache, m.v_cache, **m.opts(m.k_cache.shape[2]))
        attn = npugraph.empty(1, m.heads, 1, m.head_dim, dtype=torch.float16)
        lse = npugraph.empty(1, dtype=torch.float32)
        npu.graph_task_group_begin(s)
        fia.out(q, m.k_cache, m.v_cache, workspace=ws, out=[attn, lse], **m.opts(1))
        handle = npu.graph_task_group_end(s)
        y = m.finish(x_static, attn)
    for step, x in enumerate(inputs):
        x_static.copy_(x)
        pos.fill_(step)
        with npu.stream(update_stream):
            npu.graph_task_update_begin(update_stream, handle)
            fia.out(q, m.k_cache, m.v_cache, workspace=ws, out=[attn, lse], **m.opts(step + 1))
            npu.graph_task_update_end(update_stream)
        update_stream.synchronize()
        g.replay()
        assert torch.equal(y, eager_out[step]), step
    assert torch.equal(m.k_cache, eager_model.k_cache) and torch.equal(m.v_cache, eager_model.v_cache)


def test_launch_host_func_runs_in_stream_order_and_is_captured():
    seen = []
    s = npu.Stream()
    gate = npu.ExternalEvent()
    gate.wait(s)
    npu.launch_host_func(s, seen.append, "after the wait")
    assert seen == []  # the stream is blocked on the event: fn has not run (order made explicit)
    gate.record(npu.Stream())
    s.synchronize()
    assert seen == ["after the wait"]

    g = npu.NPUGraph()
    with npu.graph(g):
        npu.launch_host_func(npu.current_stream(), seen.append, "replayed")
    assert seen == ["after the wait"]
    g.replay()
    g.replay()
    assert seen == ["after the wait", "replayed", "replayed"]


def test_launch_host_func_errors_name_the_task_and_the_stream_stays_usable():
    s = npu.Stream()

    def boom(_):
        raise ValueError("no such thing")

    npu.launch_host_func(s, boom)
    with pytest.raises(npugraph.TaskError, match=r"host_func.*ValueError: no such thing"):
        s.synchronize()
    seen = []
    npu.launch_host_func(s, seen.append, 1)
    s.synchronize()
    assert seen == [1]
    with pytest.raises(TypeError, match=r"launch_host_func: fn = 3: expected a callable"):
        npu.launch_host_func(s, 3)


def test_profiler_ranges_run_at_capture_and_are_not_recorded():
    # torch.optim's step() opens a record_function range (the profiler namespace's ops): host work
    # with no device counterpart, run at capture as on the device, never a task of the graph
    a = torch.tensor([1.0, 2.0, 3.0])
    g = npu.NPUGraph()
    with npu.graph(g):
        with torch.autograd.profiler.record_function("captured step"):
            b = a * 2
    assert g.num_tasks == 1  # the multiplication only
    g.replay()
    assert b.tolist() == [2.0, 4.0, 6.0]
    a.fill_(-1.0)
    g.replay()
    assert b.tolist() == [-2.0, -2.0, -2.0]


def test_an_op_that_writes_its_arguments_and_returns_nothing_is_captured():
    # aten::_foreach_add_ (torch.optim's foreach steps) returns nothing (torch refuses a dispatch
    # mode that returns something for it); each replay adds once more
    x, y = torch.zeros(2), torch.tensor([1.0, 2.0, 3.0])
    g = npu.NPUGraph()
    with npu.graph(g):
        torch._foreach_add_([x, y], 1.5)
    assert x.tolist() == [0.0, 0.0] and y.tolist() == [1.0, 2.0, 3.0]  # nothing ran at capture
    g.replay()
    g.replay()
    assert x.tolist() == [3.0, 3.0] and y.tolist() == [4.0, 5.0, 6.0]


def test_an_op_that_writes_an_argument_and_returns_a_new_tensor_is_captured():
    # rrelu in training writes its noise (the slope of each element) and returns a new tensor;
    # with lower == upper the slope of a negative element is that value, of the others 1
    x = torch.tensor([-4.0, 2.0, -1.0])
    g = npu.NPUGraph()
    with npu.graph(g):
        y = torch.nn.functional.rrelu(x, lower=0.25, upper=0.25, training=True)
    g.replay()
    assert y.tolist() == [-1.0, 2.0, -0.25]
    x.copy_(torch.tensor([8.0, -8.0, 0.5]))
    g.replay()
    assert y.tolist() == [8.0, -2.0, 0.5]


def test_an_out_kernel_that_resizes_its_output_is_replayed_functionally():
    # mse_loss.out computes the elementwise loss in its output first: a captured output cannot grow,
    # so the op is replayed functionally; mean((1 - 3)^2, (2 - 5)^2) = 6.5
    a, b = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 5.0])
    g = npu.NPUGraph()
    with npu.graph(g):
        loss = torch.nn.functional.mse_loss(a, b)
    for _ in range(2):
        g.replay()
        npu.synchronize()
        assert loss.shape == () and loss.item() == 6.5
    b.copy_(torch.tensor([1.0, 4.0]))
    g.replay()
    npu.synchronize()
    assert loss.item() == 2.0


def test_graphed_callables_with_autograd_replay_forward_and_backward():
    # d/dx sum(3 x^2) = 6 x, a graphed function; its backward graph replays on loss.backward()
    x = torch.zeros(3, requires_grad=True)
    f = npu.make_graphed_callables(lambda t: (3 * t * t).sum(), (x,))
    for values in ([1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]):
        new = torch.tensor(values, requires_grad=True)
        out = f(new)
        assert out.item() == 3 * sum(v * v for v in values)
        out.backward()
        assert new.grad.tolist() == [6 * v for v in values]


def test_graphed_module_trains_as_the_eager_one_and_runs_eagerly_in_eval():
    torch.manual_seed(0)
    control = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    graphed = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    graphed.load_state_dict(control.state_dict())
    x, target = torch.randn(5, 6), torch.randn(5, 2)
    pred = torch.randn(5, 2, requires_grad=True)
    module, loss_fn = npu.make_graphed_callables((graphed, torch.nn.functional.mse_loss),
                                                 ((x,), (pred, target)))
    assert module is graphed  # a module comes back as itself
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (graphed, control)]
    data = [(torch.randn(5, 6), torch.randn(5, 2)) for _ in range(4)]
    for m, lf, opt in ((graphed, loss_fn, opts[0]), (control, torch.nn.functional.mse_loss, opts[1])):
        for inp, tgt in data:
            opt.zero_grad(set_to_none=True)
            lf(m(inp), tgt).backward()
            opt.step()
    for p, q in zip(graphed.parameters(), control.parameters()):
        assert torch.allclose(p, q, atol=1e-6), (p - q).abs().max()
    graphed.eval()  # captured in training mode: eval runs the module's own forward
    assert torch.equal(graphed(data[0][0]), control.eval()(data[0][0]))


def test_graphed_callables_refuse_an_unused_input_unless_allowed():
    x, unused = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        npu.make_graphed_callables(lambda a, b: (a * 2).sum(), (x, unused))
    f = npu.make_graphed_callables(lambda a, b: (a * 2).sum(), (x, unused), allow_unused_input=True)
    a, b = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    f(a, b).backward()
    assert a.grad.tolist() == [2.0, 2.0] and b.grad is None


def test_graphed_callables_with_autograd_errors_name_the_rule():
    lin = torch.nn.Linear(2, 2)
    handle = lin.register_forward_hook(lambda *a: None)
    with pytest.raises(npugraph.ArgumentError, match=r"callables\[0\] has module hooks"):
        npu.make_graphed_callables(lin, (torch.ones(1, 2),))
    handle.remove()
    with pytest.raises(TypeError, match=r"sample_args\[0\] leaf 1 is a int"):
        npu.make_graphed_callables(lambda a, b: a, (torch.ones(2, requires_grad=True), 3))
    f = npu.make_graphed_callables(lambda a: (a * 2).sum(), (torch.ones(2, requires_grad=True),))
    with pytest.raises(TypeError, match=r"takes 1 tensor\(s\) \(its sample_args' leaves\), got 2"):
        f(torch.ones(2), torch.ones(2))
