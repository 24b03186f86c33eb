"""A request's state inside the engine: its tokens, how many of them are in the KV cache, and how it ends."""

from __future__ import annotations

import enum
from collections.abc import Sequence as SeqOf
from dataclasses import dataclass, field

import torch

from quickmoe.engine.detokenizer import IncrementalDetokenizer
from quickmoe.engine.sampling_params import SamplingParams

__all__ = ["PENDING", "Sequence", "SequenceStatus"]

PENDING = -1  # an output token sampled by a step still in flight: its id is on the device, not yet on the host


class SequenceStatus(enum.Enum):
    WAITING = "waiting"  # not admitted yet, or preempted (its KV cache freed; recomputed when readmitted)
    RUNNING = "running"  # holds KV blocks; scheduled every step while the token budget lasts
    FINISHED = "finished"


@dataclass(eq=False)
class Sequence:
    """One request. Its tokens are the prompt then the outputs; the first `num_computed` of them have their
    K/V in the cache. Each step computes the next chunk of the others; once all are computed, the logits of
    the last one give the next output token (so a preempted sequence, its cache freed and `num_computed`
    reset to 0, recomputes prompt and outputs in one prefill and continues where it was). An output sampled
    by a step in flight is PENDING until its id reaches the host; the next step may already compute it (the
    model runner reads it on the device)."""

    seq_id: int
    request_id: str
    prompt_ids: tuple[int, ...]  # immutable; the cyclic collector stops tracking a tuple of ints
    params: SamplingParams
    stop_ids: frozenset[int]  # EOS (unless ignore_eos) and the request's stop_token_ids
    max_total_tokens: int  # prompt + outputs end here at the latest ("length")
    detokenizer: IncrementalDetokenizer
    generator: torch.Generator | None  # a sampled request's own randomness (one draw per output token)
    output_ids: list[int] = field(default_factory=list)
    num_computed: int = 0
    status: SequenceStatus = SequenceStatus.WAITING
    num_preemptions: int = 0
    finish_reason: str | None = None  # "stop" | "length" | "abort"
    stop_reason: int | str | None = None  # the stop token id or stop string that ended it
    num_pending: int = 0  # trailing outputs that are PENDING (sampled by a step whose tokens are not back yet)
    pending_row: int = -1  # the latest pending output's row among its step's sampled rows
    index: int = 0  # which of the request's n samples this is
    prompt_logprobs: list | None = None  # TokenLogprob (None for the first token) per prompt token collected so far
    grammar: object = None  # structured output: its GrammarState (engine/structured_output.py), else None
    first_scheduled_time: float | None = None  # time.monotonic() when the scheduler first admitted it
    prompt_logprobs_asked: int = 1  # prompt positions whose log-probability a launched step computes (0 has none)

    @property
    def num_resolved(self) -> int:
        """Outputs whose ids are known on the host."""
        return len(self.output_ids) - self.num_pending

    @property
    def length_reached(self) -> bool:
        """Whether prompt + outputs (pending ones included) reach `max_total_tokens`: nothing more to compute."""
        return self.num_tokens >= self.max_total_tokens

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.output_ids)

    @property
    def num_uncomputed(self) -> int:
        return self.num_tokens - self.num_computed

    def token_ids(self, start: int, end: int) -> SeqOf[int]:
        """Tokens [start, end) of prompt + outputs."""
        n = len(self.prompt_ids)
        if end <= n:
            return self.prompt_ids[start:end]
        if start >= n:
            return self.output_ids[start - n:end - n]
        return [*self.prompt_ids[start:], *self.output_ids[:end - n]]

    @property
    def finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED
