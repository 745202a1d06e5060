"""``make_graphed_callables`` with autograd: torch.cuda.make_graphed_callables on npugraph's graphs.

Note [Graphed callables with autograd]
torch's algorithm (torch/cuda/graphs.py), on npugraph's NPUGraph, stream and pool:

1. Each callable's sample arguments are flattened (a pytree: tuples, lists, dicts of tensors); its
   input surface is those tensors plus, for a module, its parameters.
2. Warm-up on a side stream: ``num_warmup_iters`` eager forwards, each followed by
   ``torch.autograd.grad`` of the outputs that require grad with respect to the surface tensors
   that do.
3. The forwards are captured in order, each into its own graph; then the backwards in reverse
   order, the same ``autograd.grad`` with static gradient outputs, all in one memory pool (a later
   forward may read an earlier one's outputs; a backward frees in the reverse order).
4. Each callable becomes an ``autograd.Function``: ``forward`` copies the user's tensors into the
   static inputs (unless they are the same tensors), replays the forward graph and returns its
   static outputs detached; ``backward`` copies the incoming gradients into the static gradient
   outputs, replays the backward graph and returns the static gradients of the inputs (None for an
   input that takes none). A module keeps its identity: its ``forward`` is replaced by one that
   takes the graphs while the module is in the training mode it was captured in, and its original
   forward otherwise.

Everything a replay writes is overwritten by the next replay, as in torch. On the npu device the
backward capture runs on torch's autograd thread (Note [A backward inside a capture]).
"""

__all__ = ["make_graphed_callables"]


def _same_memory(a, b):
    if a is b:
        return True
    da, db = getattr(a, "_npugraph_data", a), getattr(b, "_npugraph_data", b)
    try:
        return da.data_ptr() == db.data_ptr() and da.shape == db.shape and da.stride() == db.stride()
    except RuntimeError:
        return False


def _autocasting(torch):
    if torch.is_autocast_enabled():
        return True
    try:
        return torch.is_autocast_enabled("npu")  # torch >= 2.4, with the npu device named
    except (TypeError, RuntimeError):
        pass
    from . import _npu_device

    # torch 2.3 with the npu device named: its device module keeps the state
    return _npu_device.enabled() and bool(torch.npu.is_autocast_enabled())


