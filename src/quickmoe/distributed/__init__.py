"""Tensor and expert parallelism over torch.distributed: the `ParallelContext` layers shard themselves with
(rank, world size, process groups, the collectives one block needs), how a rank's share of a dimension is
computed (`shards.py`), and the environment every quickmoe process starts with (`env.py`: NCCL settings,
torchrun detection, process-group initialisation). Nothing here holds mutable module state: the groups are
torch.distributed's, the context is a frozen value passed explicitly from the runner to each layer."""

from quickmoe.distributed.context import SINGLE, ParallelContext
from quickmoe.distributed.shards import Shard, even_shard, split_sizes

__all__ = ["SINGLE", "ParallelContext", "Shard", "even_shard", "split_sizes"]
