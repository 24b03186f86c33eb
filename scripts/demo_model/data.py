"""Token streams for training and evaluation: files tokenized, joined with <|endoftext|> (id 0)."""

from __future__ import annotations

import numpy as np
import torch

from corpus import SourceFile


def token_stream(tok, files: list[SourceFile], eos_id: int) -> np.ndarray:
    """int32 [N]: every file's tokens followed by eos, in file order."""
    encoded = tok.encode_batch([f.text for f in files])
    parts = []
    for e in encoded:
        parts += [np.asarray(e.ids, dtype=np.int32), np.asarray([eos_id], dtype=np.int32)]
    return np.concatenate(parts)


class Batches:
    """Random windows of seq_len + 1 tokens, drawn with a seeded generator (the same seed, the same batches)."""

    def __init__(self, stream: np.ndarray, seq_len: int, batch_size: int, seed: int) -> None:
        self.stream = torch.from_numpy(stream.astype(np.int64))
        self.seq_len, self.batch_size = seq_len, batch_size
        self.gen = torch.Generator().manual_seed(seed)

    def next(self) -> torch.Tensor:
        """[B, T+1] token ids."""
        starts = torch.randint(0, len(self.stream) - self.seq_len - 1, (self.batch_size,), generator=self.gen)
        idx = starts[:, None] + torch.arange(self.seq_len + 1)[None, :]
        return self.stream[idx]


def eval_windows(stream: np.ndarray, seq_len: int, max_tokens: int) -> torch.Tensor:
    """[W, T] consecutive non-overlapping windows from the start of the stream (at most max_tokens tokens)."""
    n = min(len(stream), max_tokens) // seq_len
    return torch.from_numpy(stream[:n * seq_len].astype(np.int64)).view(n, seq_len)
