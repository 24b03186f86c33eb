"""Parameters that take their checkpoint's dtype before loading, so that its bytes land directly.

A parameter declared with `dtype_follows_checkpoint=True` is converted by weight processing, which reads any
float dtype (e.g. the FP8 experts' block scales, turned into the float32 kernel layout). Declared in the dtype
processing wants, it would receive checkpoint tensors of another dtype one conversion at a time: a weight-loader
call and a small copy kernel per tensor (Qwen3-30B-A3B-FP8 stores 18,432 bf16 expert scale tensors, delivered
in 1.5 s of the H100 load). `adopt_checkpoint_dtypes` gives such a parameter, before the bindings are made, the
dtype all of its checkpoint tensors share, when that is one of the dtypes it was declared to accept: the tensors
then land straight in it as bytes, and processing's conversion does the rest at once. The values are the same
(the conversion happens later instead of per tensor).
"""

from __future__ import annotations

import logging

import torch
from torch import nn

from quickmoe.checkpoint.reader import CheckpointReader

__all__ = ["adopt_checkpoint_dtypes"]

logger = logging.getLogger(__name__)


def _checkpoint_names(name: str, param: nn.Parameter) -> list[str]:
    """The checkpoint tensors that fill `param` (its own name, or its parts' names under its module)."""
    parts = getattr(param, "checkpoint_parts", None)
    if parts is None:
        return [name]
    prefix = name.rpartition(".")[0]
    return [f"{prefix}.{part.name}" if prefix else part.name for part in parts if part.weight_loader is not None]


def adopt_checkpoint_dtypes(model: nn.Module, reader: CheckpointReader) -> dict[str, torch.dtype]:
    """Give each `dtype_follows_checkpoint` parameter of `model` the dtype its checkpoint tensors share (when
    they all exist, share one dtype, and the parameter accepts it: `checkpoint_dtype` or one of
    `checkpoint_alt_dtypes`); returns {parameter name: adopted dtype} for those that changed. Anything else
    (a missing tensor, mixed or unexpected dtypes) is left for the loader's validation to report."""
    adopted: dict[str, torch.dtype] = {}
    for name, param in model.named_parameters():
        if not getattr(param, "dtype_follows_checkpoint", False):
            continue
        entries = [reader.entries.get(n) for n in _checkpoint_names(name, param)]
        if not entries or any(e is None for e in entries):
            continue
        dtypes = {e.dtype for e in entries}
        if len(dtypes) != 1:
            continue
        dtype = dtypes.pop()
        if dtype == param.dtype or dtype not in (param.checkpoint_dtype, *param.checkpoint_alt_dtypes):
            continue
        param.data = torch.empty(param.shape, dtype=dtype, device=param.device)  # uninitialised, as declared
        adopted[name] = dtype
    if adopted:
        logger.debug("%d parameter(s) take their checkpoint's dtype until processing: %s", len(adopted),
                     ", ".join(f"{n} {str(d).removeprefix('torch.')}" for n, d in list(adopted.items())[:4]))
    return adopted
