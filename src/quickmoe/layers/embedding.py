"""Token embedding and the LM head (separate weights in gpt-oss; tied weights share one tensor).

Vocabulary-parallel with several ranks: each holds a contiguous share of the vocabulary's rows; the embedding
looks up the ids it holds (zeros for the others) and the ranks' rows are summed; the LM head computes its share
of the logits and gathers them all on every rank."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from quickmoe.distributed import SINGLE, ParallelContext, split_sizes
from quickmoe.layers.sharding import narrow_param
from quickmoe.layers.weights import declare_weight


class VocabEmbedding(nn.Module):
    """Looks up rows of `weight` [vocab, hidden] (this rank's rows [start, start + size) with several ranks)."""

    def __init__(self, vocab_size: int, hidden_size: int, *, dtype: torch.dtype, device: torch.device | str,
                 parallel: ParallelContext = SINGLE) -> None:
        super().__init__()
        self.parallel = parallel
        self.rows = parallel.shard(vocab_size, field="vocab_size")
        self.sizes = split_sizes(vocab_size, parallel.world_size, field="vocab_size")
        declare_weight(self, "weight", (self.rows.size, hidden_size), dtype, device, checkpoint_dtype=torch.bfloat16)
        narrow_param(self.weight, 0, self.rows)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        if not self.parallel.sharded:
            return F.embedding(input_ids, self.weight)
        local = input_ids - self.rows.start  # [T]
        mine = (local >= 0) & (local < self.rows.size)
        out = F.embedding(torch.where(mine, local, 0), self.weight)  # [T, H]
        out = torch.where(mine[:, None], out, 0.0)
        return self.parallel.all_reduce(out)


class LMHead(nn.Module):
    """logits = h W^T with W [vocab, hidden], all of them on every rank: in float32 by default, or in the weights'
    dtype with `float_logits=False` (the engine's steps: the sampler widens only what it must, so a greedy bf16
    step skips a [B, V] cast that took 0.15 ms of gpt-oss-20b's batch-256 decode step on the H200)."""

    def __init__(self, vocab_size: int, hidden_size: int, *, dtype: torch.dtype, device: torch.device | str,
                 tied_to: VocabEmbedding | None = None, parallel: ParallelContext = SINGLE) -> None:
        super().__init__()
        self.tied_to = tied_to
        self.parallel = parallel
        self.sizes = split_sizes(vocab_size, parallel.world_size, field="vocab_size")
        if tied_to is None:
            rows = parallel.shard(vocab_size, field="vocab_size")
            declare_weight(self, "weight", (rows.size, hidden_size), dtype, device, checkpoint_dtype=torch.bfloat16)
            narrow_param(self.weight, 0, rows)

    def forward(self, hidden: torch.Tensor, *, float_logits: bool = True, out: torch.Tensor | None = None
                ) -> torch.Tensor:
        """`out` ([B, V] in the weights' dtype, with float_logits=False): the logits are written there and it is
        returned (the CUDA graphs' one buffer for all their buckets); on one rank the GEMM writes it directly."""
        weight = self.tied_to.weight if self.tied_to is not None else self.weight
        if out is not None:
            assert not float_logits and out.dtype == weight.dtype, "out holds the logits in the weights' dtype"
            if self.parallel.world_size == 1:
                return torch.mm(hidden, weight.t(), out=out)  # [B, V], F.linear's GEMM
            return out.copy_(self.parallel.all_gather_last(F.linear(hidden, weight), self.sizes))
        logits = self.parallel.all_gather_last(F.linear(hidden, weight), self.sizes)  # [B, V]
        return logits.float() if float_logits else logits
