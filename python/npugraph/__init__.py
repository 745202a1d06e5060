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
    memory_stats,
    npu_fused_infer_attention_score,
    zeros,
)

from ._graph import graph as _graph

npu = _C.npu
npu.graph = _graph  # the capture context, with its torch-op check (Note in _graph.py)
_sys.modules[__name__ + ".npu"] = npu
llm = _C.llm  # the decode engine: npugraph.llm.Engine(model_path).generate([...])
_sys.modules[__name__ + ".llm"] = llm

__all__ = [
    "ArgumentError", "Error", "StateError", "TaskError", "UnsupportedError", "WaitTimeoutError",
    "_npu_fused_infer_attention_score_get_max_workspace", "empty", "llm", "memory_stats", "npu",
    "npu_fused_infer_attention_score", "zeros",
]
