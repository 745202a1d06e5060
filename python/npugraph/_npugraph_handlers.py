"""torch_npu master's graph op handler registry (``torch_npu.npu.NpuGraphOpHandler``,
``register_npu_graph_handler``, ``torch_npu.npu._npugraph_handlers``).

In torch_npu, ``with torch.npu.graph(g, auto_dispatch_capture=True)`` looks up each dispatched op's
name (``"npu_fused_infer_attention_score.out"``, ``"_npu_paged_attention.default"`` ...) in
``_NPU_GRAPH_OP_HANDLERS``; the handler class says how the call is captured (``prepare_capture``:
switch to the ``.out`` form with a workspace) and which of its arguments an update may replace
(``UPDATE_SPECS``: per op name, ``(where, index or name, update key)`` triples that
``g.update(cpu_update_input=[{key: value}])`` writes into the recorded call).

npugraph keeps the same registry with the same built-in registrations, so code that inspects or
extends it runs unchanged. The built-in ops (FIA v1 and v2, ``_npu_paged_attention``,
``npu_multi_head_latent_attention``) are captured and updated by npugraph's own auto-dispatch
recording (Note [Auto-dispatch capture] in python/src/dispatch.hpp), which accepts exactly the keys
their UPDATE_SPECS name (and every other keyword of the op that an update may change); a handler
registered for any other op is stored and returned like torch_npu's, but npugraph's auto-dispatch
capture records only the built-in ops.
"""
import logging as _logging

__all__ = ["NpuGraphOpHandler", "register_npu_graph_handler", "_NPU_GRAPH_OP_HANDLERS"]

_log = _logging.getLogger("npugraph.npu")

# op name -> handler class (the class itself: handlers are stateless, every hook a classmethod)
_NPU_GRAPH_OP_HANDLERS = {}


class NpuGraphOpHandler:
    """Base class of graph op handlers: every hook is a classmethod (no instances), and
    ``UPDATE_SPECS`` declares, per op name, the ``("arg", index, key)`` / ``("kwarg", name, key)``
    slots an update writes."""

    UPDATE_SPECS = {}

    @classmethod
    def prepare_capture(cls, func, args, kwargs):
        """Before the call is recorded: returns ``(func, args, kwargs)`` to record (by default the
        call as made)."""
        return func, args, kwargs

    @classmethod
    def postprocess_result(cls, result, kwargs):
        """After the call is recorded: what the caller gets back (by default the op's result)."""
        del kwargs
        return result

    @classmethod
    def get_update_specs(cls, op_name):
        """The update slots of ``op_name`` (a list of triples; empty for an op it does not name)."""
        return list(cls.UPDATE_SPECS.get(op_name, []))

    @classmethod
    def update_args(cls, dispatch_record, update_input):
        """Writes each key of ``update_input`` that the record's op declares into the recorded
        call: ``dispatch_record.args`` (a list) at the index, or ``dispatch_record.kwargs`` (a
        dict) under the name; keys the op does not declare are left alone."""
        for where, slot, key in cls.get_update_specs(dispatch_record.op_name):
            if key not in update_input:
                continue
            if where == "arg":
                if slot < len(dispatch_record.args):
                    dispatch_record.args[slot] = update_input[key]
            elif where == "kwarg":
                dispatch_record.kwargs[slot] = update_input[key]
            else:
                raise ValueError(f"{cls.__name__}.UPDATE_SPECS[{dispatch_record.op_name!r}]: "
                                 f"{where!r}: the location must be 'arg' or 'kwarg'")

    @classmethod
    def record_wrap_kwarg(cls, key, value, tensor_param_names):
        """How a keyword argument is kept in a record: as it is (npugraph's tensors live in host
        memory that the graph keeps alive; torch_npu keeps weak references to device tensors)."""
        del key, tensor_param_names
        return value


def register_npu_graph_handler(op_names):
    """Class decorator: registers the handler class under one op name or a list of them (a name
    registered again is taken over by the newer class, with a warning, as in torch_npu)."""
    names = [op_names] if isinstance(op_names, str) else op_names
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) and n for n in names):
        raise TypeError(f"register_npu_graph_handler: op_names = {op_names!r}: expected an op name "
                        f"or a non-empty list of op names (str)")

    def decorator(cls):
        if not (isinstance(cls, type) and issubclass(cls, NpuGraphOpHandler)):
            raise TypeError(f"register_npu_graph_handler({names!r}): {cls!r} is not a subclass of "
                            f"NpuGraphOpHandler")
        for name in names:
            old = _NPU_GRAPH_OP_HANDLERS.get(name)
            if old is not None and old is not cls:
                _log.warning("NpuGraphOpHandler for %r is being overridden: %s -> %s", name,
                             old.__name__, cls.__name__)
            _NPU_GRAPH_OP_HANDLERS[name] = cls
        return cls

    return decorator


# --- the built-in registrations: the ops npugraph's auto-dispatch capture records ---------------
# Positions are those of each op's torch_npu schema (keyword arguments in schema order).

_FIA_V1 = ["npu_fused_infer_attention_score", "npu_fused_infer_attention_score.default",
           "npu_fused_infer_attention_score.out"]
_FIA_V2 = ["npu_fused_infer_attention_score_v2", "npu_fused_infer_attention_score_v2.default",
           "npu_fused_infer_attention_score_v2.out"]


class _OutListHandler(NpuGraphOpHandler):
    """Ops whose ``out=`` is a list of tensors: the caller gets that list back."""

    @classmethod
    def postprocess_result(cls, result, kwargs):
        return kwargs["out"] if "out" in kwargs else result


@register_npu_graph_handler(_FIA_V1)
class _FiaV1Handler(_OutListHandler):
    """npu_fused_infer_attention_score: query, key, value, pse_shift, atten_mask,
    actual_seq_lengths (5), actual_seq_lengths_kv (6), ..."""

    UPDATE_SPECS = {name: [("arg", 5, "actual_seq_lengths"), ("arg", 6, "actual_seq_lengths_kv")]
                    for name in _FIA_V1}


@register_npu_graph_handler(_FIA_V2)
class _FiaV2Handler(_OutListHandler):
    """npu_fused_infer_attention_score_v2: query, key, value, query_rope, key_rope, pse_shift,
    atten_mask, actual_seq_qlen (7), actual_seq_kvlen (8), ..."""

    UPDATE_SPECS = {name: [("arg", 7, "actual_seq_qlen"), ("arg", 8, "actual_seq_kvlen")]
                    for name in _FIA_V2}


@register_npu_graph_handler(["_npu_paged_attention.default", "npu_multi_head_latent_attention.out"])
class _ContextLensHandler(NpuGraphOpHandler):
    """_npu_paged_attention: query, key_cache, value_cache, num_kv_heads, num_heads, scale_value,
    block_table, context_lens (7), out; npu_multi_head_latent_attention: q_nope, q_rope, ctkv,
    k_rope, block_tables, context_lens (5), ..."""

    UPDATE_SPECS = {"_npu_paged_attention.default": [("arg", 7, "context_lens")],
                    "npu_multi_head_latent_attention.out": [("arg", 5, "context_lens")]}
