"""Scheduler: token budget, decodes before prefills, FIFO admission within max_num_seqs and free blocks,
chunked prefill, preemption of the newest sequence, abort; a randomized simulation checks the invariants
every step and that no block leaks."""

from __future__ import annotations

import random

import pytest

from quickmoe.engine.block_manager import GroupSpec, KVBlockManager
from quickmoe.engine.detokenizer import IncrementalDetokenizer
from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.engine.scheduler import Scheduler
from quickmoe.engine.sequence import Sequence, SequenceStatus
from quickmoe.tokenizer import O200kHarmonyTokenizer

BLOCK = 16


@pytest.fixture(scope="module")
def tokenizer():
    return O200kHarmonyTokenizer()


def _seq(tokenizer, seq_id: int, prompt_len: int, max_tokens: int = 8) -> Sequence:
    params = SamplingParams(max_tokens=max_tokens, temperature=0)
    return Sequence(seq_id=seq_id, request_id=f"r{seq_id}", prompt_ids=list(range(1, prompt_len + 1)), params=params,
                    stop_ids=frozenset(), max_total_tokens=prompt_len + max_tokens,
                    detokenizer=IncrementalDetokenizer(tokenizer, params), generator=None)


def _scheduler(full_blocks=64, sliding_blocks=64, max_num_seqs=8, budget=64) -> Scheduler:
    blocks = KVBlockManager([GroupSpec("full", full_blocks), GroupSpec("sliding8", sliding_blocks, window=8)], BLOCK)
    return Scheduler(blocks, max_num_seqs=max_num_seqs, max_num_batched_tokens=budget)


def _run_step(sched: Scheduler, rng: random.Random | None = None):
    """schedule -> step_done -> a new token for every sequence that samples; finish at max_total_tokens."""
    out = sched.schedule()
    sampling = [c.seq for c in out.chunks if c.samples]
    sched.step_done(out)
    for seq in sampling:
        seq.output_ids.append(rng.randrange(1000) if rng else 7)
        if seq.num_tokens >= seq.max_total_tokens:
            sched.finish(seq, "length")
    return out


def test_budget_decodes_first_and_chunked_prefill(tokenizer):
    sched = _scheduler(budget=32)
    a, b = _seq(tokenizer, 0, 20), _seq(tokenizer, 1, 50)
    sched.add(a)
    sched.add(b)
    first = sched.schedule()
    assert [(c.seq, c.start, c.num_tokens) for c in first.chunks] == [(a, 0, 20), (b, 0, 12)]
    assert first.chunks[0].samples and not first.chunks[1].samples  # b's prompt is only partly computed
    sched.step_done(first)
    a.output_ids.append(5)
    second = sched.schedule()  # a's decode (1 token) before the rest of b's prompt (31 of 38 left)
    assert [(c.seq, c.start, c.num_tokens) for c in second.chunks] == [(a, 20, 1), (b, 12, 31)]
    sched.step_done(second)
    a.output_ids.append(6)
    third = sched.schedule()
    assert [(c.seq, c.start, c.num_tokens) for c in third.chunks] == [(a, 21, 1), (b, 43, 7)]
    assert third.chunks[1].samples and third.num_tokens <= 32


def test_admission_is_fifo_within_max_num_seqs_and_free_blocks(tokenizer):
    sched = _scheduler(full_blocks=6, max_num_seqs=2, budget=200)
    seqs = [_seq(tokenizer, i, 30) for i in range(4)]  # 2 blocks each
    for s in seqs:
        sched.add(s)
    out = sched.schedule()
    assert [c.seq for c in out.chunks] == seqs[:2]  # max_num_seqs
    assert list(sched.waiting) == seqs[2:]
    sched.finish(seqs[0], "abort")  # frees its blocks and its seat
    assert not sched.blocks.holds(0) and seqs[0].status is SequenceStatus.FINISHED
    sched.step_done(out)
    seqs[1].output_ids.append(1)
    out = sched.schedule()
    assert [c.seq for c in out.chunks] == [seqs[1], seqs[2]]


def test_preemption_takes_the_newest_and_it_recomputes_everything(tokenizer):
    sched = _scheduler(full_blocks=4, budget=200)  # 64 positions in all
    old, new = _seq(tokenizer, 0, 32, max_tokens=20), _seq(tokenizer, 1, 32, max_tokens=20)
    sched.add(old)
    sched.add(new)
    _run_step(sched)  # both prefilled: 2 blocks each, all 4 taken
    _run_step(sched)  # position 32 needs a third block for old: new is preempted
    assert new.status is SequenceStatus.WAITING and new.num_computed == 0 and new.num_preemptions == 1
    assert list(sched.waiting) == [new] and sched.running == [old]
    assert len(new.output_ids) == 1  # its output is kept: recomputed as part of its prompt later
    while old.status is not SequenceStatus.FINISHED:
        _run_step(sched)
    out = sched.schedule()  # readmitted: prompt + its output token in one prefill
    assert [(c.seq, c.start, c.num_tokens) for c in out.chunks] == [(new, 0, 33)]
    assert out.chunks[0].samples


