"""
npugraph: NPUGraph capture, task groups and task update on the CPU
"""
from __future__ import annotations
import typing
from . import cuda
from . import dist
from . import llm
from . import npu
__all__: list[str] = ['ArgumentError', 'Error', 'QuantWeight', 'ResourceError', 'StateError', 'TaskError', 'UnsupportedError', 'WaitTimeoutError', 'cuda', 'dist', 'empty', 'empty_cache', 'kernel_fusion', 'llm', 'memory_stats', 'npu', 'npu_add_rms_norm', 'npu_argmax', 'npu_embedding', 'npu_fused_infer_attention_score', 'npu_fused_infer_attention_score_v2', 'npu_linear', 'npu_rms_norm', 'npu_rotary_embedding', 'npu_sample', 'npu_silu_mul', 'npu_swiglu', 'npu_weight_quant_linear', 'reset_accumulated_memory_stats', 'reset_peak_memory_stats', 'set_kernel_fusion', 'set_log_level', 'start_trace', 'stop_trace', 'zeros']
class ArgumentError(Error, ValueError):
    """
    A bad argument: the message names the argument, the value and the rule.
    """
class Error(RuntimeError):
    """
    Base of npugraph's errors (a RuntimeError).
    """
class QuantWeight:
    """
    QuantWeight(data, type, rows, cols, layout='rows'): a [rows, cols] matrix of ggml blocks.
    data: a contiguous uint8/int8 numpy array or torch tensor of rows * cols / block blocks (shared,
    not copied); type: 'Q4_0', 'Q4_1', 'Q5_0', 'Q8_0' (blocks of 32), 'Q4_K', 'Q5_K', 'Q6_K'
    (blocks of 256) or the ggml type number; cols a multiple of the block.
    layout: 'rows' (GGUF's) or 'rows16' (pack_rows16's, Q4_0/Q4_1/Q8_0: groups of 16 rows
    interleaved for the cpu GEMV with activations='q8'; ceil(rows / 16) * 16 rows of bytes).
    """
    @staticmethod
    def quantize(values: typing.Any, type: typing.Any) -> QuantWeight:
        """
        ggml's reference quantiser (quantize_row_*_ref) of a float32 [rows, cols] matrix.
        """
    def __init__(self, data: typing.Any, type: typing.Any, rows: typing.Any, cols: typing.Any, layout: str = 'rows') -> None:
        ...
    def __repr__(self) -> str:
        ...
    def dequantize(self) -> typing.Any:
        """
        The matrix as float32 [rows, cols], exactly as ggml dequantises it.
        """
    def pack_rows16(self) -> QuantWeight:
        """
        The same matrix in the rows16 layout (new bytes): what the cpu GEMV with activations='q8'
        reads fastest, one weight row per SIMD lane; the engine packs its projections so.
        """
    def unpack_rows(self) -> QuantWeight:
        """
        A rows16 weight back in GGUF's rows layout (new bytes).
        """
    @property
    def cols(self) -> int:
        ...
    @property
    def data(self) -> typing.Any:
        ...
    @property
    def layout(self) -> str:
        ...
    @property
    def rows(self) -> int:
        ...
    @property
    def shape(self) -> tuple:
        ...
    @property
    def type(self) -> str:
        ...
class ResourceError(Error, MemoryError):
    """
    Out of memory or another resource.
    """
class StateError(Error, RuntimeError):
    """
    A call that is illegal in the current state (capture, update, lifetime).
    """
class TaskError(Error, RuntimeError):
    """
    A task failed while it ran on a stream.
    """
class UnsupportedError(Error, NotImplementedError):
    """
    The backend lacks the feature.
    """
class WaitTimeoutError(Error, RuntimeError):
    """
    A wait passed its deadline (a stalled ExternalEvent wait, a timed synchronize).
    """
