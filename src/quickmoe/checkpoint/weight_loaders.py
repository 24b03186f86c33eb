"""How a checkpoint tensor enters a parameter: the `weight_loader(param, tensor)` functions layers declare.

They live below both the layers that declare them and the loader that calls them (the loader lands a tensor
straight in its parameter when the loader is the plain `copy_weight_loader` and the dtypes agree).

Most parameters are one checkpoint tensor of the same name. A parameter may instead gather several
(`CheckpointPart`s, e.g. Mixtral's per-expert `experts.3.w1.weight` stacked into the experts' parameter):
each part names its tensor relative to the parameter's module, with its shape, dtype and loader, and,
when it is a contiguous run of the parameter's elements (`offset`), its bytes land directly too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

__all__ = ["CheckpointPart", "Narrow", "NarrowLoader", "OuterIndexLoader", "SliceLoader", "WeightLoader",
           "copy_weight_loader", "slice_strides", "transpose_last2_weight_loader", "zero_weight_loader"]

WeightLoader = Callable[[nn.Parameter, torch.Tensor], None]


def copy_weight_loader(param: nn.Parameter, loaded: torch.Tensor) -> None:
    """Copy as is (shapes were validated against `checkpoint_shape`), converting dtype and device."""
    assert param.shape == loaded.shape, (param.shape, loaded.shape)
    param.data.copy_(loaded)


def zero_weight_loader(param: nn.Parameter, loaded: torch.Tensor) -> None:
    """Fill with zeros, whatever the checkpoint holds: the bias of a row-parallel layer on every rank but 0
    (the ranks' partial sums are reduced, so the bias must be added once)."""
    param.data.zero_()


def transpose_last2_weight_loader(param: nn.Parameter, loaded: torch.Tensor) -> None:
    """Checkpoint [..., in, out] -> parameter [..., out, in] (HF's unquantized experts are stored in x out)."""
    param.data.copy_(loaded.transpose(-1, -2))


class SliceLoader(NamedTuple):
    """Copies a checkpoint tensor into `param[index][rows]` (rows None: the whole sub-tensor), converting dtype:
    e.g. expert 3's gate weight [I, H] into rows [0, I) of the stacked gate_up parameter [E, 2I, H]."""

    index: int
    rows: tuple[int, int] | None = None

    def __call__(self, param: nn.Parameter, loaded: torch.Tensor) -> None:
        dst = param.data[self.index]
        if self.rows is not None:
            dst = dst[self.rows[0]:self.rows[1]]
        assert dst.numel() == loaded.numel(), (tuple(dst.shape), tuple(loaded.shape))
        dst.copy_(loaded.reshape(dst.shape))  # a scalar (ModelOpt's per-tensor scales) fills a [1] slice

    def offset(self, param: nn.Parameter) -> int | None:
        """Element offset of the destination when it is one contiguous run of the parameter, else None."""
        strides = slice_strides(param)
        return None if strides is None else self.offset_in(*strides)

    def offset_in(self, per_index: int, row: int) -> int:
        """`offset` given the parameter's `slice_strides` (taken once for the ~1,500 parts of a stacked one)."""
        return self.index * per_index + (self.rows[0] * row if self.rows is not None else 0)


def slice_strides(param: nn.Parameter) -> tuple[int, int] | None:
    """(elements of param[index], elements of param[index][row]) of a contiguous parameter (shape arithmetic, no
    views), else None: a SliceLoader's destination is then not one run of it."""
    if not param.is_contiguous():
        return None
    return math.prod(param.shape[1:]), math.prod(param.shape[2:])


# (dim, start, length): the part of a checkpoint tensor this rank's parameter holds, along one dimension
Narrow = tuple[int, int, int]


@dataclass(frozen=True)
class NarrowLoader:
    """`loader(param, tensor.narrow(dim, start, length))`: a rank's slice of a tensor read whole (the loader reads
    only the slice's rows when the slice is along the first dimension; checkpoint/narrow.py)."""

    loader: WeightLoader
    dim: int
    start: int
    length: int

    def __call__(self, param: nn.Parameter, loaded: torch.Tensor) -> None:
        self.loader(param, loaded.narrow(self.dim, self.start, self.length))


@dataclass(frozen=True)
class OuterIndexLoader:
    """Copies one run of a tensor read in runs (checkpoint/narrow.py) into the parameter's `index`-th of `count`
    equal parts: e.g. expert 3's gate_up rows of a tensor-parallel rank."""

    index: int
    count: int

    def __call__(self, param: nn.Parameter, loaded: torch.Tensor) -> None:
        dst = param.data.view(self.count, -1)[self.index]
        assert dst.numel() == loaded.numel(), (tuple(dst.shape), tuple(loaded.shape))
        dst.copy_(loaded.reshape(-1))


class CheckpointPart(NamedTuple):
    """One checkpoint tensor filling part of a parameter: `name` relative to the parameter's module (the
    full name is `<module prefix>.<name>`), its checkpoint `shape` and `dtype` (or one of `alt_dtypes`), and its
    `weight_loader`. `narrow`: only this slice of the tensor goes into the parameter (tensor parallelism);
    `weight_loader` None: the tensor belongs to another rank (expert parallelism): validated, never read."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    weight_loader: WeightLoader | None
    alt_dtypes: tuple[torch.dtype, ...] = ()
    narrow: Narrow | None = None
