"""The documented signature of ``npugraph.npu_fused_infer_attention_score`` and its ``.out`` form.

The op is a C++ object (its keywords are parsed in C++, without a Python frame per call); this
module gives it what ``help()`` and ``inspect.signature`` read: every keyword with its default
(the defaults of ``npugraph::ops::FiaOptions``), which ones an update may change, and the errors.
tests/python/test_docs.py checks that the keywords here are exactly the ones the parser accepts.
"""
import inspect as _inspect

# (name, default, what it is). Order: torch_npu's.
KEYWORDS = (
    ("pse_shift", None, "position shift added to the scores, [B or 1, N, Sq, Skv] (float16/bfloat16)"),
    ("atten_mask", None, "bool/int8/uint8 mask, 1 = masked: [Sq, Skv], [B, Sq, Skv], [B, 1, Sq, Skv] "
                         "or the compressed 2048x2048 form of sparse_mode 2/3/4"),
    ("actual_seq_lengths", None, "query lengths per batch (TND: cumulative); updatable"),
    ("actual_seq_lengths_kv", None, "key/value lengths per batch (TND: cumulative); updatable"),
    ("dequant_scale1", None, "int8 query only: rejected"),
    ("quant_scale1", None, "int8 query only: rejected"),
    ("dequant_scale2", None, "int8 query only: rejected"),
    ("quant_scale2", None, "output quantisation scale (int8 output)"),
    ("quant_offset2", None, "output quantisation offset"),
    ("antiquant_scale", None, "int8 KV dequantisation scale (key and value together)"),
    ("antiquant_offset", None, "int8 KV dequantisation offset"),
    ("block_table", None, "int32 [B, max_blocks]: paged KV; contents read at run time"),
    ("query_padding_size", None, "int64 [1]: left padding of the query rows"),
    ("kv_padding_size", None, "int64 [1]: left padding of the key/value rows"),
    ("key_antiquant_scale", None, "int8 key dequantisation scale"),
    ("key_antiquant_offset", None, "int8 key dequantisation offset"),
    ("value_antiquant_scale", None, "int8 value dequantisation scale"),
    ("value_antiquant_offset", None, "int8 value dequantisation offset"),
    ("key_shared_prefix", None, "keys of a prefix every batch shares"),
    ("value_shared_prefix", None, "values of that prefix"),
    ("actual_shared_prefix_len", None, "the prefix's length (one value); updatable"),
    ("query_rope", None, "rope part of the query (MLA-style split heads)"),
    ("key_rope", None, "rope part of the key"),
    ("key_rope_antiquant_scale", None, "reserved: must be None"),
    ("num_heads", 1, "query heads N"),
    ("scale", 1.0, "score scale; updatable"),
    ("pre_tokens", 2147483647, "band: keys before the diagonal (sparse_mode 0/4); updatable"),
    ("next_tokens", 2147483647, "band: keys after the diagonal; updatable"),
    ("input_layout", "BSH", "BSH, BSND, BNSD, TND, NTD, BNSD_BSND, ... (docs/fia.md, Layouts)"),
    ("num_key_value_heads", 0, "KV heads (0: num_heads); GQA when fewer"),
    ("sparse_mode", 0, "0 full/band, 1 all, 2 left-up causal, 3 right-down causal, 4 band"),
    ("inner_precise", 0, "0/1 high precision, 2/3 high performance (row-invalid correction)"),
    ("block_size", 0, "tokens per KV block of block_table"),
    ("antiquant_mode", 0, "0 per channel, 1 per token"),
    ("softmax_lse_flag", False, "also return the softmax log-sum-exp, float32 [B, N, Sq, 1]"),
    ("key_antiquant_mode", 0, "key dequantisation mode"),
    ("value_antiquant_mode", 0, "value dequantisation mode"),
)

_UPDATABLE = ("actual_seq_lengths, actual_seq_lengths_kv, actual_shared_prefix_len, scale, "
              "pre_tokens, next_tokens, and any tensor pointing at other memory of the same shape "
              "and dtype")


def _parameters(out_form):
    p = [_inspect.Parameter(n, _inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in ("query", "key", "value")]
    if out_form:
        p += [_inspect.Parameter("workspace", _inspect.Parameter.KEYWORD_ONLY),
              _inspect.Parameter("out", _inspect.Parameter.KEYWORD_ONLY)]
    p += [_inspect.Parameter(n, _inspect.Parameter.KEYWORD_ONLY, default=d) for n, d, _ in KEYWORDS]
    return p


SIGNATURE = _inspect.Signature(_parameters(False))
OUT_SIGNATURE = _inspect.Signature(_parameters(True))


def _keyword_lines():
    width = max(len(n) for n, _, _ in KEYWORDS)
    return "\n".join(f"    {n:<{width}} = {d!r:<10}  {what}" for n, d, what in KEYWORDS)


DOC = f"""npu_fused_infer_attention_score{SIGNATURE} -> (attention_out, softmax_lse)

torch_npu's fused attention for inference (prefill and decode, paged KV, GQA, masks, int8 KV),
on the CPU. query/key/value are torch CPU tensors or numpy arrays (float16, bfloat16; int8 KV
with antiquant_*); results come back as the kind of the query. attention_out has the output
layout and the query's dtype (int8 with quant_scale2); softmax_lse is float32 [B, N, Sq, 1] when
softmax_lse_flag=True, else a 1-element tensor.

Keywords (defaults as torch_npu's):
{_keyword_lines()}

Inside a capture with auto_dispatch_capture=True the call is recorded into its own task group and
NPUGraph.update(cpu_update_input=[{{...}}]) re-issues it. Updatable: {_UPDATABLE}. Other keywords
are fixed at capture (an update changing one: ArgumentError "... not updatable").

.out(query, key, value, *, workspace, out=[attention_out, softmax_lse], **keywords): the form a
task group captures, writing caller-owned outputs with a workspace from
_npu_fused_infer_attention_score_get_max_workspace (the only form an update may bind).

Raises: TypeError (a keyword of the wrong type, an unknown keyword), npugraph.ArgumentError (a
ValueError: shapes, layouts, lengths, masks, block tables: the message names the argument, the
value and the rule), npugraph.StateError (the allocating form inside an update), npugraph.TaskError
(a check that needs device values, such as a block_table entry, failing when the kernel runs).
Full reference: docs/fia.md."""

OUT_DOC = f"""out{OUT_SIGNATURE} -> out

npu_fused_infer_attention_score writing into out=[attention_out, softmax_lse] with a caller-owned
workspace (_npu_fused_infer_attention_score_get_max_workspace gives one large enough for every
update of these shapes). The form captured inside task groups and re-issued by task updates;
keywords and errors as npu_fused_infer_attention_score (help(npugraph.npu_fused_infer_attention_score))."""


def attach(op):
    """Gives the op's class the signature and docs (help() and inspect.signature read them)."""
    cls = type(op)
    cls.__doc__ = DOC
    cls.__signature__ = property(lambda self: SIGNATURE)
