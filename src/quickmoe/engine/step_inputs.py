"""What a launched step hands the runner besides token ids, per sequence: the sampler's logits-processing context
(min_tokens' blocked stop ids, the tokens penalties read) and the prompt positions whose log-probabilities a chunk
computes for the first time."""

from __future__ import annotations

from quickmoe.engine.scheduler import ScheduledChunk
from quickmoe.engine.sequence import Sequence
from quickmoe.layers.logits_processing import RowContext
from quickmoe.layers.prompt_logprobs import PromptLogprobRequest

__all__ = ["prompt_request", "row_context"]


def row_context(seq: Sequence) -> RowContext | None:
    """What the sampler's logits processing needs of `seq` (None: nothing): its stop ids while fewer than
    min_tokens outputs exist, its tokens when a penalty applies (all known: the pipelining rule)."""
    params = seq.params
    blocked = tuple(sorted(seq.stop_ids)) if len(seq.output_ids) < params.min_tokens else ()
    if not blocked and not params.penalized:
        return None
    if not params.penalized:
        return RowContext(blocked_ids=blocked)
    assert seq.num_pending == 0, "a penalized request samples from known tokens only"
    return RowContext(prompt_ids=seq.prompt_ids, output_ids=list(seq.output_ids), blocked_ids=blocked)


def prompt_request(chunk: ScheduledChunk) -> PromptLogprobRequest | None:
    """The prompt positions whose log-probabilities `chunk` computes for the first time (positions
    start + 1 .. end of the chunk that are prompt tokens), or None."""
    seq = chunk.seq
    if seq.params.prompt_logprobs is None:
        return None
    lo = max(chunk.start + 1, seq.prompt_logprobs_asked)
    hi = min(chunk.start + chunk.num_tokens, len(seq.prompt_ids) - 1)  # inclusive
    if lo > hi:
        return None
    seq.prompt_logprobs_asked = hi + 1
    return PromptLogprobRequest(first_row=lo - 1 - chunk.start, targets=tuple(seq.prompt_ids[lo:hi + 1]),
                                num_top=seq.params.prompt_logprobs)
