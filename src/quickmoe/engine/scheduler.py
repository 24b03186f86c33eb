"""Continuous batching: which sequences run in the next step, and how many of their tokens.

Each step has a token budget (`max_num_batched_tokens`) shared by every sequence in it:
1. Running sequences first: the decodes (one token each), oldest first, then the prefills, oldest first, each
   with the rest of its prompt in a chunk of at most `long_prefill_token_threshold` tokens (and what the budget
   leaves). A sequence whose pending last output reaches its length limit is skipped (nothing is left to
   compute). Room for them in the KV cache is allocated now; when a pool is short, the newest running sequence
   not yet scheduled in this step is preempted (its blocks freed, its cache to be recomputed: it goes back to
   the front of the queue) until the allocation fits, possibly the sequence itself.
2. Then, if nothing was preempted in this step, waiting sequences in arrival order while the budget, the
   `max_num_seqs` limit and the free blocks allow (a long prompt is admitted with a first chunk, capped alike).
   With prefix caching, a sequence admitted with nothing computed first takes the cached blocks of its longest
   cached prefix (`KVBlockManager.match_prefix`) and computes from there (a request asking for prompt
   log-probabilities computes every position); each step then registers the full blocks it completed.
Decodes and prefills of different requests thus share one step, and a long prompt never holds the others up:
every running decode is in every step (the budget permitting: it must cover max_num_seqs decodes), a step
computes at most one capped chunk per prefilling sequence, and what the chunks leave of the budget admits new
requests at once. A sequence is aborted at any time by freeing its blocks. Invariant: a sequence holds blocks
exactly while it is RUNNING.
"""

from __future__ import annotations

import time
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
    """Queues of waiting and running sequences over one `KVBlockManager`. `long_prefill_token_threshold`: the
    most prompt tokens one sequence computes in one step (None: the whole budget)."""

    def __init__(self, blocks: KVBlockManager, *, max_num_seqs: int, max_num_batched_tokens: int,
                 long_prefill_token_threshold: int | None = None) -> None:
        self.blocks = blocks
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.long_prefill_token_threshold = long_prefill_token_threshold or max_num_batched_tokens
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.num_preemptions = 0
        self.num_scheduled_tokens = 0  # tokens computed by all steps so far
        self.num_prefix_queries = 0  # tokens of sequences admitted with caching on (prefix cache queries)
        self.num_prefix_hits = 0  # of which were found in the cache

    def add(self, seq: Sequence) -> None:
        assert seq.status is SequenceStatus.WAITING and seq.num_computed == 0
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        budget = self.max_num_batched_tokens
        cap = self.long_prefill_token_threshold
        scheduled: set[int] = set()  # seq ids with a chunk in this step: never preempted by a later allocation
        decodes = [s for s in self.running if s.num_uncomputed == 1]
        prefills = [s for s in self.running if s.num_uncomputed > 1]
        for seq in decodes + prefills:
            if budget <= 0:
                break
            if seq.status is not SequenceStatus.RUNNING:  # preempted earlier in this step
                continue
            if seq.length_reached:  # its last output is pending and ends it: nothing left to compute
                continue
            n = min(seq.num_uncomputed, budget, cap)
            assert n > 0, "a running sequence always has its last token to compute"
            if self._allocate(seq, n, scheduled, out):
                out.chunks.append(ScheduledChunk(seq, seq.num_computed, n))
                scheduled.add(seq.seq_id)
                budget -= n
        while self.waiting and budget > 0 and not out.preempted and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if seq.num_pending:  # preempted while a step computed its last output: readmitted once it is known
                break
            hit = None
            if self.blocks.enable_caching and seq.params.prompt_logprobs is None:
                hit = self.blocks.match_prefix(seq.token_ids(0, seq.num_tokens))
            start = hit.num_tokens if hit is not None else 0
            n = min(seq.num_tokens - start, budget, cap)
            if not self.blocks.try_allocate(seq.seq_id, start, start + n, hit):
                if not self.running:  # nothing to wait for: the cache is too small for this sequence
                    raise RuntimeError(f"sequence {seq.request_id!r}: {n} tokens do not fit an empty KV cache")
                break
            if self.blocks.enable_caching:
                self.num_prefix_queries += seq.num_tokens
                self.num_prefix_hits += start
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            seq.num_computed = start
            if seq.first_scheduled_time is None:
                seq.first_scheduled_time = time.monotonic()
            self.running.append(seq)
            out.chunks.append(ScheduledChunk(seq, start, n))
            budget -= n
        return out

    def _allocate(self, seq: Sequence, n: int, scheduled: set[int], out: SchedulerOutput) -> bool:
        """Blocks for the next `n` tokens of running `seq`, preempting the newest running sequences not scheduled
        in this step until they fit; False when `seq` itself had to go."""
        while not self.blocks.try_allocate(seq.seq_id, seq.num_computed, seq.num_computed + n):
            victim = next((s for s in reversed(self.running) if s is not seq and s.seq_id not in scheduled), seq)
            self._preempt(victim)
            out.preempted.append(victim)
            if victim is seq:
                return False
        return True

    def _preempt(self, seq: Sequence) -> None:
        """Free the sequence's cache; it waits at the front of the queue and recomputes when readmitted."""
        self.running.remove(seq)
        self.blocks.free(seq.seq_id)
        seq.num_computed = 0
        seq.status = SequenceStatus.WAITING
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(seq)

    def step_done(self, out: SchedulerOutput) -> None:
        """The step ran: its chunks' tokens are in the cache."""
        for chunk in out.chunks:
            seq = chunk.seq
            seq.num_computed = chunk.start + chunk.num_tokens
            self.num_scheduled_tokens += chunk.num_tokens
            self.blocks.register_blocks(seq.seq_id, min(seq.num_computed, seq.num_tokens - seq.num_pending),
                                        seq.token_ids)

    def finish(self, seq: Sequence, reason: str) -> None:
        """End a sequence (finished or aborted): out of the queues, its blocks freed. Idempotent."""
        if seq.status is SequenceStatus.FINISHED:
            return
        if seq.status is SequenceStatus.RUNNING:
            self.running.remove(seq)
            self.blocks.free(seq.seq_id)
        elif seq in self.waiting:  # (a sample the engine still holds back is in neither queue)
            self.waiting.remove(seq)
        seq.status = SequenceStatus.FINISHED
        seq.finish_reason = reason
