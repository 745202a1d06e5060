"""torch_npu's ``_npu_paged_attention`` (vllm-ascend's decode attention over a paged KV cache) and
its ``_npu_paged_attention_get_workspace``, as the paged form of npu_fused_infer_attention_score.

One query token per sequence: ``query`` ``[B, N, D]``, caches ``[blocks, block_size, KV_N, D]``
and ``[blocks, block_size, KV_N, Dv]`` (vLLM's layout; Dv may differ, as in MLA), ``block_table``
int32 ``[B, max_blocks]``, ``context_lens`` ``[B]`` (a list or a CPU int tensor: the number of
cached tokens each query attends to), ``out`` ``[B, N, Dv]`` written in place. Under
``auto_dispatch_capture`` the call is recorded and ``g.update(cpu_update_input=[{"context_lens":
...}])`` changes its lengths (also ``block_table``, ``scale_value``). The call is FIA's ``.out`` form on views of these tensors (BSND, the caches as
``[blocks, block_size, KV_N * D]``), so inside ``graph_task_group_begin`` / ``_end`` it is one task
whose ``context_lens`` an update re-issue changes (vllm-ascend's ``update_attn_params``), and its
result is FIA's to the bit.
"""
from . import _C

__all__ = ["_npu_paged_attention", "_npu_paged_attention_get_workspace"]

_NAME = "_npu_paged_attention"


def dims(op, x, name, want, rule):
    """x's shape, which must have `want` dimensions (`rule` says which), or an error naming `op`."""
    shape = tuple(x.shape) if hasattr(x, "shape") else None
    if shape is None:
        raise TypeError(f"{op}: {name} must be a tensor, got {type(x).__name__}")
    if len(shape) != want:
        raise _C.ArgumentError(f"{op}: {name} has shape {list(shape)}: must be {rule}")
    return shape


def inplace_view(op, x, shape, name):
    """x (numpy or torch) seen with `shape` without a copy, so that the op writes x itself; an
    ArgumentError naming `op` when its strides cannot give that shape."""
    try:
        if hasattr(x, "flags"):  # numpy: assigning .shape refuses to copy
            v = x.view()
            v.shape = shape
            return v
        return x.view(shape)
    except (AttributeError, RuntimeError):
        raise _C.ArgumentError(f"{op}: {name} of shape {list(x.shape)} cannot be viewed as "
                               f"{list(shape)} without a copy (it is written in place)") from None


def decode_block_table(op, table, name, tokens):
    """The [num_tokens, max_blocks_per_sequence] block table of a decode call: one row per token."""
    bt = dims(op, table, name, 2, "[num_tokens, max_blocks_per_sequence]")
    if bt[0] != tokens:
        raise _C.ArgumentError(f"{op}: {name} has {bt[0]} rows for {tokens} query tokens: one token per "
                               f"sequence (decode) needs one row per token")
    return bt


def _dims(x, name, want, rule):
    return dims(_NAME, x, name, want, rule)


def _fia_args(query, key_cache, value_cache, num_kv_heads, num_heads, scale_value, block_table,
              context_lens):
    """The FIA call this paged attention is: (query, key, value, keywords)."""
    b, n, d = _dims(query, "query", 3, "[num_tokens, num_heads, head_size]")
    blocks, block_size, kv_n, kd = _dims(key_cache, "key_cache", 4,
                                         "[num_blocks, block_size, num_kv_heads, head_size]")
    vshape = _dims(value_cache, "value_cache", 4, "[num_blocks, block_size, num_kv_heads, head_size_v]")
    if n != num_heads:
        raise _C.ArgumentError(f"{_NAME}: num_heads = {num_heads}: query has {n} heads "
                               f"(query shape {[b, n, d]})")
    if kv_n != num_kv_heads:
        raise _C.ArgumentError(f"{_NAME}: num_kv_heads = {num_kv_heads}: key_cache has {kv_n} "
                               f"(key_cache shape {[blocks, block_size, kv_n, kd]})")
    if tuple(vshape[:3]) != (blocks, block_size, kv_n):
        raise _C.ArgumentError(f"{_NAME}: value_cache has shape {list(vshape)}: must be key_cache's "
                               f"{[blocks, block_size, kv_n]} with any head size")
    decode_block_table(_NAME, block_table, "block_table", b)
    q = query.reshape(b, 1, n, d)
    k = key_cache.reshape(blocks, block_size, kv_n * kd)
    v = value_cache.reshape(blocks, block_size, kv_n * vshape[3])
    keywords = dict(num_heads=num_heads, num_key_value_heads=num_kv_heads, scale=scale_value,
                    input_layout="BSND", block_table=block_table, block_size=block_size,
                    actual_seq_lengths_kv=context_lens)
    return q, k, v, keywords


def _npu_paged_attention(query, key_cache, value_cache, num_kv_heads, num_heads, scale_value,
                         block_table, context_lens, out, workspace=None):
    """torch_npu._npu_paged_attention: writes ``out`` ``[B, N, D]`` (one query token per sequence
    attending to its first ``context_lens[b]`` cached tokens); returns None, as torch_npu's does.
    ``workspace`` (from _npu_paged_attention_get_workspace) is optional; without it the call
    sizes its own (inside a capture, from the graph's pool)."""
    q, k, v, keywords = _fia_args(query, key_cache, value_cache, num_kv_heads, num_heads, scale_value,
                                  block_table, context_lens)
    want = (query.shape[0], query.shape[1], value_cache.shape[3])
    oshape = tuple(out.shape) if hasattr(out, "shape") else None
    if oshape != want:
        raise _C.ArgumentError(f"{_NAME}: out has shape {list(oshape) if oshape else type(out).__name__}: "
                               f"must be [num_tokens, num_heads, value_cache's head size] = {list(want)}")
    attention_out = inplace_view(_NAME, out, (want[0], 1, want[1], want[2]), "out")
    lse = _C.empty(1, dtype="float32")  # softmax_lse_flag is off: its first element is set to 0
    _C._paged_attention_fia.out(q, k, v, workspace=workspace, out=[attention_out, lse], **keywords)


def _npu_paged_attention_get_workspace(query, key_cache, value_cache, num_kv_heads, num_heads,
                                       scale_value, block_table, context_lens, out=None):
    """The workspace (uint8) _npu_paged_attention needs for the worst case of these shapes (any
    context_lens within the block table's capacity)."""
    del out
    q, k, v, keywords = _fia_args(query, key_cache, value_cache, num_kv_heads, num_heads, scale_value,
                                  block_table, context_lens)
    return _C._npu_fused_infer_attention_score_get_max_workspace(q, k, v, **keywords)
