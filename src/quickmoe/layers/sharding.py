"""How a layer declares that its rank holds part of a checkpoint tensor (tensor / expert parallelism).

A parameter is allocated at its rank's size; `narrow_param` records the full checkpoint shape (validated against
the header) and the slice (dim, start, length) the loader copies in (checkpoint/narrow.py reads only that slice
when it is a run of rows). Column-parallel layers split their output rows (weights, biases, and a quant method's
scales with them); row-parallel layers split their input columns, their partial sums are reduced by the block,
and their bias is added once: loaded on rank 0, zero elsewhere."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

from quickmoe.checkpoint.weight_loaders import zero_weight_loader
from quickmoe.distributed import ParallelContext, Shard

if TYPE_CHECKING:
    from quickmoe.layers.linear import Linear

__all__ = ["column_parallel", "narrow_param", "row_parallel", "scaled", "zero_unless_driver"]


def scaled(shard: Shard, num: int = 1, den: int = 1) -> Shard:
    """The same slice counted in another unit: num/den elements per element of `shard` (an interleaved gate_up
    holds 2 rows per intermediate channel; an MXFP4 scale covers 32 channels)."""
    for value in (shard.start, shard.size, shard.total):
        assert value * num % den == 0, (shard, num, den)
    return Shard(shard.start * num // den, shard.size * num // den, shard.total * num // den)


def narrow_param(param: nn.Parameter, dim: int, shard: Shard) -> None:
    """`param` holds elements `shard` of its checkpoint tensor along `dim` (nothing to record for the whole)."""
    if shard.whole:
        return
    assert param.shape[dim] == shard.size or param.checkpoint_shape[dim] == shard.size, (param.shape, dim, shard)
    full = list(param.checkpoint_shape)
    full[dim] = shard.total
    param.checkpoint_shape = tuple(full)
    param.checkpoint_narrow = (dim, shard.start, shard.size)


def zero_unless_driver(param: nn.Parameter, parallel: ParallelContext) -> None:
    """A row-parallel bias: the checkpoint's on rank 0, zeros on the others (the reduction adds it once)."""
    if parallel.sharded and not parallel.is_driver:
        param.weight_loader = zero_weight_loader


def column_parallel(linear: Linear, rows: Shard) -> None:
    """`linear` computes output rows `rows` of the checkpoint's layer: weight rows, bias, a quant method's scales."""
    if rows.whole:
        return
    if linear.quant_method is not None:
        linear.quant_method.narrow(linear, 0, rows)
    else:
        narrow_param(linear.weight, 0, rows)
    if linear.bias is not None:
        narrow_param(linear.bias, 0, rows)


def row_parallel(linear: Linear, cols: Shard, parallel: ParallelContext) -> None:
    """`linear` takes input columns `cols` of the checkpoint's layer; the caller reduces its output."""
    if cols.whole:
        return
    if linear.quant_method is not None:
        linear.quant_method.narrow(linear, 1, cols)
    else:
        narrow_param(linear.weight, 1, cols)
    if linear.bias is not None:
        zero_unless_driver(linear.bias, parallel)