class _FusedInferAttentionScore:
    """
    npu_fused_infer_attention_score(query, key, value, *, pse_shift=None, atten_mask=None, actual_seq_lengths=None, actual_seq_lengths_kv=None, dequant_scale1=None, quant_scale1=None, dequant_scale2=None, quant_scale2=None, quant_offset2=None, antiquant_scale=None, antiquant_offset=None, block_table=None, query_padding_size=None, kv_padding_size=None, key_antiquant_scale=None, key_antiquant_offset=None, value_antiquant_scale=None, value_antiquant_offset=None, key_shared_prefix=None, value_shared_prefix=None, actual_shared_prefix_len=None, query_rope=None, key_rope=None, key_rope_antiquant_scale=None, num_heads=1, scale=1.0, pre_tokens=2147483647, next_tokens=2147483647, input_layout='BSH', num_key_value_heads=0, sparse_mode=0, inner_precise=0, block_size=0, antiquant_mode=0, softmax_lse_flag=False, key_antiquant_mode=0, value_antiquant_mode=0) -> (attention_out, softmax_lse)
    
    torch_npu's fused attention for inference (prefill and decode, paged KV, GQA, masks, int8 KV),
    on the CPU. query/key/value are torch CPU tensors or numpy arrays (float16, bfloat16; int8 KV
    with antiquant_*); results come back as the kind of the query. attention_out has the output
    layout and the query's dtype (int8 with quant_scale2); softmax_lse is float32 [B, N, Sq, 1] when
    softmax_lse_flag=True, else a 1-element tensor.
    
    Keywords (defaults as torch_npu's):
        pse_shift                = None        position shift added to the scores, [B or 1, N, Sq, Skv] (float16/bfloat16)
        atten_mask               = None        bool/int8/uint8 mask, 1 = masked: [Sq, Skv], [B, Sq, Skv], [B, 1, Sq, Skv] or the compressed 2048x2048 form of sparse_mode 2/3/4
        actual_seq_lengths       = None        query lengths per batch (TND: cumulative); updatable
        actual_seq_lengths_kv    = None        key/value lengths per batch (TND: cumulative); updatable
        dequant_scale1           = None        int8 query only: rejected
        quant_scale1             = None        int8 query only: rejected
        dequant_scale2           = None        int8 query only: rejected
        quant_scale2             = None        output quantisation scale (int8 output)
        quant_offset2            = None        output quantisation offset
        antiquant_scale          = None        int8 KV dequantisation scale (key and value together)
        antiquant_offset         = None        int8 KV dequantisation offset
        block_table              = None        int32 [B, max_blocks]: paged KV; contents read at run time
        query_padding_size       = None        int64 [1]: left padding of the query rows
        kv_padding_size          = None        int64 [1]: left padding of the key/value rows
        key_antiquant_scale      = None        int8 key dequantisation scale
        key_antiquant_offset     = None        int8 key dequantisation offset
        value_antiquant_scale    = None        int8 value dequantisation scale
        value_antiquant_offset   = None        int8 value dequantisation offset
        key_shared_prefix        = None        keys of a prefix every batch shares
        value_shared_prefix      = None        values of that prefix
        actual_shared_prefix_len = None        the prefix's length (one value); updatable
        query_rope               = None        rope part of the query (MLA-style split heads)
        key_rope                 = None        rope part of the key
        key_rope_antiquant_scale = None        reserved: must be None
        num_heads                = 1           query heads N
        scale                    = 1.0         score scale; updatable
        pre_tokens               = 2147483647  band: keys before the diagonal (sparse_mode 0/4); updatable
        next_tokens              = 2147483647  band: keys after the diagonal; updatable
        input_layout             = 'BSH'       BSH, BSND, BNSD, TND, NTD, BNSD_BSND, ... (docs/fia.md, Layouts)
        num_key_value_heads      = 0           KV heads (0: num_heads); GQA when fewer
        sparse_mode              = 0           0 full/band, 1 all, 2 left-up causal, 3 right-down causal, 4 band
        inner_precise            = 0           0/1 high precision, 2/3 high performance (row-invalid correction)
        block_size               = 0           tokens per KV block of block_table
        antiquant_mode           = 0           0 per channel, 1 per token
        softmax_lse_flag         = False       also return the softmax log-sum-exp, float32 [B, N, Sq, 1]
        key_antiquant_mode       = 0           key dequantisation mode
        value_antiquant_mode     = 0           value dequantisation mode
    
    Inside a capture with auto_dispatch_capture=True the call is recorded into its own task group and
    NPUGraph.update(cpu_update_input=[{...}]) re-issues it. Updatable: actual_seq_lengths, actual_seq_lengths_kv, actual_shared_prefix_len, scale, pre_tokens, next_tokens, and any tensor pointing at other memory of the same shape and dtype. Other keywords
    are fixed at capture (an update changing one: ArgumentError "... not updatable").
    
    .out(query, key, value, *, workspace, out=[attention_out, softmax_lse], **keywords): the form a
    task group captures, writing caller-owned outputs with a workspace from
    _npu_fused_infer_attention_score_get_max_workspace (the only form an update may bind).
    
    Raises: TypeError (a keyword of the wrong type, an unknown keyword), npugraph.ArgumentError (a
    ValueError: shapes, layouts, lengths, masks, block tables: the message names the argument, the
    value and the rule), npugraph.StateError (the allocating form inside an update), npugraph.TaskError
    (a check that needs device values, such as a block_table entry, failing when the kernel runs).
    Full reference: docs/fia.md.
    """
    def __call__(self, query: typing.Any, key: typing.Any, value: typing.Any, **kwargs) -> typing.Any:
        ...
    def __repr__(self) -> str:
        ...
    def out(self, query: typing.Any, key: typing.Any, value: typing.Any, *, workspace: typing.Any = None, out: typing.Any, **kwargs) -> typing.Any:
        """
        out(query, key, value, *, workspace=None, out=[attention_out, softmax_lse], **keywords) -> out: writes caller-owned outputs, with the caller's workspace (_npu_fused_infer_attention_score_get_max_workspace) or, without one, a workspace sized for the call; the form task groups capture and updates re-issue, recorded like the functional form under auto_dispatch_capture. Keywords and errors: help(npugraph.npu_fused_infer_attention_score).
        """
    @property
    def __signature__(self):
        ...