def make_graphed_callables(single, fns, samples, num_warmup_iters, allow_unused_input, pool):
    """npugraph.npu.make_graphed_callables with autograd; its arguments already checked there
    (`single`: one callable was given, not a sequence)."""
    import torch
    from torch.utils._pytree import tree_flatten, tree_unflatten

    from . import _C
    from ._graph import graph as graph_ctx

    if _autocasting(torch) and torch.is_autocast_cache_enabled():
        raise RuntimeError("make_graphed_callables does not support the autocast caching. "
                           "Please set `cache_enabled=False`.")
    samples = tuple(tuple(a) if isinstance(a, (tuple, list)) else (a,) for a in samples)
    flat_args = []
    for i, (fn, args) in enumerate(zip(fns, samples)):
        if not callable(fn):
            raise TypeError(f"make_graphed_callables: callables[{i}] = {fn!r} is not callable")
        if isinstance(fn, torch.nn.Module) and (fn._backward_hooks or fn._forward_hooks
                                                or fn._forward_pre_hooks):
            raise _C.ArgumentError(f"make_graphed_callables: callables[{i}] has module hooks; "
                                   f"graphing it would skip them: remove them first")
        flat = tuple(tree_flatten(args)[0])
        for j, a in enumerate(flat):
            if not isinstance(a, torch.Tensor):
                raise TypeError(f"make_graphed_callables: sample_args[{i}] leaf {j} is a "
                                f"{type(a).__name__}: every argument must be a tensor")
        flat_args.append(flat)
    params = [tuple(fn.parameters()) if isinstance(fn, torch.nn.Module) else () for fn in fns]
    surfaces = [flat_args[i] + params[i] for i in range(len(fns))]
    mempool = pool if pool is not None else _C.npu.graph_pool_handle()

    def grads_of(outputs, surface, grad_outputs):
        return torch.autograd.grad(outputs=outputs, inputs=tuple(t for t in surface if t.requires_grad),
                                   grad_outputs=grad_outputs, only_inputs=True,
                                   allow_unused=allow_unused_input)

    _C.npu.synchronize()
    side = _C.npu.Stream()
    with _C.npu.stream(side):
        for fn, args, surface in zip(fns, samples, surfaces):
            for _ in range(num_warmup_iters):
                outputs = tuple(o for o in tree_flatten(fn(*args))[0] if o.requires_grad)
                if outputs:
                    grads_of(outputs, surface, tuple(torch.empty_like(o) for o in outputs))
            outputs = None
    _C.npu.synchronize()

    fwd_graphs = [_C.npu.NPUGraph() for _ in fns]
    bwd_graphs = [_C.npu.NPUGraph() for _ in fns]
    static_outputs, specs = [], []
    for fn, args, g in zip(fns, samples, fwd_graphs):
        with graph_ctx(g, pool=mempool):
            outputs = fn(*args)
        flat, spec = tree_flatten(outputs)
        static_outputs.append(tuple(flat))
        specs.append(spec)

    static_grad_outputs, static_grad_inputs = [None] * len(fns), [None] * len(fns)
    for i in reversed(range(len(fns))):
        grad_outs = tuple(torch.empty_like(o) if o.requires_grad else None for o in static_outputs[i])
        needing = tuple(o for o in static_outputs[i] if o.requires_grad)
        grads = None
        if needing:
            with graph_ctx(bwd_graphs[i], pool=mempool):
                grads = grads_of(needing, surfaces[i], tuple(g for g in grad_outs if g is not None))
        per_input, k = [], 0
        for t in surfaces[i]:
            if t.requires_grad and grads is not None:
                per_input.append(grads[k])
                k += 1
            else:
                per_input.append(None)
        static_grad_outputs[i], static_grad_inputs[i] = grad_outs, tuple(per_input)

    graphed = []
    for i, fn in enumerate(fns):
        function = _graphed_function(torch, fwd_graphs[i], bwd_graphs[i], params[i], len(flat_args[i]),
                                     specs[i], surfaces[i], static_outputs[i], static_grad_outputs[i],
                                     static_grad_inputs[i], tree_flatten, tree_unflatten)
        if isinstance(fn, torch.nn.Module):
            fn.forward = _module_forward(fn, function, fn.training, fn.forward)
            graphed.append(fn)
        else:
            function.graph = fwd_graphs[i]
            graphed.append(function)
    return graphed[0] if single else tuple(graphed)


def _graphed_function(torch, fwd_graph, bwd_graph, params, n_user, spec, surface, outputs,
                      grad_outputs, grad_inputs, tree_flatten, tree_unflatten):
    class Graphed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            for static, new in zip(surface[:n_user], inputs[:n_user]):
                if not _same_memory(static, new):
                    static.copy_(new)
            fwd_graph.replay()
            return tuple(o.detach() for o in outputs)

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, *grads):
            for static, new in zip(grad_outputs, grads):
                if static is not None and new is not None and not _same_memory(static, new):
                    static.copy_(new)
            bwd_graph.replay()
            return tuple(g.detach() if g is not None else None for g in grad_inputs)

    def functionalized(*user_args, **user_kwargs):
        flat = tuple(tree_flatten((user_args, user_kwargs))[0])
        if len(flat) != n_user:
            raise TypeError(f"make_graphed_callables: the graphed callable takes {n_user} tensor(s) "
                            f"(its sample_args' leaves), got {len(flat)}")
        return tree_unflatten(Graphed.apply(*(flat + params)), spec)

    return functionalized


def _module_forward(module, function, training, original):
    def forward(*args, **kwargs):
        if module.training == training:
            return function(*args, **kwargs)
        return original(*args, **kwargs)

    return forward
