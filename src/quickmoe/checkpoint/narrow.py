"""A rank's view of the checkpoint: each binding narrowed to the slice of its tensor this rank holds.

A slice along a tensor's first dimension (a column-parallel weight's rows, a vocabulary shard, an expert-parallel
rank's experts) is a contiguous byte run: its entry is replaced by a sub-entry of exactly those bytes, so the
streaming loader reads nothing else of that tensor (chunks still cover the byte windows holding a rank's
pieces) and the bytes may land directly in the parameter as any plain copy. A slice along another dimension
(a row-parallel weight's columns, an expert's intermediate columns of `down`) is strided: the tensor is read
whole and its weight loader is handed the narrowed view (`NarrowLoader`). Bindings without a weight loader are
other ranks' tensors: validated, never read."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path

from quickmoe.checkpoint.bindings import Binding
from quickmoe.checkpoint.reader import TensorSpec
from quickmoe.checkpoint.safetensors_header import TensorEntry
from quickmoe.checkpoint.weight_loaders import NarrowLoader, SliceLoader, copy_weight_loader
from quickmoe.errors import CheckpointError

__all__ = ["RankView", "rank_view"]


@dataclasses.dataclass(frozen=True)
class RankView:
    """`bindings` to read (narrowed), their `entries` (sub-entries for first-dimension slices) by name and by
    file, and the names of the tensors other ranks hold (`skipped`)."""

    bindings: dict[str, Binding]
    entries: dict[str, TensorEntry]
    entries_by_file: dict[Path, tuple[TensorEntry, ...]]
    skipped: frozenset[str]


def _row_slice(entry: TensorEntry, dim: int, start: int, length: int) -> TensorEntry:
    """Elements [start, start + length) along `dim` of a tensor whose dimensions before `dim` are all 1."""
    row = math.prod(entry.shape[dim + 1:]) * entry.dtype.itemsize  # bytes per index along dim
    return dataclasses.replace(entry, shape=(*entry.shape[:dim], length, *entry.shape[dim + 1:]),
                               offset=entry.offset + start * row, nbytes=length * row)


def _direct_offset(binding: Binding, entry: TensorEntry) -> int | None:
    param, loader = binding.param, binding.weight_loader
    if entry.dtype != param.dtype:
        return None
    if isinstance(loader, SliceLoader):
        return loader.offset(param)
    if loader is copy_weight_loader and tuple(param.shape) == tuple(entry.shape) and param.is_contiguous():
        return 0
    return None


def rank_view(bindings: Mapping[str, Binding], entries: Mapping[str, TensorEntry],
              entries_by_file: Mapping[Path, tuple[TensorEntry, ...]]) -> RankView:
    """Resolve every binding's `narrow` against the (validated) checkpoint entries."""
    out_bindings: dict[str, Binding] = {}
    out_entries: dict[str, TensorEntry] = dict(entries)
    skipped = set()
    for name, binding in bindings.items():
        if binding.weight_loader is None:
            skipped.add(name)
            continue
        if binding.narrow is None:
            out_bindings[name] = binding
            continue
        dim, start, length = binding.narrow
        entry = entries[name]
        if not (0 <= dim < len(entry.shape) and 0 <= start and start + length <= entry.shape[dim]):
            raise CheckpointError(f"{name} {list(entry.shape)}: this rank's slice (dim {dim}, [{start}, "
                                  f"{start + length})) is outside the tensor")
        if math.prod(entry.shape[:dim]) == 1:  # a run of whole rows: read only those bytes
            sub = _row_slice(entry, dim, start, length)
            out_entries[name] = sub
            spec = TensorSpec(name, sub.shape, sub.dtype)
            narrowed = dataclasses.replace(binding, spec=spec, narrow=None)
            out_bindings[name] = dataclasses.replace(narrowed, direct_offset=_direct_offset(narrowed, sub))
        else:
            loader = NarrowLoader(binding.weight_loader, dim, start, length)
            out_bindings[name] = dataclasses.replace(binding, weight_loader=loader, direct_offset=None)
    by_file = {file: tuple(out_entries[e.name] for e in file_entries if e.name not in skipped)
               for file, file_entries in entries_by_file.items()}
    return RankView(out_bindings, out_entries, by_file, frozenset(skipped))