class _FusedInferAttentionScoreV2:
    """
    torch_npu's npu_fused_infer_attention_score_v2(query, key, value, **kwargs) -> (attention_out, softmax_lse); .out(..., workspace=None, out=[attention_out, softmax_lse])
    """
    def __call__(self, query: typing.Any, key: typing.Any, value: typing.Any, **kwargs) -> typing.Any:
        ...
    def __repr__(self) -> str:
        ...
    def out(self, query: typing.Any, key: typing.Any, value: typing.Any, *, workspace: typing.Any = None, out: typing.Any, **kwargs) -> typing.Any:
        """
        out(query, key, value, *, workspace=None, out=[attention_out, softmax_lse], **keywords) -> out: writes caller-owned outputs, with the caller's workspace (_npu_fused_infer_attention_score_v2_get_max_workspace) or, without one, a workspace sized for the call; the form task groups capture and updates re-issue, recorded like the functional form under auto_dispatch_capture. Keywords and errors: help(npugraph.npu_fused_infer_attention_score).
        """
class _PagedAttentionFia:
    """
    torch_npu's _npu_paged_attention(query, key, value, **kwargs) -> (attention_out, softmax_lse); .out(..., workspace=None, out=[attention_out, softmax_lse])
    """
    def __call__(self, query: typing.Any, key: typing.Any, value: typing.Any, **kwargs) -> typing.Any:
        ...
    def __repr__(self) -> str:
        ...
    def out(self, query: typing.Any, key: typing.Any, value: typing.Any, *, workspace: typing.Any = None, out: typing.Any, **kwargs) -> typing.Any:
        """
        out(query, key, value, *, workspace=None, out=[attention_out, softmax_lse], **keywords) -> out: writes caller-owned outputs, with the caller's workspace (get_max_workspace) or, without one, a workspace sized for the call; the form task groups capture and updates re-issue, recorded like the functional form under auto_dispatch_capture. Keywords and errors: help(npugraph.npu_fused_infer_attention_score).
        """
def _allocator_stats() -> dict:
    """
    torch's allocator counters (allocation, allocated_bytes, requested_bytes, segment, reserved_bytes; each .{all,small_pool,large_pool}.{current,peak,allocated,freed}) and event counts; npugraph.npu.memory_stats() adds the rest of torch's keys.
    """
def _fia_keywords(v2: bool = False) -> list[str]:
    """
    The keywords the FIA parser accepts (sorted; v2=True: npu_fused_infer_attention_score_v2's), for the docs' check.
    """
