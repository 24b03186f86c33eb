"""KVBlockManager: random add / grow / abort / finish sequences never leak a block, allocation is all or
nothing, sliding-window groups hold only the blocks their window needs, double frees are refused."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from quickmoe.engine.block_manager import RELEASED, BlockPool, GroupSpec, KVBlockManager, NoFreeBlocks

BLOCK = 16
WINDOW = 40


def _manager(full_blocks=64, sliding_blocks=40):
    return KVBlockManager([GroupSpec("full", full_blocks), GroupSpec("sliding", sliding_blocks, window=WINDOW)],
                          block_size=BLOCK)


def _held(table):
    return [b for b in table if b != RELEASED]


@pytest.mark.parametrize("seed", range(5))
def test_random_lifecycles_never_leak_and_tables_stay_consistent(seed):
    rng = random.Random(seed)
    manager = _manager()
    lengths: dict[int, int] = {}
    last_chunk: dict[int, int] = {}
    next_id = 0
    for _ in range(600):
        action = rng.random()
        if action < 0.35 or not lengths:  # a new sequence with a prompt, prefilled in one step
            end = rng.randint(1, 90)
            try:
                manager.allocate(next_id, 0, end)
                lengths[next_id], last_chunk[next_id] = end, end
            except NoFreeBlocks:
                assert next_id not in manager._seqs  # nothing half-made
            next_id += 1
        elif action < 0.8:  # a decode step or a prefill chunk of a running sequence
            seq = rng.choice(list(lengths))
            start, end = lengths[seq], lengths[seq] + rng.choice([1, 1, 1, 7, 20])
            before = {g: manager.block_table(seq, g) for g in ("full", "sliding")}
            free_before = {g: manager.pools[g].num_free for g in ("full", "sliding")}
            try:
                manager.allocate(seq, start, end)
                lengths[seq], last_chunk[seq] = end, end - start
            except NoFreeBlocks:  # all or nothing
                assert {g: manager.block_table(seq, g) for g in ("full", "sliding")} == before
                assert {g: manager.pools[g].num_free for g in ("full", "sliding")} == free_before
        else:  # finished or aborted
            seq = rng.choice(list(lengths))
            manager.free(seq)
            del lengths[seq]
        # every held block belongs to exactly one sequence; held + free = all
        for group in ("full", "sliding"):
            held = [b for s in lengths for b in _held(manager.block_table(s, group))]
            assert len(held) == len(set(held))
            assert len(held) + manager.pools[group].num_free == manager.pools[group].num_blocks
        for s, length in lengths.items():
            assert len(_held(manager.block_table(s, "full"))) == math.ceil(length / BLOCK)
            # sliding: only the blocks spanning the window before the last chunk, and the chunk
            assert len(_held(manager.block_table(s, "sliding"))) <= math.ceil((WINDOW - 1 + last_chunk[s]) / BLOCK) + 1
    for s in list(lengths):
        manager.free(s)
    assert manager.usage() == {"full": 0.0, "sliding": 0.0}
    assert manager.num_sequences == 0


def test_sliding_group_releases_blocks_out_of_the_window():
    manager = _manager()
    manager.allocate(7, 0, 100)  # a 100-token prompt: queries 0..99 see back to position 0
    assert len(_held(manager.block_table(7, "sliding"))) == math.ceil(100 / BLOCK)
    manager.allocate(7, 100, 101)  # decode at position 100 sees positions 61..100: blocks 3..6
    table = manager.block_table(7, "sliding")
    assert [i for i, b in enumerate(table) if b != RELEASED] == [3, 4, 5, 6] and table[:3] == [RELEASED] * 3
    assert len(_held(manager.block_table(7, "full"))) == 7  # full attention keeps everything
    manager.free(7)
    assert manager.usage() == {"full": 0.0, "sliding": 0.0}


def test_allocation_is_all_or_nothing_across_groups():
    manager = _manager(full_blocks=64, sliding_blocks=2)
    manager.allocate(1, 0, 20)  # 2 full blocks, 2 sliding blocks: the sliding pool is now empty
    with pytest.raises(NoFreeBlocks, match="'sliding': 0 free of 2"):
        manager.allocate(2, 0, 10)
    assert manager.pools["full"].num_free == 62 and 2 not in manager._seqs
    assert not manager.can_allocate(2, 0, 10)
    manager.free(1)
    assert manager.can_allocate(2, 0, 10)


def test_errors_name_the_problem():
    pool = BlockPool(4)
    blocks = pool.take(2)
    pool.give_back(blocks)
    with pytest.raises(ValueError, match="freed twice"):
        pool.give_back(blocks[:1])
    manager = _manager()
    with pytest.raises(KeyError, match="sequence 5 holds no blocks"):
        manager.free(5)
    with pytest.raises(ValueError, match="expected 0 <= start < end"):
        manager.allocate(1, 3, 3)
    with pytest.raises(ValueError, match="window = 0"):
        GroupSpec("sliding", 4, window=0)


# -- prefix caching -------------------------------------------------------------------------------------------

def _cached_manager(full_blocks=16, sliding_blocks=16):
    return KVBlockManager([GroupSpec("full", full_blocks), GroupSpec("sliding", sliding_blocks, window=WINDOW)],
                          block_size=BLOCK, enable_caching=True)


def _run(manager, seq, tokens, chunk=BLOCK):
    """Allocate and 'compute' a sequence's tokens in chunks, registering what each step completed."""
    done = manager._seqs[seq].length if seq in manager._seqs else 0
    while done < len(tokens):
        end = min(done + chunk, len(tokens))
        assert manager.try_allocate(seq, done, end)
        done = end
        manager.register_blocks(seq, done, lambda a, b: tokens[a:b])


