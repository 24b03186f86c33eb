"""Which checkpoint tensor fills which parameter: the `Binding`s a built model declares.

A parameter declared with `declare_weight` is bound to the checkpoint tensor of its own name, unless it
lists `checkpoint_parts` (several tensors, each filling a part of it: per-expert tensors stacked into one
parameter), whose names are relative to the parameter's module. A binding's bytes may *land directly* in
the parameter (no weight-loader call, no staging) when they are a contiguous run of it with the same dtype:
a plain copy of the whole parameter, or a `SliceLoader` part of a contiguous parameter.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import NamedTuple

import torch
from torch import nn

from quickmoe.checkpoint.reader import TensorSpec
from quickmoe.checkpoint.weight_loaders import Narrow, SliceLoader, WeightLoader, copy_weight_loader, slice_strides

__all__ = ["Binding", "checkpoint_bindings"]


class Binding(NamedTuple):
    """Checkpoint tensor `spec.name` goes into parameter `param_name` through `weight_loader`;
    `direct_offset` is the element offset of its bytes in the parameter when they may land directly. `narrow`:
    only that slice (dim, start, length) of the tensor is this rank's (checkpoint/narrow.py resolves it before
    reading); `weight_loader` None: the tensor is another rank's (validated, not read)."""

    param_name: str
    param: nn.Parameter
    spec: TensorSpec
    weight_loader: WeightLoader | None
    direct_offset: int | None
    narrow: Narrow | None = None


def _whole_copy_offset(param: nn.Parameter) -> int | None:
    same = (param.weight_loader is copy_weight_loader and param.dtype == param.checkpoint_dtype
            and tuple(param.shape) == tuple(param.checkpoint_shape) and param.is_contiguous())
    return 0 if same else None


def checkpoint_bindings(model: nn.Module, only: Collection[str] | None = None) -> dict[str, Binding]:
    """Checkpoint tensor name -> its binding, for every parameter of `model` (in parameter order); `only`: the
    bindings of those tensor names alone (a cached load plan's delivered tensors: a stacked parameter's parts are
    gone through only where one of them is wanted)."""
    bindings: dict[str, Binding] = {}
    for name, param in model.named_parameters():
        if not hasattr(param, "checkpoint_dtype"):
            raise AssertionError(f"parameter {name} was not declared with declare_weight")
        parts = getattr(param, "checkpoint_parts", None)
        if only is not None and (name not in only if parts is None else not _wanted_below(name, only)):
            continue
        if parts is None:
            spec = TensorSpec(name, tuple(param.checkpoint_shape), param.checkpoint_dtype,
                              getattr(param, "checkpoint_alt_dtypes", ()))
            narrow = getattr(param, "checkpoint_narrow", None)
            _bind(bindings, Binding(name, param, spec, param.weight_loader,
                                    None if narrow else _whole_copy_offset(param), narrow))
            continue
        # up to ~1,500 parts a parameter, 74,000 in a model: the strides taken once, plain locals in the loop
        prefix = name.rpartition(".")[0]
        prefix = f"{prefix}." if prefix else ""
        strides = slice_strides(param)
        dtype = param.dtype
        for part in parts:
            loader = part.weight_loader
            offset = None
            if (strides is not None and part.narrow is None and isinstance(loader, SliceLoader)
                    and (dtype == part.dtype or dtype in part.alt_dtypes)):  # the sink checks the file's dtype
                offset = loader.offset_in(*strides)
            tensor = prefix + part.name
            if only is not None and tensor not in only:
                continue
            binding = Binding(name, param, TensorSpec(tensor, part.shape, part.dtype, part.alt_dtypes), loader, offset,
                              part.narrow)
            if bindings.setdefault(tensor, binding) is not binding:
                _claimed_twice(bindings[tensor], binding)
    return bindings


def _wanted_below(param_name: str, only: Collection[str]) -> bool:
    """Whether a tensor of `only` may be a part of the stacked parameter `param_name` (under its module)."""
    prefix = param_name.rpartition(".")[0]
    prefix = f"{prefix}." if prefix else ""
    return any(name.startswith(prefix) for name in only)


def _bind(bindings: dict[str, Binding], binding: Binding) -> None:
    if bindings.setdefault(binding.spec.name, binding) is not binding:
        _claimed_twice(bindings[binding.spec.name], binding)


def _claimed_twice(other: Binding, binding: Binding) -> None:
    raise AssertionError(f"checkpoint tensor {binding.spec.name} is claimed by parameters {other.param_name} and "
                         f"{binding.param_name}")


def bytes_view(param: nn.Parameter) -> torch.Tensor:
    """The parameter's storage as flat bytes (for direct landing)."""
    return param.data.view(-1).view(torch.uint8)
