"""Perplexity and next-token accuracy of a model on held-out windows, through quickmoe's own runner: each batch
of windows is one packed prefill over a scratch KV cache, all positions' logits (float32)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Perplexity:
    tokens: int  # predicted tokens
    nll: float  # mean negative log-likelihood, nats
    accuracy: float  # share of positions whose argmax is the next token

    @property
    def perplexity(self) -> float:
        return math.exp(self.nll)


@torch.inference_mode()
def evaluate_perplexity(runner, windows: list[list[int]], batch_windows: int = 8) -> Perplexity:
    """Perplexity of `runner`'s model over `windows` (each predicts its tokens 1..L-1 from the ones before)."""
    nll, correct, count = 0.0, 0, 0
    for start in range(0, len(windows), batch_windows):
        chunk = windows[start:start + batch_windows]
        tables = runner.scratch_block_tables([len(w) for w in chunk])
        batch = runner.build_batch(chunk, [0] * len(chunk), tables)
        logits = runner.forward(batch, all_logits=True).float()  # [T, V]
        for window, rows in zip(chunk, logits.split([len(w) for w in chunk])):
            target = torch.tensor(window[1:], device=rows.device)  # [L-1]
            pred = rows[:-1]  # [L-1, V]
            nll += torch.nn.functional.cross_entropy(pred, target, reduction="sum").item()
            correct += (pred.argmax(-1) == target).sum().item()
            count += len(target)
    return Perplexity(count, nll / max(count, 1), correct / max(count, 1))
