"""Autocast on the npu device (``torch.autocast("npu")``, ``torch_npu.npu.amp.autocast``).

Note [Autocast on the npu device]
torch has autocast kernels for its own devices only; a backend named from Python gets an
``Autocastnpu`` dispatch key with nothing behind it, so every op under ``torch.autocast("npu")``
raises. torch_npu registers its kernels in C++; here they are registered from Python for the
PrivateUse1 autocast key, with CUDA's rules (torch's "Autocast Op Reference"):

- every op falls through (runs in the types it is given) unless it is listed;
- the lower-precision list (matrix products, convolutions, ``linear``, the RNN cells, ``prelu``)
  casts its floating-point arguments to the autocast dtype (``torch.get_autocast_dtype("npu")``,
  float16 by default);
- the float32 list (pointwise functions that lose range or precision in float16, reductions,
  norms, softmax and the losses) casts them to float32;
- the promote list (``addcmul``, ``addcdiv``, ``atan2``, ``cross``, ``dot``, ``index_put``,
  ``scatter_add``, ``tensordot``, ``bilinear``, ``grid_sampler``) casts them to the type they promote to together.

Only npu tensors of float16, bfloat16 and float32 are cast (float64 and CPU tensors never are), as
CUDA casts only its own device's tensors and never doubles. The cast is torch's ``Tensor.to``, so
autograd sees it. No cast cache: ``cache_enabled`` is accepted and each op casts its weights
again (the values are the same; a cache only saves the casts).
"""

import functools as _functools

__all__ = ["register"]

_LOWER = ("mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "addr", "matmul", "chain_matmul",
          "linalg_multi_dot", "linear", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d",
          "conv_transpose2d", "conv_transpose3d", "convolution", "_convolution", "prelu",
          "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell", "_thnn_fused_lstm_cell",
          "_thnn_fused_gru_cell", "einsum")
_FP32 = ("acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
         "reciprocal", "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "group_norm",
         "norm", "nuclear_norm", "frobenius_norm", "cosine_similarity", "poisson_nll_loss",
         "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div",
         "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss",
         "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
         "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
         "softmax", "log_softmax", "cumprod", "cumsum", "prod", "sum", "cross_entropy_loss")
_PROMOTE = ("addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sampler", "index_put",
            "scatter_add", "tensordot")
_state = {"lib": None}


def _overloads(torch, name):
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        return []
    found = []
    for overload in packet.overloads():
        op = getattr(packet, overload)
        if any(a.kwarg_only and a.alias_info is not None and a.alias_info.is_write
               for a in op._schema.arguments):
            continue  # out= forms fall through, as CUDA's
        found.append((name if overload == "default" else f"{name}.{overload}", op))
    return found


def register(torch):
    """Registers the npu autocast kernels (idempotent)."""
    if _state["lib"] is not None:
        return
    from torch.utils._pytree import tree_map

    castable = (torch.float16, torch.bfloat16, torch.float32)
    if hasattr(torch, "get_autocast_dtype"):
        autocast_dtype = _functools.partial(torch.get_autocast_dtype, "npu")
    else:  # torch 2.3: the device module holds it (npugraph/_npu_device.py _device_module)
        autocast_dtype = torch.npu.get_autocast_dtype
    excluded = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)

    def eligible(x):
        return isinstance(x, torch.Tensor) and x.dtype in castable and x.device.type == "npu"

    def kernel_for(op, policy):
        def kernel(*args, **kwargs):
            with torch._C._ExcludeDispatchKeyGuard(excluded):
                if policy == "lower":
                    dtype = autocast_dtype()
                elif policy == "fp32":
                    dtype = torch.float32
                else:
                    seen = [x.dtype for x in _leaves(args, kwargs, torch) if eligible(x)]
                    dtype = _functools.reduce(torch.promote_types, seen) if seen else None
                if dtype is not None:
                    args, kwargs = tree_map(lambda x: x.to(dtype) if eligible(x) and x.dtype != dtype else x,
                                            (args, kwargs))
                return op(*args, **kwargs)

        return kernel

    fallback = torch.library.Library("_", "IMPL")
    if hasattr(fallback, "fallback"):
        fallback.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    else:  # torch < 2.5: no Library.fallback; the C++ library under it has the fallthrough
        fallback.m.fallback_fallthrough("AutocastPrivateUse1")
    lib = torch.library.Library("aten", "IMPL")
    for names, policy in ((_LOWER, "lower"), (_FP32, "fp32"), (_PROMOTE, "promote")):
        for name in names:
            for qualified, op in _overloads(torch, name):
                lib.impl(qualified, kernel_for(op, policy), "AutocastPrivateUse1")
    _state["lib"] = (fallback, lib)


def _leaves(args, kwargs, torch):
    from torch.utils._pytree import tree_flatten

    return tree_flatten((args, kwargs))[0]