def test_a_hit_needs_the_same_tokens_before_the_block_too():
    rng = random.Random()
    manager = _cached_manager()
    shared_block = [rng.randrange(100) for _ in range(BLOCK)]
    a = [rng.randrange(100) for _ in range(BLOCK)] + shared_block + [1]
    b = [t + 100 for t in a[:BLOCK]] + shared_block + [1]  # the same second block after a different first one
    _run(manager, 0, a)
    assert manager.match_prefix(b) is None
    assert manager.match_prefix(shared_block + [1]) is None  # a's second block, but at other positions
    hit = manager.match_prefix(a[:2 * BLOCK] + [7, 8])
    assert hit.num_tokens == 2 * BLOCK and hit.tables[0] == tuple(manager.block_table(0, "full")[:2])


def test_a_sliding_group_needs_only_the_blocks_its_window_sees():
    """A prefix of 6 blocks whose sliding blocks before the window were released and evicted still hits: the
    sliding table starts RELEASED and holds only the blocks a query at the end of the prefix can see."""
    rng = random.Random()
    manager = _cached_manager(full_blocks=32, sliding_blocks=8)
    tokens = [rng.randrange(1000) for _ in range(6 * BLOCK + 5)]
    _run(manager, 0, tokens)
    manager.free(0)
    filler = [rng.randrange(1000) + 1000 for _ in range(3 * BLOCK)]  # evicts the LRU sliding blocks
    _run(manager, 1, filler, chunk=3 * BLOCK)
    hit = manager.match_prefix(tokens)
    assert hit is not None and hit.num_tokens == 6 * BLOCK
    first = (6 * BLOCK - WINDOW + 1) // BLOCK
    assert hit.tables[1][:first] == (RELEASED,) * first and RELEASED not in hit.tables[1][first:]
    assert manager.try_allocate(2, hit.num_tokens, len(tokens), hit)
    manager.free(1)
    manager.free(2)
    assert all(pool.num_free == pool.num_blocks for pool in manager.pools.values())


def test_eviction_is_least_recently_freed_first_and_shared_blocks_are_counted():
    rng = random.Random()
    manager = _cached_manager(full_blocks=6, sliding_blocks=6)
    seqs = [[rng.randrange(1000) for _ in range(2 * BLOCK)] for _ in range(3)]
    for i, tokens in enumerate(seqs):
        _run(manager, i, tokens)
    for i in (1, 2, 0):  # freed in this order: sequence 1's blocks are the least recently freed
        manager.free(i)
    assert all(pool.num_free == 6 and pool.num_cached == 6 for pool in manager.pools.values())
    assert manager.try_allocate(11, 0, 2 * BLOCK)  # two blocks per group: sequence 1's are evicted
    assert manager.match_prefix(seqs[1] + [1]) is None
    assert manager.match_prefix(seqs[2] + [1]).num_tokens == 2 * BLOCK
    hit = manager.match_prefix(seqs[0] + [1])
    assert hit.num_tokens == 2 * BLOCK and manager.try_allocate(10, 2 * BLOCK, 2 * BLOCK + 1, hit)
    assert manager.pools["full"].num_free == 1  # 2 (sequence 11) + 3 (sequence 10: 2 shared, 1 new) held
    assert manager.match_prefix(seqs[2] + [1]).num_tokens == BLOCK  # its last block was evicted for the new one
    assert not manager.try_allocate(12, 0, 2 * BLOCK) and not manager.holds(12)
    manager.free(10)
    manager.free(11)
    assert all(pool.num_free == pool.num_blocks for pool in manager.pools.values())


