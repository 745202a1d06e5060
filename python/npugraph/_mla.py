"""torch_npu's ``npu_multi_head_latent_attention`` (``torch_npu.atb``; DeepSeek's MLA decode over a
paged latent cache), as the paged, rope form of npu_fused_infer_attention_score.

One query token per sequence: ``q_nope`` ``[T, N, Dn]`` and ``q_rope`` ``[T, N, Dr]``; the latent
cache ``ctkv`` ``[blocks, block_size, KV_N, Dn]`` and its rope part ``k_rope`` ``[blocks,
block_size, KV_N, Dr]`` (cache_mode ``"krope_ctkv"``, torch_npu's ND layout); ``block_tables``
int32 ``[T, max_blocks]``; ``context_lens`` ``[T]``. Per token t and head n (KV head
``n // (N / KV_N)``), over the first ``context_lens[t]`` cached tokens j:
``s_j = qk_scale * (q_nope[t, n] . ctkv[j] + q_rope[t, n] . k_rope[j])``,
``out[t, n] = sum_j softmax(s)_j ctkv[j]`` — the latent vector is both key and value. That is FIA
with paged KV, ``query_rope`` / ``key_rope``, and the value cache the key cache: the call is FIA's
``.out`` form on views of these tensors, so its result is FIA's to the bit, inside a task group it is
one task whose ``context_lens`` an update re-issue changes, and under ``auto_dispatch_capture`` it
is recorded and ``g.update(cpu_update_input=[{"context_lens": ...}])`` changes its lengths (the
registry's ``npu_multi_head_latent_attention.out`` handler declares that key).
"""
from . import _C
from ._paged_attention import decode_block_table, dims, inplace_view

__all__ = ["npu_multi_head_latent_attention"]

_NAME = "npu_multi_head_latent_attention"


def _shape(x, name, want, rule):
    return dims(_NAME, x, name, want, rule)


def _refuse(name, value, allowed=(None,)):
    if not any(value is a or (a is not None and value == a) for a in allowed):
        raise _C.ArgumentError(
            f"{_NAME}: {name} = {value!r} is not supported by npugraph (supported: "
            f"{', '.join(repr(a) for a in allowed)}): decode with one query token per sequence over a "
            f"float16/bfloat16 ND cache (cache_mode 'krope_ctkv')")


def npu_multi_head_latent_attention(q_nope, q_rope, ctkv, k_rope, block_tables, context_lens,
                                    q_headnum, qk_scale, kv_headnum, return_lse=False, *, mask=None,
                                    qseqlen=None, qk_descale=None, pv_descale=None, mask_type=None,
                                    calc_type=None, cache_mode=None, output=None, lse=None):
    """torch_npu.atb.npu_multi_head_latent_attention: returns ``output`` ``[T, N, Dn]`` (written in
    place when given, else new), and with ``return_lse=True`` also the log-sum-exp ``[T, N, 1]``
    (float32; written into ``lse`` when given). Speculative decoding (``mask``, ``qseqlen``,
    ``mask_type``, ``calc_type``), int8 caches (``qk_descale``, ``pv_descale``) and the NZ cache
    modes raise ArgumentError naming the argument."""
    _refuse("mask", mask)
    _refuse("qseqlen", qseqlen)
    _refuse("qk_descale", qk_descale)
    _refuse("pv_descale", pv_descale)
    _refuse("mask_type", mask_type, (None, "undefined"))
    _refuse("calc_type", calc_type, (None, "calc_type_undefined"))
    _refuse("cache_mode", cache_mode, (None, "krope_ctkv"))
    if not isinstance(return_lse, bool):
        raise TypeError(f"{_NAME}: return_lse = {return_lse!r}: expected a bool")
    t, n, dn = _shape(q_nope, "q_nope", 3, "[num_tokens, num_heads, head_size]")
    qr = _shape(q_rope, "q_rope", 3, "[num_tokens, num_heads, rope_head_size]")
    blocks, block_size, kv_n, cdn = _shape(ctkv, "ctkv", 4, "[num_blocks, block_size, kv_heads, head_size]")
    kr = _shape(k_rope, "k_rope", 4, "[num_blocks, block_size, kv_heads, rope_head_size]")
    if qr[:2] != (t, n):
        raise _C.ArgumentError(f"{_NAME}: q_rope has shape {list(qr)}: its tokens and heads must be "
                               f"q_nope's {[t, n]}")
    if n != q_headnum:
        raise _C.ArgumentError(f"{_NAME}: q_headnum = {q_headnum}: q_nope has {n} heads")
    if kv_n != kv_headnum:
        raise _C.ArgumentError(f"{_NAME}: kv_headnum = {kv_headnum}: ctkv has {kv_n} KV heads")
    if cdn != dn:
        raise _C.ArgumentError(f"{_NAME}: ctkv has head size {cdn}: must be q_nope's {dn}")
    if kr != (blocks, block_size, kv_n, qr[2]):
        raise _C.ArgumentError(f"{_NAME}: k_rope has shape {list(kr)}: must be "
                               f"{[blocks, block_size, kv_n, qr[2]]} (ctkv's blocks and heads, "
                               f"q_rope's head size)")
    decode_block_table(_NAME, block_tables, "block_tables", t)
    q = q_nope.reshape(t, 1, n, dn)
    keywords = dict(num_heads=n, num_key_value_heads=kv_n, scale=qk_scale, input_layout="BSND",
                    block_table=block_tables, block_size=block_size,
                    actual_seq_lengths_kv=context_lens, query_rope=q_rope.reshape(t, 1, n, qr[2]),
                    key_rope=k_rope.reshape(blocks, block_size, kv_n * qr[2]),
                    softmax_lse_flag=return_lse)
    cache = ctkv.reshape(blocks, block_size, kv_n * dn)
    if output is None:
        output = _C.empty(t, n, dn, dtype=q_nope.dtype)  # numpy or torch, as q_nope
    elif tuple(getattr(output, "shape", ())) != (t, n, dn):
        raise _C.ArgumentError(f"{_NAME}: output has shape {list(getattr(output, 'shape', []))}: "
                               f"must be q_nope's {[t, n, dn]}")
    if not return_lse:
        lse_out = _C.empty(1, dtype="float32")  # softmax_lse_flag off: a placeholder
    else:
        if lse is None:
            lse = _C.empty(t, n, 1, dtype="float32" if hasattr(q_nope, "flags") else
                           __import__("torch").float32)
        elif tuple(getattr(lse, "shape", ())) != (t, n, 1):
            raise _C.ArgumentError(f"{_NAME}: lse has shape {list(getattr(lse, 'shape', []))}: must be "
                                   f"{[t, n, 1]} (float32)")
        lse_out = _view(lse, (t, n, 1, 1), "lse")
    _C._paged_attention_fia.out(q, cache, cache, out=[_view(output, (t, 1, n, dn), "output"), lse_out],
                                **keywords)
    return (output, lse) if return_lse else output



def _view(x, shape, name):
    return inplace_view(_NAME, x, shape, name)
