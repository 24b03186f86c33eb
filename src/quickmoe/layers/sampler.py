"""Turns last-token logits into next tokens, batched on the logits' device.

The logits are first processed (layers/logits_processing.py: min_tokens, logit_bias, penalties, an allowed-token
bitmask) when a row asks for it. Greedy rows take the argmax. Sampled rows draw from softmax(logits / temperature),
restricted by min_p, then to the top_k most likely tokens, then to the top-p nucleus of those, by inverse CDF with
one uniform per row from the request's own CPU `torch.Generator`: over the probabilities sorted in
descending order when the row filters (top-k or top-p), else over them in token-id order (no sort of the
vocabulary: exact all the same). Every row is computed on its own (no value of one row depends on another,
and which path a row takes depends on its own parameters only), so a seeded request draws the same tokens
whatever the batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol

import torch

from quickmoe.layers.logits_processing import (
    RowContext,
    apply_min_p,
    apply_token_bitmask,
    needs_processing,
    process_logits,
)
from quickmoe.layers.prompt_logprobs import PromptLogprobTable


class RowSamplingParams(Protocol):
    """What the sampler reads of one row's parameters (the engine's `SamplingParams` has these fields)."""

    temperature: float
    top_k: int  # 0: no limit
    top_p: float
    logprobs: int | None
    min_p: float  # and the fields of logits_processing.ProcessedRowParams
    presence_penalty: float
    frequency_penalty: float
    repetition_penalty: float
    logit_bias: tuple[tuple[int, float], ...]

    @property
    def greedy(self) -> bool: ...


@dataclass(frozen=True)
class SampledTokens:
    """One sampling step of a batch: per row, the token and the log-probabilities the request asked for.

    logprobs[i] is the chosen token's log-probability under log_softmax of the raw logits where
    params[i].logprobs is not None, else None. top_logprobs[i] lists the params[i].logprobs = n > 0 most
    likely (token id, log-probability), most likely first, else None.
    """

    token_ids: list[int]  # [B]
    logprobs: list[float | None]
    top_logprobs: list[list[tuple[int, float]] | None]
    # per chunk of the step (None where none was asked): per predicted prompt token, (logprob, top alternatives)
    prompt: list[list[tuple[float, list[tuple[int, float]]]] | None] | None = None


def top_k_top_p_mask(sorted_probs: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Which tokens top-k then top-p keep, for rows of probabilities sorted in descending order.

    sorted_probs [S, V]; top_k [S] int64 (0: no limit); top_p [S] float64 in (0, 1] -> keep [S, V] bool,
    a prefix of each row. top-k keeps the first top_k tokens. top-p then keeps a token when the mass
    strictly before it, measured over the renormalised top-k distribution, is < top_p: the smallest
    prefix whose mass reaches top_p, always the most likely token. Mass is summed in float64.
    """
    num_rows, vocab = sorted_probs.shape
    ranks = torch.arange(vocab, device=sorted_probs.device)  # [V]
    k = torch.where(top_k > 0, top_k, vocab)  # [S]
    in_top_k = ranks[None, :] < k[:, None]  # [S, V]
    probs_k = sorted_probs.double().masked_fill(~in_top_k, 0.0)  # [S, V]
    cdf = probs_k.cumsum(dim=-1)  # [S, V]
    # mass strictly before each token: the exclusive scan (shifting keeps it equal to a running sum)
    mass_before = torch.cat([cdf.new_zeros(num_rows, 1), cdf[:, :-1]], dim=-1)  # [S, V]
    # before / mass_k < top_p, without dividing: the top-k mass is the last entry of the same scan
    in_top_p = mass_before < top_p[:, None] * cdf[:, -1:]  # [S, V]
    in_top_p |= (top_p >= 1.0)[:, None]  # top_p 1 keeps everything, even where rounding says otherwise
    return in_top_k & in_top_p