def test_releasing_a_shared_block_makes_no_room():
    """A sliding window moving past a block it shares with another sequence (a prefix-cache hit) releases the
    block from its table, but the pool gets nothing back: an allocation that counted it as room fails cleanly
    (False, nothing changed) instead of raising half-way through."""
    rng = random.Random()
    manager = _cached_manager(full_blocks=64, sliding_blocks=8)
    tokens = [rng.randrange(1000) for _ in range(4 * BLOCK + 1)]
    assert manager.try_allocate(0, 0, len(tokens))  # sequence 0 holds sliding blocks 0-4
    manager.register_blocks(0, len(tokens), lambda a, b: tokens[a:b])
    hit = manager.match_prefix(tokens)
    assert hit.num_tokens == 4 * BLOCK and manager.try_allocate(1, hit.num_tokens, len(tokens), hit)
    shared = manager.block_table(1, "sliding")[1]
    assert shared == manager.block_table(0, "sliding")[1] != RELEASED
    assert manager.try_allocate(2, 0, 2 * BLOCK)  # takes the last free sliding blocks
    assert manager.pools["sliding"].num_free == 0
    assert manager.try_allocate(1, len(tokens), 72)  # within its blocks
    before = [manager.block_table(1, g) for g in ("full", "sliding")]
    # from position 72 the window no longer sees block index 1 (released, but sequence 0 holds it) and position
    # 80 needs a new block: no room
    assert not manager.try_allocate(1, 72, 81)
    assert [manager.block_table(1, g) for g in ("full", "sliding")] == before
    assert manager.step_block_tables([1])[1].tolist() == [before[1]]
    manager.free(2)
    assert manager.try_allocate(1, 72, 81)
    assert manager.block_table(1, "sliding")[:2] == [RELEASED, RELEASED]
    assert manager.block_table(0, "sliding")[1] == shared

def _padded(lists):
    """The reference for `step_block_tables`: the manager's lists padded with -1 by a plain loop."""
    width = max([len(t) for t in lists] + [1])
    return [[t[i] if i < len(t) else -1 for i in range(width)] for t in lists]


@pytest.mark.parametrize("seed", range(3))
def test_step_block_tables_equal_the_lists_through_growth_hits_and_reuse(seed):
    """A step's tables come from numpy rows the manager keeps beside its lists (engine/block_table_rows.py):
    through random allocations, prefix-cache hits (shared blocks, released sliding entries), frees and rows
    reused, more sequences than the rows first made and tables longer than their first columns, every gather
    equals the lists, padded."""
    rng = random.Random(seed)
    manager = _cached_manager(full_blocks=1200, sliding_blocks=300)
    prompts = [[rng.randrange(1000) for _ in range(rng.randint(1, 6) * BLOCK)] for _ in range(4)]
    lengths: dict[int, int] = {}
    for step in range(700):
        action = rng.random()
        if action < 0.3 or not lengths:  # a new sequence: sometimes a cached prompt's prefix (a hit)
            tokens = rng.choice(prompts) + [rng.randrange(1000) for _ in range(rng.randint(1, 40))]
            hit = manager.match_prefix(tokens)
            start = hit.num_tokens if hit is not None else 0
            if manager.try_allocate(step, start, len(tokens), hit):
                manager.register_blocks(step, len(tokens), lambda a, b, t=tokens: t[a:b])
                lengths[step] = len(tokens)
        elif action < 0.85:  # decode steps and chunks; some sequences grow past 64 blocks
            seq = rng.choice(list(lengths))
            end = lengths[seq] + rng.choice([1, 1, 16, 70, 300, 1100])
            if manager.try_allocate(seq, lengths[seq], end):
                lengths[seq] = end
        else:
            seq = rng.choice(list(lengths))
            manager.free(seq)
            del lengths[seq]
        if lengths:
            ids = rng.sample(list(lengths), rng.randint(1, len(lengths)))
            got = manager.step_block_tables(ids)
            for g, group in enumerate(("full", "sliding")):
                assert got[g].dtype == np.int32
                assert got[g].tolist() == _padded([manager.block_table(s, group) for s in ids]), (step, group)
    rows, columns = manager._rows.capacity  # the run went through both kinds of growth
    assert rows > 16 and columns > 64, (rows, columns)