def _in_internal_torch() -> bool:
    """
    Whether this thread is inside npugraph's own use of torch (the capture's torch-op check skips it).
    """
def _launch_callable(stream: typing.Any, fn: typing.Any) -> None:
    """
    Enqueues fn() on `stream` (the task that replays a captured torch op; npugraph/_torch_capture.py).
    """
def _memory_snapshot() -> list:
    """
    Every segment of the allocator (one block each), by address; npugraph.npu.memory_snapshot() gives them torch's shape.
    """
def _npu_fused_infer_attention_score_get_max_workspace(query: typing.Any, key: typing.Any, value: typing.Any, **kwargs) -> typing.Any:
    """
    The workspace (uint8) the .out form needs for the worst case of these shapes.
    """
def _npu_fused_infer_attention_score_v2_get_max_workspace(query: typing.Any, key: typing.Any, value: typing.Any, **kwargs) -> typing.Any:
    """
    The workspace (uint8) the .out form needs for the worst case of these shapes.
    """
def _npu_reshape_and_cache(key: typing.Any, value: typing.Any, key_cache: typing.Any, value_cache: typing.Any, slot_indices: typing.Any, *, cache_layout: str = 'token_major') -> None:
    """
    torch_npu._npu_reshape_and_cache: writes key/value [tokens, kv_heads, head_dim] into the paged
    caches at slot_indices (int32, slot = block * block_size + offset; negative: skipped).
    cache_layout: 'token_major' (torch_npu's): [num_blocks, block_size, kv_heads * head_dim] (or
    [..., kv_heads, head_dim]); 'head_major' (npugraph's): [num_blocks, kv_heads, block_size, head_dim],
    which fused_infer_attention_score reads as a BNSD paged cache. A slot past the cache raises
    npugraph.TaskError naming it (nothing written).
    """
def _torch_op_route(ordering: bool) -> int:
    """
    How npugraph/_torch_capture.py routes a torch op: 0 now, 1 into the capture, 2 behind pending work.
    """
def empty(*args, dtype: typing.Any = None, device: typing.Any = None) -> typing.Any:
    """
    An uninitialised tensor (numpy array, or torch tensor for a torch dtype); inside a capture it comes from the graph's pool.
    """
def empty_cache() -> None:
    """
    Returns the default pool's cached free blocks to the system (waits for queued work first; a synchronizing call, refused inside a capture).
    """
def kernel_fusion() -> bool:
    """
    Whether graphs instantiated now fuse (set_kernel_fusion).
    """
def memory_stats() -> dict:
    """
    The caching allocator's totals over every pool: reserved_bytes (held from the system), allocated_bytes (handed to live tensors), segments, pools, and the peaks of the first two since reset_peak_memory_stats().
    """
def npu_add_rms_norm(x1: typing.Any, x2: typing.Any, gamma: typing.Any, epsilon: float = 1e-06) -> tuple:
    """
    torch_npu.npu_add_rms_norm: x = x1 + x2, then (y, rstd, x) with y = rms_norm(x).
    """
def npu_argmax(logits: typing.Any, *, out: typing.Any = None) -> typing.Any:
    """
    The index (int32) of each row's largest logit; ties give the lowest index, NaN wins.
    """
def npu_embedding(ids: typing.Any, table: typing.Any, *, out: typing.Any = None, out_dtype: typing.Any = None) -> typing.Any:
    """
    table[ids]: ids int32 (any shape, read when the op runs), table a QuantWeight or a float matrix
    [vocab, hidden]. An id outside the vocabulary raises npugraph.TaskError naming it (nothing written).
    """
def npu_linear(x: typing.Any, weight: typing.Any, bias: typing.Any = None, *, out: typing.Any = None, out_dtype: typing.Any = None) -> typing.Any:
    """
    torch.nn.functional.linear for a float32 / float16 / bfloat16 weight [N, K]: x float32 [..., K].
    """
def npu_rms_norm(x: typing.Any, gamma: typing.Any, epsilon: float = 1e-06, *, out: typing.Any = None) -> tuple:
    """
    torch_npu.npu_rms_norm: (y, rstd) with rstd = 1 / sqrt(mean(x^2, -1) + epsilon) (float32 [..., 1])
    and y = x * rstd * gamma. With out=, y is written there and rstd is None.
    """
