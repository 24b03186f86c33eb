"""Log-probabilities of prompt tokens (`prompt_logprobs`, and `echo` with `logprobs` in the completions API).

The logits at position p give the distribution of the token at p + 1, so a chunk of a prompt [start, end)
predicts prompt tokens start + 1 .. end. The engine asks, per chunk, for the rows whose targets it has not
had yet (`PromptLogprobRequest`); the runner computes the LM head on the last row of every chunk (for
sampling) plus those rows only, never on every row of a step ([T, V] logits would not fit a large step).
Values are log_softmax of the raw logits, as the generated tokens' logprobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["PromptLogprobRequest", "PromptLogprobTable", "prompt_logit_rows", "prompt_logprob_table"]


@dataclass(frozen=True)
class PromptLogprobRequest:
    """In one chunk: rows first_row, first_row + 1, ... (0 = the chunk's first token) predict `targets`; each
    gets the target's log-probability and the `num_top` most likely tokens with theirs."""

    first_row: int
    targets: tuple[int, ...]
    num_top: int

    def __post_init__(self) -> None:
        if self.first_row < 0 or not self.targets or not 0 <= self.num_top:
            raise ValueError(f"prompt logprob request {self}: expected first_row >= 0, targets, num_top >= 0")


def prompt_logit_rows(query_lens: Sequence[int],
                      requests: Sequence[PromptLogprobRequest | None]) -> tuple[np.ndarray, list[int]]:
    """Rows of a packed step whose logits are needed: each chunk's last row, then every requested prompt row
    in chunk order; and the number of prompt rows per request (0 for None)."""
    ends = np.cumsum(np.asarray(query_lens, dtype=np.int64)) - 1
    extra, counts = [], []
    for b, request in enumerate(requests):
        if request is None:
            counts.append(0)
            continue
        assert request.first_row + len(request.targets) <= query_lens[b], "prompt rows beyond the chunk"
        first = ends[b] - query_lens[b] + 1 + request.first_row
        extra.append(np.arange(first, first + len(request.targets), dtype=np.int64))
        counts.append(len(request.targets))
    return np.concatenate([ends] + extra), counts


@dataclass
class PromptLogprobTable:
    """On the device: [R, 1 + 2 width] float64 (the target's log-probability, `width` top ids, their values) for
    the R requested rows; `to_host` splits it per request."""

    table: torch.Tensor
    width: int
    counts: list[int]
    num_top: list[int]
    host: torch.Tensor | None = None

    def to_host(self) -> list[list[tuple[float, list[tuple[int, float]]]] | None]:
        """Per request (None where none): per target, (log-probability, [(top id, log-probability)])."""
        rows = (self.host if self.host is not None else self.table.cpu()).tolist()
        out, at, width = [], 0, self.width
        for count, top in zip(self.counts, self.num_top):
            if not count:
                out.append(None)
                continue
            out.append([(row[0], [(int(row[1 + j]), row[1 + width + j]) for j in range(top)])
                        for row in rows[at:at + count]])
            at += count
        return out


def prompt_logprob_table(logits: torch.Tensor, requests: Sequence[PromptLogprobRequest | None],
                         counts: list[int]) -> PromptLogprobTable:
    """logits [R, V] of the rows `prompt_logit_rows` listed after the last rows -> their table."""
    asked = [r for r in requests if r is not None]
    targets = torch.tensor([t for r in asked for t in r.targets], dtype=torch.int64).to(logits.device)
    logprobs = torch.log_softmax(logits.float(), dim=-1)  # [R, V]
    chosen = logprobs.gather(1, targets[:, None])  # [R, 1]
    width = min(max(r.num_top for r in asked), logprobs.shape[1])
    top_values, top_ids = logprobs.topk(width, dim=-1)  # [R, w] each
    table = torch.cat([chosen.double(), top_ids.double(), top_values.double()], dim=-1)
    return PromptLogprobTable(table, width, counts, [r.num_top if r is not None else 0 for r in requests])