def sample_sorted(sorted_probs: torch.Tensor, keep: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw from the kept tokens, renormalised.

    sorted_probs [S, V] descending; keep [S, V] bool prefix; uniforms [S] float64 in [0, 1) -> the
    position in sorted order [S] int64: the first whose cumulative kept mass exceeds u * kept mass.
    """
    kept = sorted_probs.double().masked_fill(~keep, 0.0)  # [S, V]
    cdf = kept.cumsum(dim=-1)  # [S, V]
    threshold = uniforms[:, None] * cdf[:, -1:]  # [S, 1]
    # cdf is non-decreasing, so the number of entries <= threshold is the first index exceeding it
    position = (cdf <= threshold).sum(dim=-1)  # [S]
    # u * mass may round up to the mass: clamp to the last kept token of non-zero probability (sorted
    # descending, those form a prefix)
    last = (kept > 0).sum(dim=-1).clamp(min=1) - 1  # [S]
    return torch.minimum(position, last)


def sample_in_id_order(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw over the whole vocabulary in token-id order: probs [S, V], uniforms [S] float64 in
    [0, 1) -> token ids [S]: the first whose cumulative mass exceeds u * total."""
    cdf = probs.double().cumsum(dim=-1)  # [S, V]
    threshold = uniforms[:, None] * cdf[:, -1:]  # [S, 1]
    position = (cdf <= threshold).sum(dim=-1)  # [S]
    # u * mass may round up to the mass: clamp to the last token of non-zero probability
    last = (probs > 0).cumsum(dim=-1).argmax(dim=-1)  # [S]: first index of the maximum count = last non-zero
    return torch.minimum(position, last)


@dataclass
class DeviceSample:
    """One sampling step still on the logits' device: token ids [B] int64, and where log-probabilities were
    asked, a float64 table [B, 2 + 2 width] (column 0 the token, 1 its log-probability, then `width` top ids
    and `width` top log-probabilities; NaN in rows that did not ask). `to_host_async` starts the device->host
    copy (page-locked memory, no synchronisation); `to_host` finishes it."""

    token_ids: torch.Tensor
    table: torch.Tensor | None
    width: int
    logprobs_asked: list[int | None]  # per row: params.logprobs
    prompt: PromptLogprobTable | None = None  # prompt tokens' log-probabilities, where a chunk asked
    _host: torch.Tensor | None = None
    _event: object = None

    @classmethod
    def empty(cls, device: torch.device) -> "DeviceSample":
        """No sampled row (a step that only computed prompt log-probabilities)."""
        return cls(torch.empty(0, dtype=torch.int64, device=device), None, 0, [])

    def to_host_async(self) -> "DeviceSample":
        source = self.table if self.table is not None else self.token_ids
        if source.is_cuda:
            self._host = torch.empty(source.shape, dtype=source.dtype, pin_memory=True)
            self._host.copy_(source, non_blocking=True)
            if self.prompt is not None:
                self.prompt.host = torch.empty(self.prompt.table.shape, dtype=torch.float64, pin_memory=True)
                self.prompt.host.copy_(self.prompt.table, non_blocking=True)
            self._event = torch.cuda.Event()
            self._event.record()
        else:
            self._host = source
        return self

    def to_host(self) -> SampledTokens:
        """The host lists (waits for the copy `to_host_async` started, or copies now)."""
        if self._host is None:
            self.to_host_async()
        if self._event is not None:
            self._event.synchronize()
        num_rows = len(self.logprobs_asked)
        prompt = self.prompt.to_host() if self.prompt is not None else None
        if self.table is None:
            return SampledTokens(self._host.tolist(), [None] * num_rows, [None] * num_rows, prompt)
        host = self._host.tolist()
        token_ids = [int(row[0]) for row in host]
        out_logprobs: list[float | None] = [None] * num_rows
        out_top: list[list[tuple[int, float]] | None] = [None] * num_rows
        width = self.width
        for i, asked in enumerate(self.logprobs_asked):
            if asked is None:
                continue
            row, n = host[i], min(asked, width)
            out_logprobs[i] = row[1]
            if n > 0:
                out_top[i] = [(int(row[2 + j]), row[2 + width + j]) for j in range(n)]
        return SampledTokens(token_ids, out_logprobs, out_top, prompt)


class Sampler:
    """Picks one token per row of last-token logits (see the module docstring)."""

    def __call__(self, logits: torch.Tensor, params: Sequence[RowSamplingParams],
                 generators: Sequence[torch.Generator | None], contexts: Sequence[RowContext | None] | None = None,
                 bitmask: torch.Tensor | Future | None = None) -> SampledTokens:
        """`sample`, then the host lists (synchronises with the device)."""
        return self.sample(logits, params, generators, contexts, bitmask).to_host()

    def sample(self, logits: torch.Tensor, params: Sequence[RowSamplingParams],
               generators: Sequence[torch.Generator | None], contexts: Sequence[RowContext | None] | None = None,
               bitmask: torch.Tensor | Future | None = None) -> DeviceSample:
        """logits [B, V] (any device; float32 or the model's dtype) -> B tokens, plus log-probabilities where
        asked, left on the device.

        generators[i] is row i's CPU generator; sampled rows (temperature > 0) must have one, and each
        draws exactly one float64 uniform from it per call, in row order. Greedy rows may pass None.
        contexts[i]: what row i's logits processing needs (penalties, min_tokens), or None. bitmask: the
        allowed tokens of every row ([B, ceil(V / 32)] int32, all ones for a free row), or a Future of it,
        waited for only now (it is computed on a thread while the device runs the forward).
        """
        num_rows = logits.shape[0]
        assert logits.dim() == 2 and len(params) == num_rows == len(generators), \
            f"logits {tuple(logits.shape)}, {len(params)} params, {len(generators)} generators"
        # the model's dtype (bf16) is widened to float32 only where arithmetic follows: a greedy row's argmax
        # is the same on bf16 values as on their exact float32 widening (ties: the first index in both)
        raw = logits
        device = logits.device
        if needs_processing(params, contexts):
            logits = process_logits(logits.float(), params, contexts)
        if bitmask is not None:
            logits = apply_token_bitmask(logits.float(), bitmask.result() if isinstance(bitmask, Future) else bitmask)
        tokens = logits.argmax(dim=-1)  # [B]
        sampled_rows = [i for i, p in enumerate(params) if not p.greedy]
        if sampled_rows:
            rows = self._index(sampled_rows, num_rows, device)
            drawn = self._sample((logits if rows is None else logits[rows]).float(), [params[i] for i in sampled_rows],
                                 [generators[i] for i in sampled_rows])  # [S]
            tokens = drawn if rows is None else tokens.index_copy(0, rows, drawn)
        return self._collect(raw, tokens, params)

    @staticmethod
    def _index(rows: list[int], num_rows: int, device: torch.device) -> torch.Tensor | None:
        """rows as an index tensor on `device`, or None when they are all the rows."""
        if len(rows) == num_rows:
            return None
        return _to_device(torch.tensor(rows, dtype=torch.int64), device)

    @staticmethod
    def _sample(logits: torch.Tensor, params: list[RowSamplingParams],
                generators: list[torch.Generator | None]) -> torch.Tensor:
        """logits [S, V] of sampled rows -> token ids [S]."""
        device = logits.device
        uniforms = []
        for gen in generators:
            assert gen is not None, "a sampled row needs its own torch.Generator"
            uniforms.append(torch.rand((), generator=gen, dtype=torch.float64).item())
        u = _to_device(torch.tensor(uniforms, dtype=torch.float64), device)  # [S]
        temperature = _to_device(torch.tensor([float(p.temperature) for p in params]), device)  # [S]
        top_k = _to_device(torch.tensor([p.top_k for p in params], dtype=torch.int64), device)  # [S]
        top_p = _to_device(torch.tensor([float(p.top_p) for p in params], dtype=torch.float64), device)
        probs = torch.softmax(logits / temperature[:, None], dim=-1)  # [S, V]
        if any(p.min_p > 0 for p in params):
            probs = apply_min_p(probs, _to_device(torch.tensor([float(p.min_p) for p in params]), device))
        filters = [p.top_k > 0 or p.top_p < 1 for p in params]
        if not any(filters):
            return sample_in_id_order(probs, u)
        if all(filters):
            return Sampler._sample_filtered(probs, top_k, top_p, u)
        rows = _to_device(torch.tensor(filters), device)  # [S] bool
        plain = sample_in_id_order(probs, u)
        filtered = Sampler._sample_filtered(probs[rows], top_k[rows], top_p[rows], u[rows])
        return plain.masked_scatter(rows, filtered)

    @staticmethod
    def _sample_filtered(probs: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor,
                         u: torch.Tensor) -> torch.Tensor:
        """probs [R, V] of rows with top-k or top-p -> token ids [R]."""
        # stable: tied tokens keep id order, so the token a uniform maps to never depends on the batch
        sorted_probs, order = probs.sort(dim=-1, descending=True, stable=True)  # [R, V] each
        keep = top_k_top_p_mask(sorted_probs, top_k, top_p)  # [R, V]
        position = sample_sorted(sorted_probs, keep, u)  # [R]
        return order.gather(1, position[:, None]).squeeze(1)  # [R]

    def _collect(self, logits: torch.Tensor, tokens: torch.Tensor,
                 params: Sequence[RowSamplingParams]) -> DeviceSample:
        """Adds the asked log-probabilities as one float64 table (one transfer to the host later)."""
        num_rows = logits.shape[0]
        asked = [p.logprobs for p in params]
        asked_rows = [i for i, n in enumerate(asked) if n is not None]
        if not asked_rows:
            return DeviceSample(tokens, None, 0, asked)
        width = min(max(asked[i] for i in asked_rows), logits.shape[1])  # n, at most V
        rows = self._index(asked_rows, num_rows, logits.device)
        # vLLM's convention: log-probabilities of the raw logits, before temperature, top-k and top-p
        logprobs = torch.log_softmax((logits if rows is None else logits[rows]).float(), dim=-1)  # [R, V] float32
        chosen = logprobs.gather(1, (tokens if rows is None else tokens[rows])[:, None])  # [R, 1]
        top_values, top_ids = logprobs.topk(width, dim=-1)  # [R, n] each, most likely first
        # token ids (< 2**53) and float32 values are exact in float64
        values = torch.cat([chosen.double(), top_ids.double(), top_values.double()], dim=-1)  # [R, 1 + 2n]
        table = torch.full((num_rows, 2 + 2 * width), math.nan, dtype=torch.float64, device=logits.device)
        table[:, 0] = tokens.double()
        table[:, 1:] = values if rows is None else table[:, 1:].index_copy(0, rows, values)
        return DeviceSample(tokens, table, width, asked)


def _to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A small host tensor onto `device` without waiting for it (through page-locked memory on CUDA)."""
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t
