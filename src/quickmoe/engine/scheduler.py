"""Continuous batching: which sequences run in the next step, and how many of their tokens.

Each step has a token budget (`max_num_batched_tokens`) shared by every sequence in it:
1. Running sequences first, oldest first: each gets its uncomputed tokens (1 for a decode, the rest of its
   prompt for a prefill, in chunks when the budget is short); one whose pending last output reaches its length
   limit is skipped (nothing is left to compute). Room for them in the KV cache is allocated
   now; when a pool is short, the newest running sequence is preempted (its blocks freed, its cache to be
   recomputed: it goes back to the front of the queue) until the allocation fits, possibly the sequence
   itself.
2. Then, if nothing was preempted in this step, waiting sequences in arrival order while the budget, the
   `max_num_seqs` limit and the free blocks allow (a long prompt is admitted with a first chunk).
Decodes and prefills of different requests thus share one step. A sequence is aborted at any time by
freeing its blocks. Invariant: a sequence holds blocks exactly while it is RUNNING.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from quickmoe.engine.block_manager import KVBlockManager
from quickmoe.engine.sequence import Sequence, SequenceStatus

__all__ = ["ScheduledChunk", "Scheduler", "SchedulerOutput"]


@dataclass(frozen=True)
class ScheduledChunk:
    """Tokens [start, start + num_tokens) of `seq` are computed in this step."""

    seq: Sequence
    start: int
    num_tokens: int

    @property
    def samples(self) -> bool:
        """Whether the step completes the sequence's known tokens, so its last logits give a new token."""
        return self.start + self.num_tokens == self.seq.num_tokens


@dataclass
class SchedulerOutput:
    chunks: list[ScheduledChunk] = field(default_factory=list)
    preempted: list[Sequence] = field(default_factory=list)

    @property
    def num_tokens(self) -> int:
        return sum(c.num_tokens for c in self.chunks)


class Scheduler:
    """Queues of waiting and running sequences over one `KVBlockManager`."""

    def __init__(self, blocks: KVBlockManager, *, max_num_seqs: int, max_num_batched_tokens: int) -> None:
        self.blocks = blocks
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.num_preemptions = 0

    def add(self, seq: Sequence) -> None:
        assert seq.status is SequenceStatus.WAITING and seq.num_computed == 0
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        budget = self.max_num_batched_tokens
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            if seq.length_reached:  # its last output is pending and ends it: nothing left to compute
                i += 1
                continue
            n = min(seq.num_uncomputed, budget)
            assert n > 0, "a running sequence always has its last token to compute"
            while not self.blocks.try_allocate(seq.seq_id, seq.num_computed, seq.num_computed + n):
                victim = self.running.pop()  # the newest; never one already scheduled (those are before i)
                self._preempt(victim)
                out.preempted.append(victim)
                if victim is seq:
                    break
            else:
                out.chunks.append(ScheduledChunk(seq, seq.num_computed, n))
                budget -= n
                i += 1
        while self.waiting and budget > 0 and not out.preempted and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if seq.num_pending:  # preempted while a step computed its last output: readmitted once it is known
                break
            n = min(seq.num_uncomputed, budget)
            if not self.blocks.try_allocate(seq.seq_id, 0, n):
                if not self.running:  # nothing to wait for: the cache is too small for this sequence
                    raise RuntimeError(f"sequence {seq.request_id!r}: {n} tokens do not fit an empty KV cache")
                break
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            out.chunks.append(ScheduledChunk(seq, 0, n))
            budget -= n
        return out

    def _preempt(self, seq: Sequence) -> None:
        """Free the sequence's cache; it waits at the front of the queue and recomputes when readmitted."""
        self.blocks.free(seq.seq_id)
        seq.num_computed = 0
        seq.status = SequenceStatus.WAITING
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(seq)

    def step_done(self, out: SchedulerOutput) -> None:
        """The step ran: its chunks' tokens are in the cache."""
        for chunk in out.chunks:
            chunk.seq.num_computed = chunk.start + chunk.num_tokens

    def finish(self, seq: Sequence, reason: str) -> None:
        """End a sequence (finished or aborted): out of the queues, its blocks freed. Idempotent."""
        if seq.status is SequenceStatus.FINISHED:
            return
        if seq.status is SequenceStatus.RUNNING:
            self.running.remove(seq)
            self.blocks.free(seq.seq_id)
        else:
            self.waiting.remove(seq)
        seq.status = SequenceStatus.FINISHED
        seq.finish_reason = reason