def test_a_lone_sequence_preempts_itself_and_waits_for_room(tokenizer):
    sched = _scheduler(full_blocks=2, budget=200)
    seq = _seq(tokenizer, 0, 30, max_tokens=10)
    sched.add(seq)
    _run_step(sched)
    _run_step(sched)
    with pytest.raises(RuntimeError, match="do not fit an empty KV cache"):
        for _ in range(10):  # at position 32 it needs a third block: nothing left to preempt
            _run_step(sched)


@pytest.mark.parametrize("seed", range(4))
def test_random_traffic_keeps_the_invariants_and_frees_every_block(tokenizer, seed):
    rng = random.Random(seed)
    budget = rng.choice([16, 40, 100])
    sched = _scheduler(full_blocks=rng.choice([12, 30]), sliding_blocks=40, max_num_seqs=rng.choice([2, 4, 8]),
                       budget=budget)
    seqs, next_id = [], 0
    for _ in range(300):
        if rng.random() < 0.3:
            seqs.append(_seq(tokenizer, next_id, rng.randint(1, 60), rng.randint(1, 30)))
            sched.add(seqs[-1])
            next_id += 1
        if rng.random() < 0.05 and seqs:
            sched.finish(rng.choice(seqs), "abort")  # idempotent on finished ones
        computed_before = {id(s): s.num_computed for s in sched.running}
        out = _run_step(sched, rng)
        assert out.num_tokens <= budget
        assert len({id(c.seq) for c in out.chunks}) == len(out.chunks)  # at most one chunk per sequence
        for c in out.chunks:
            assert c.start == computed_before.get(id(c.seq), 0)
        assert len(sched.running) <= sched.max_num_seqs
        for s in seqs:  # blocks are held exactly while running
            assert sched.blocks.holds(s.seq_id) == (s.status is SequenceStatus.RUNNING)
    while sched.has_unfinished():
        _run_step(sched, rng)
    assert all(s.finished for s in seqs)
    assert all(pool.num_free == pool.num_blocks for pool in sched.blocks.pools.values())
    assert sched.blocks.num_sequences == 0


def _threshold_scheduler(budget: int, threshold: int, max_num_seqs: int = 8) -> Scheduler:
    blocks = KVBlockManager([GroupSpec("full", 400), GroupSpec("sliding8", 400, window=8)], BLOCK)
    return Scheduler(blocks, max_num_seqs=max_num_seqs, max_num_batched_tokens=budget,
                     long_prefill_token_threshold=threshold)


@pytest.mark.parametrize("long_first", [True, False])
def test_a_long_prefill_never_holds_up_decodes_or_new_requests(tokenizer, long_first):
    """While a long prompt is prefilled, every running decode is scheduled in every step, the prompt advances by at
    most the threshold per step, and a short request that arrives is admitted at the next step."""
    rng = random.Random(5)
    threshold, budget = 24, 64
    sched = _threshold_scheduler(budget, threshold)
    long = _seq(tokenizer, 100, 1000, max_tokens=2)
    shorts = [_seq(tokenizer, i, rng.randint(2, 20), max_tokens=500) for i in range(3)]
    for seq in ([long] + shorts if long_first else shorts + [long]):
        sched.add(seq)
    _run_step(sched, rng)  # everything admitted: the shorts prefilled, the long prompt's first chunk
    next_id, arrived = 3, None
    steps = 0
    while long.num_computed < len(long.prompt_ids):
        steps += 1
        decoding = [s for s in sched.running if s.num_uncomputed == 1]
        before = long.num_computed
        out = _run_step(sched, rng)
        chunks = {c.seq.seq_id: c for c in out.chunks}
        assert all(s.seq_id in chunks and chunks[s.seq_id].num_tokens == 1 for s in decoding)  # every decode
        assert 0 < long.num_computed - before <= threshold and out.num_tokens <= budget
        if arrived is not None:  # the short request that arrived before this step was admitted by it
            assert arrived.seq_id in chunks and chunks[arrived.seq_id].start == 0
            arrived = None
        if steps % 5 == 0 and len(sched.running) < sched.max_num_seqs:
            arrived = _seq(tokenizer, next_id, rng.randint(2, 20), max_tokens=3)
            next_id += 1
            sched.add(arrived)
    assert steps >= (1000 - threshold) // threshold and next_id > 5