def npu_rotary_embedding(positions: typing.Any, x: typing.Any, *, theta: float = 10000.0, style: typing.Any = 'neox', rotary_dim: int = 0, freq_scale: float = 1.0, freq_factors: typing.Any = None, out: typing.Any = None, out_dtype: typing.Any = None) -> typing.Any:
    """
    Rotary embedding of x [tokens, heads, head_dim] by positions (int32 [tokens], read when the op
    runs, so a captured graph follows it). style 'neox': pairs (i, i + d/2) (Hugging Face's
    rotate_half); 'norm': adjacent pairs (2i, 2i + 1) — what llama.cpp uses for Llama GGUF files.
    out may be x itself (in place). Scaling (llama.cpp's rope_ext): every angle times freq_scale
    (linear scaling: 1 / factor) and divided by freq_factors[i] (float32 [rotary_dim / 2], Llama 3's
    rope_freqs).
    """
def npu_sample(logits: typing.Any, seeds: typing.Any, steps: typing.Any, *, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, advance_steps: bool = False, out: typing.Any = None) -> typing.Any:
    """
    A token per row of logits [batch, vocab] (float32): temperature (0: greedy), top_k (0: off),
    top_p (1: off), drawn with Philox4x32-10 from (seeds[b], steps[b], b) (int64 tensors read when
    the op runs); advance_steps=True adds 1 to each step after drawing, so a captured graph draws
    anew at every replay.
    """
def npu_silu_mul(gate: typing.Any, up: typing.Any, *, out: typing.Any = None) -> typing.Any:
    """
    silu(gate) * up for separate gate and up projections (the two-input SwiGLU).
    """
def npu_swiglu(x: typing.Any, dim: int = -1, *, out: typing.Any = None) -> typing.Any:
    """
    torch_npu.npu_swiglu: x = [a, b] split in halves along the last dim; silu(a) * b.
    """
def npu_weight_quant_linear(x: typing.Any, weight: QuantWeight, bias: typing.Any = None, *, out: typing.Any = None, out_dtype: typing.Any = None, activations: str = 'f32') -> typing.Any:
    """
    y = x @ dequant(weight).T (+ bias): x float32 [..., K], weight a QuantWeight [N, K], out float32 /
    float16 / bfloat16 [..., N], accumulated in float32; each row of y depends on its row of x only
    (not on how many rows the call has). activations="q8": calls of up to 16 rows quantise x to int8
    per block of 32 and take integer dot products, as llama.cpp does (cpu only).
    """
def reset_accumulated_memory_stats() -> None:
    """
    Zeroes the allocated/freed totals and the event counts of npugraph.npu.memory_stats().
    """
def reset_peak_memory_stats() -> None:
    """
    Restarts the peak_* values of memory_stats() from the current ones.
    """
def set_kernel_fusion(on: bool) -> None:
    """
    Whether graphs instantiated from now on run registered pairs of neighbouring kernels as one task (add then rms_norm, a rotation then its cache write), with the same bits; on by default, NPUGRAPH_KERNEL_FUSION=0 starts it off. Graphs already instantiated keep their tasks.
    """
def set_log_level(level: typing.Any) -> None:
    """
    Logs capture, instantiation, task updates (info) and replay launches (debug) to stderr; NPUGRAPH_LOG=info sets it from the environment.
    """
def start_trace() -> None:
    """
    Begins recording a timeline of every task the streams run (npugraph.profile wraps it).
    """
def stop_trace(path: typing.Any = None) -> typing.Any:
    """
    Ends the recording: writes Chrome trace JSON to `path`, or returns it when path is None.
    """
def zeros(*args, dtype: typing.Any = None, device: typing.Any = None) -> typing.Any:
    """
    A zero-filled tensor; inside a capture the fill is a graph task (replays zero it again).
    """
_paged_attention_fia: _PagedAttentionFia  # value = <npugraph op _npu_paged_attention>
npu_fused_infer_attention_score: _FusedInferAttentionScore  # value = <npugraph op npu_fused_infer_attention_score>
npu_fused_infer_attention_score_v2: _FusedInferAttentionScoreV2  # value = <npugraph op npu_fused_infer_attention_score_v2>
