"""npugraph: capture stream work into graphs, mark kernel launches as task groups, update their
parameters in place, replay — the NPUGraph model of torch_npu, on the CPU.

Names mirror torch_npu: ``npugraph.npu`` holds what ``torch.npu`` / ``torch_npu.npu`` hold
(``NPUGraph``, ``graph``, ``Stream``, ``ExternalEvent``, ``graph_task_group_begin`` ...), and
``npugraph.npu_fused_infer_attention_score`` is the attention op with its ``.out`` form.
Tensors are numpy arrays or torch CPU tensors, shared without copies; results come back as the
kind of the query.
"""
import sys as _sys

from . import _C
from ._C import (
    ArgumentError,
    Error,
    StateError,
    TaskError,
    UnsupportedError,
    WaitTimeoutError,
    _npu_fused_infer_attention_score_get_max_workspace,
    empty,
    empty_cache,
    kernel_fusion,
    memory_stats,
    npu_fused_infer_attention_score,
    reset_peak_memory_stats,
    set_kernel_fusion,
    set_log_level,
    start_trace,
    stop_trace,
    zeros,
)

from . import _fia_doc, _npu_api, _npugraph_handlers, _npugraph_utils, _pinned
from ._paged_attention import _npu_paged_attention, _npu_paged_attention_get_workspace
from ._mla import npu_multi_head_latent_attention
from . import _graph as _graph_module
from ._graph import graph as _graph
from ._render import render as _render
from ._trace import profile

_fia_doc.attach(npu_fused_infer_attention_score)

# The decode engine's ops (npu_rms_norm, npu_swiglu, npu_weight_quant_linear, _npu_reshape_and_cache,
# ...), ResourceError and QuantWeight: every other public name of the extension, at the top level.
for _name in dir(_C):
    if _name.startswith(("npu_", "_npu_")) or _name in ("QuantWeight", "ResourceError"):
        globals().setdefault(_name, getattr(_C, _name))

npu = _C.npu
npu.graph = _graph  # the capture context, recording torch ops too (Note in _torch_capture.py)
npu.NPUGraph.capture_begin = _graph_module.capture_begin
npu.NPUGraph.capture_end = _graph_module.capture_end
npu.NPUGraph.replay = _graph_module.replay  # random ops draw in host order (_rng.py)
npu.NPUGraph.reset = _graph_module.reset  # and releases the graph's pinned host blocks (_pinned.py)
npu.NPUGraph.register_generator_state = _graph_module.register_generator_state
npu.NPUGraph.render = _render  # the DOT dump drawn by Graphviz (_render.py)
npu.NPUGraph.debug_dump = _graph_module.debug_dump  # JSON (+ the aligned view) or DOT
npu.NPUGraph.graph_dispatch_mode = _graph_module.graph_dispatch_mode
npu.NpuGraphOpHandler = _npugraph_handlers.NpuGraphOpHandler  # torch_npu master's handler registry
npu.register_npu_graph_handler = _npugraph_handlers.register_npu_graph_handler
npu._npugraph_handlers = _npugraph_handlers
npu._npugraph_utils = _npugraph_utils
for _name in _npu_api.__all__:  # torch.cuda's names written in Python (memory, device, ...)
    setattr(npu, _name, getattr(_npu_api, _name))
for _name in _pinned.__all__:  # the pinned host allocator's statistics
    setattr(npu, _name, getattr(_pinned, _name))
_sys.modules[__name__ + ".npu"] = npu
cuda = _C.cuda  # device_count / is_available: the GPUs of the CUDA backend
_sys.modules[__name__ + ".cuda"] = cuda
llm = _C.llm  # the decode engine: npugraph.llm.Engine(model_path).generate([...])
_sys.modules[__name__ + ".llm"] = llm

__all__ = sorted(
    ["ArgumentError", "Error", "StateError", "TaskError", "UnsupportedError", "WaitTimeoutError",
     "cuda", "empty", "empty_cache", "kernel_fusion", "llm", "memory_stats", "npu", "profile",
     "reset_peak_memory_stats", "set_kernel_fusion", "set_log_level", "start_trace", "stop_trace", "zeros", "_npu_paged_attention",
     "_npu_paged_attention_get_workspace", "npu_multi_head_latent_attention"]
    + [n for n in dir(_C) if n.startswith(("npu_", "_npu_")) or n in ("QuantWeight", "ResourceError")])
