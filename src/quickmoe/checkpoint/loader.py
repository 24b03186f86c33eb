"""Fill a built model's parameters from a checkpoint, through each parameter's `weight_loader`.

CPU path: tensors are read shard by shard in file order and handed to their parameter; no full state
dict is materialised. Every header is validated against the model before any data is read, and after
loading every checkpoint tensor must have been used and every parameter filled. (The streaming GPU
loader with pinned buffers and overlapped copies replaces the read loop in the cold-start issue.)
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from torch import nn

from quickmoe.checkpoint.reader import CheckpointReader, TensorSpec
from quickmoe.errors import CheckpointError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadStats:
    """What loading did: tensors and bytes read, seconds, throughput."""

    num_tensors: int
    num_bytes: int
    seconds: float

    @property
    def gb_per_s(self) -> float:
        return self.num_bytes / 1e9 / max(self.seconds, 1e-9)


def expected_tensors(model: nn.Module) -> dict[str, TensorSpec]:
    """The checkpoint tensors a model expects, from the formats its parameters declared."""
    specs = {}
    for name, param in model.named_parameters():
        if not hasattr(param, "weight_loader"):
            raise AssertionError(f"parameter {name} was not declared with declare_weight")
        specs[name] = TensorSpec(name=name, shape=tuple(param.checkpoint_shape), dtype=param.checkpoint_dtype)
    return specs


def load_weights(model: nn.Module, reader: CheckpointReader) -> LoadStats:
    """Validate, then stream every checkpoint tensor into its parameter."""
    params = dict(model.named_parameters())
    reader.validate(expected_tensors(model))  # names, shapes, dtypes: all problems reported at once
    filled: set[str] = set()
    num_bytes = 0
    start = time.perf_counter()
    for name, tensor in reader.iter_tensors(params.keys()):
        param = params[name]
        param.weight_loader(param, tensor)
        filled.add(name)
        num_bytes += reader.entries[name].nbytes
    unused = sorted(set(reader.entries) - filled)
    if unused:
        files = {str(reader.entries[n].file.name) for n in unused}
        raise CheckpointError(f"{len(unused)} checkpoint tensor(s) were not used by the model: "
                              f"{', '.join(unused[:10])} (in {', '.join(sorted(files))})")
    unfilled = sorted(set(params) - filled)
    if unfilled:
        raise CheckpointError(f"{len(unfilled)} parameter(s) were never filled from {reader.model_dir}: "
                              f"{', '.join(unfilled[:10])}")
    stats = LoadStats(num_tensors=len(filled), num_bytes=num_bytes, seconds=time.perf_counter() - start)
    logger.info("loaded %d tensors, %.2f GB in %.2f s (%.2f GB/s)", stats.num_tensors, stats.num_bytes / 1e9,
                stats.seconds, stats.gb_per_s)
    return stats
