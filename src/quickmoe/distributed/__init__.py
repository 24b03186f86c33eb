"""Tensor and expert parallelism over torch.distributed: the `ParallelContext` layers shard themselves with
(rank, world size, process groups, the collectives one block needs), how a rank's share of a dimension is
computed (`shards.py`), the environment every quickmoe process starts with and where ranks meet
(`rendezvous.py`, standard library only: usable before torch is imported), and the process groups' start
(`env.py`). Nothing here holds mutable module state: the groups are torch.distributed's, the context is a frozen
value passed explicitly from the runner to each layer.

The package's names resolve lazily, so that `quickmoe.distributed.rendezvous` imports without torch."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from quickmoe.distributed.context import SINGLE, ParallelContext
    from quickmoe.distributed.shards import Shard, even_shard, split_sizes

__all__ = ["SINGLE", "ParallelContext", "Shard", "even_shard", "split_sizes"]

_HOMES = {"SINGLE": "context", "ParallelContext": "context", "Shard": "shards", "even_shard": "shards",
          "split_sizes": "shards"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'quickmoe.distributed' has no attribute {name!r}")
    return getattr(importlib.import_module(f"quickmoe.distributed.{_HOMES[name]}"), name)
