"""Block bookkeeping of the paged KV cache: which fixed-size blocks each sequence holds, per layer group.

The cache is cut into blocks of `block_size` token positions. Layers are grouped by what they keep:
full-attention layers keep every position of a sequence; sliding-window layers (window W) only the last
W - 1 positions before the current one, so they hold at most ceil((W - 1 + chunk) / block_size) + 1
blocks per sequence whatever its length, and blocks that fall out of the window go back to the pool. Each
group has its own pool and its own block table per sequence (block ids index the group's KV tensors, one
slot per layer of the group).

`BlockPool` (block_pool.py) hands out and takes back block ids with reference counts and refuses double frees.
`KVBlockManager` keeps the tables: `allocate(seq, start, end)` makes room for positions [start, end) of a sequence
(all or nothing: on `NoFreeBlocks` nothing changed), `free(seq)` returns everything. Invariant: a sliding group's
table entry for a block out of the window is RELEASED (-1), and released entries are a prefix of the table.
`step_block_tables(seq_ids)` hands a step its sequences' tables, padded, from numpy rows kept beside the lists
(block_table_rows.py).

Automatic prefix caching (`enable_caching`): `register_blocks` indexes a sequence's full blocks once their K/V is
computed (keyed by their tokens and every token before them), and `match_prefix` finds, for a new sequence, the
longest run of leading full blocks already in the cache: every block of it in a full-attention group, and in a
sliding group the blocks its window still needs at the end of the run (those before are RELEASED in its table),
so a hit gives the attention exactly the K/V it would have computed. `try_allocate(..., hit=...)` shares those
blocks (reference counts) and the sequence computes from the end of the run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from quickmoe.engine.block_pool import BlockPool, NoFreeBlocks, block_key
from quickmoe.engine.block_table_rows import BlockTableRows

__all__ = ["RELEASED", "BlockPool", "GroupSpec", "KVBlockManager", "NoFreeBlocks", "PrefixHit"]


@dataclass(frozen=True)
class GroupSpec:
    """A group of layers sharing block tables: `window` None (full attention) or the sliding window."""

    name: str
    num_blocks: int
    window: int | None = None

    def __post_init__(self) -> None:
        if self.window is not None and self.window < 1:
            raise ValueError(f"group {self.name!r}: window = {self.window}: expected >= 1 or None")


RELEASED = -1  # table entry of a block index whose block went back to the pool (out of a sliding window)


@dataclass
class _Table:
    blocks: list[int] = field(default_factory=list)  # block id per block index; RELEASED below `released`
    released: int = 0  # indices [0, released) are released: a window only moves forward, so they are a prefix


@dataclass
class _Sequence:
    tables: list[_Table]  # one per group, in group order
    row: int  # its row in the manager's BlockTableRows (the same tables as numpy rows)
    length: int = 0  # positions made room for
    keys: list[int] = field(default_factory=list)  # keys of its leading full blocks registered so far


@dataclass(frozen=True)
class PrefixHit:
    """The first `num_tokens` positions of a new sequence are in the cache: its table per group (RELEASED where
    a sliding window no longer needs the block) and the keys of those blocks."""

    num_tokens: int
    tables: tuple[tuple[int, ...], ...]
    keys: tuple[int, ...]


class KVBlockManager:
    """Per-sequence block tables over one `BlockPool` per layer group.

    Planning an allocation is O(groups + blocks taken or released), not O(table length): a table is its
    released prefix, then held blocks up to its end."""

    def __init__(self, groups: list[GroupSpec], block_size: int, *, enable_caching: bool = False) -> None:
        if block_size < 1:
            raise ValueError(f"block_size = {block_size}: expected >= 1")
        if len({g.name for g in groups}) != len(groups) or not groups:
            raise ValueError(f"groups {[g.name for g in groups]}: expected at least one, with distinct names")
        self.block_size = block_size
        self.groups = {g.name: g for g in groups}
        self._specs = list(groups)
        self._pools = [BlockPool(g.num_blocks) for g in groups]
        self.pools = {g.name: pool for g, pool in zip(groups, self._pools)}
        self._seqs: dict[int, _Sequence] = {}
        self._rows = BlockTableRows(len(groups))  # every table again, as numpy rows: a step's tables in one gather
        self.enable_caching = enable_caching

    @classmethod
    def for_plan(cls, plan, *, enable_caching: bool = False) -> "KVBlockManager":
        """The manager of a KV cache plan (executor/kv_cache.py `KVCachePlan`: its block size and groups, each
        with a name, a number of blocks and a window or None)."""
        return cls([GroupSpec(name=g.name, num_blocks=g.num_blocks, window=g.window) for g in plan.groups],
                   plan.block_size, enable_caching=enable_caching)

    # -- prefix caching ---------------------------------------------------------------------------
    def _first_needed(self, spec: GroupSpec, start: int) -> int:
        """The first block index a query at position `start` (or later) can see in `spec`'s group."""
        return 0 if spec.window is None else max(0, start - spec.window + 1) // self.block_size

    def match_prefix(self, token_ids: Sequence[int]) -> PrefixHit | None:
        """The longest cached run of leading full blocks of a new sequence of `token_ids` (at least its last
        token is left to compute), or None (no hit, or caching off)."""
        if not self.enable_caching:
            return None
        bs, keys, parent = self.block_size, [], None
        full = [pool for spec, pool in zip(self._specs, self._pools) if spec.window is None]
        for i in range((len(token_ids) - 1) // bs):  # extend while every full-attention group holds the block
            parent = block_key(parent, token_ids[i * bs:(i + 1) * bs])
            if any(pool.lookup(parent) is None for pool in full):
                break
            keys.append(parent)
        length, changed = len(keys), True
        while changed and length:  # shorten until every sliding group holds what its window needs at the end
            changed = False
            for spec, pool in zip(self._specs, self._pools):
                if spec.window is None:
                    continue
                missing = [i for i in range(self._first_needed(spec, length * bs), length)
                           if pool.lookup(keys[i]) is None]
                if missing:
                    length, changed = missing[-1], True
        if not length:
            return None
        tables = []
        for spec, pool in zip(self._specs, self._pools):
            first = self._first_needed(spec, length * bs)
            tables.append(tuple([RELEASED] * first + [pool.lookup(keys[i]) for i in range(first, length)]))
        return PrefixHit(length * bs, tuple(tables), tuple(keys[:length]))

    def register_blocks(self, seq_id: int, upto: int, tokens: Callable[[int, int], Sequence[int]]) -> None:
        """Index the sequence's full blocks within its first `upto` positions (computed, their ids known);
        `tokens(start, end)` gives its token ids. No-op with caching off."""
        if not self.enable_caching:
            return
        seq, bs = self._seqs[seq_id], self.block_size
        while (len(seq.keys) + 1) * bs <= min(upto, seq.length):
            i = len(seq.keys)
            seq.keys.append(block_key(seq.keys[-1] if seq.keys else None, tokens(i * bs, (i + 1) * bs)))
            for table, pool in zip(seq.tables, self._pools):
                if i < len(table.blocks) and table.blocks[i] != RELEASED:
                    pool.register(table.blocks[i], seq.keys[-1])

    def _attach(self, seq_id: int, hit: PrefixHit) -> _Sequence:
        """A new sequence holding the hit's blocks (shared)."""
        seq = self._seqs[seq_id] = _Sequence(tables=[], row=self._rows.acquire(), length=hit.num_tokens,
                                             keys=list(hit.keys))
        for g, (table, pool) in enumerate(zip(hit.tables, self._pools)):
            released = sum(1 for b in table if b == RELEASED)
            for b in table[released:]:
                pool.share(b)
            seq.tables.append(_Table(blocks=list(table), released=released))
            self._rows.write(seq.row, g, 0, table)
        return seq

    def _plan(self, seq: _Sequence | None, start: int, end: int) -> list[tuple[int, int, int]] | None:
        """Per group (first block index needed, blocks to take, indices to release from the table's released
        mark), or None when some pool is short (counting what the sequence itself releases)."""
        plan = []
        last_block = (end - 1) // self.block_size
        for g, spec in enumerate(self._specs):
            first = 0 if spec.window is None else max(0, start - spec.window + 1) // self.block_size
            table = seq.tables[g] if seq is not None else None
            length, released = (len(table.blocks), table.released) if table is not None else (0, 0)
            if first < released:
                raise ValueError(f"positions from {start} asked, blocks before index {released} already released "
                                 f"in group {spec.name!r}")
            release = max(0, min(first, length) - released)
            take = max(0, last_block + 1 - max(length, first))
            # a released block shared with another sequence (a prefix-cache hit) stays held: only the others free up
            freed = self._pools[g].num_freed_by(table.blocks[released:released + release]) if release else 0
            if take > self._pools[g].num_free + freed:
                return None
            plan.append((first, take, release))
        return plan

    def _fits_held_blocks(self, seq: _Sequence, start: int, end: int) -> bool:
        """Whether positions [start, end) need no block taken nor released in any group: the table already holds
        the last one's block and no sliding window moved past a block boundary (what `_plan` would find as
        (first, 0, 0) everywhere; 15 of 16 decode steps at block size 16). The host runs this for every running
        sequence every step, so it is the cheap test before the plan."""
        last_block = (end - 1) // self.block_size
        for spec, table in zip(self._specs, seq.tables):
            if last_block >= len(table.blocks):
                return False
            if spec.window is not None and max(0, start - spec.window + 1) // self.block_size != table.released:
                return False
        return True

    def can_allocate(self, seq_id: int, start: int, end: int) -> bool:
        """Whether `allocate(seq_id, start, end)` would succeed now."""
        return self._plan(self._seqs.get(seq_id), start, end) is not None

    def try_allocate(self, seq_id: int, start: int, end: int, hit: PrefixHit | None = None) -> bool:
        """Make room for positions [start, end) of `seq_id` (new sequences start at 0, or at `hit.num_tokens`
        holding the hit's cached blocks; `start` is where this step's tokens begin, so a sliding group releases
        blocks no query from `start` on can see). All or nothing: returns False and holds nothing new when a
        pool is short."""
        if not 0 <= start < end:
            raise ValueError(f"positions [{start}, {end}): expected 0 <= start < end")
        if hit is not None:
            assert seq_id not in self._seqs and start == hit.num_tokens, "a hit starts a new sequence"
            self._attach(seq_id, hit)
            if not self.try_allocate(seq_id, start, end):
                self.free(seq_id)
                return False
            return True
        seq = self._seqs.get(seq_id)
        if seq is not None and end < seq.length:
            raise ValueError(f"sequence {seq_id}: positions up to {end} asked, {seq.length} already held")
        if seq is not None and self._fits_held_blocks(seq, start, end):  # most decode steps: nothing to change
            seq.length = end
            return True
        plan = self._plan(seq, start, end)
        if plan is None:
            return False
        if seq is None:
            seq = self._seqs[seq_id] = _Sequence(tables=[_Table() for _ in self._specs], row=self._rows.acquire())
        for g, ((first, take, release), table, pool) in enumerate(zip(plan, seq.tables, self._pools)):
            if release:
                released = table.released
                pool.give_back(table.blocks[released:released + release])
                table.blocks[released:released + release] = [RELEASED] * release
                table.released += release
                self._rows.write(seq.row, g, released, [RELEASED] * release)
            if len(table.blocks) < first:  # a sequence starting past its window (not the engine's case)
                self._rows.write(seq.row, g, len(table.blocks), [RELEASED] * (first - len(table.blocks)))
                table.blocks.extend([RELEASED] * (first - len(table.blocks)))
                table.released = first
            if take:
                taken = pool.take(take)
                self._rows.write(seq.row, g, len(table.blocks), taken)
                table.blocks.extend(taken)
        seq.length = end
        return True

    def allocate(self, seq_id: int, start: int, end: int) -> None:
        """`try_allocate`, raising NoFreeBlocks (and changing nothing) when a pool is short."""
        if not self.try_allocate(seq_id, start, end):
            short = [f"{spec.name!r}: {pool.num_free} free of {pool.num_blocks}"
                     for spec, pool in zip(self._specs, self._pools)]
            raise NoFreeBlocks(f"positions [{start}, {end}) of sequence {seq_id} do not fit; group " + ", ".join(short))

    def free(self, seq_id: int) -> None:
        """Return every block of `seq_id` (finished, aborted or preempted); unknown ids are an error."""
        seq = self._seqs.pop(seq_id, None)
        if seq is None:
            raise KeyError(f"sequence {seq_id} holds no blocks")
        for table, pool in zip(seq.tables, self._pools):
            pool.give_back(reversed(table.blocks[table.released:]))  # its last blocks are evicted first
        self._rows.release(seq.row)

    def holds(self, seq_id: int) -> bool:
        return seq_id in self._seqs

    def block_table(self, seq_id: int, group: str) -> list[int]:
        """A copy of the sequence's block id per block index in `group` (RELEASED = -1: out of the window)."""
        return list(self._seqs[seq_id].tables[list(self.groups).index(group)].blocks)

    def block_tables(self, seq_id: int) -> list[list[int]]:
        """The sequence's tables in every group, in the order the groups were given (the cache's order). These
        are the manager's own lists, not copies: read them, never modify them."""
        return [table.blocks for table in self._seqs[seq_id].tables]

    def step_block_tables(self, seq_ids: Sequence[int]) -> list[np.ndarray]:
        """The tables of `seq_ids` as a step hands them to the runner: per group (cache order) a new
        [len(seq_ids), width] int32 array, row b sequence seq_ids[b]'s table padded with RELEASED (-1) to the
        longest of them."""
        rows = np.fromiter((self._seqs[s].row for s in seq_ids), dtype=np.intp, count=len(seq_ids))
        return self._rows.gather(rows)

    def num_cached_blocks(self) -> int:
        return sum(pool.num_cached for pool in self._pools)

    def usage(self) -> dict[str, float]:
        """Fraction of each group's blocks in use."""
        return {name: 1.0 - pool.num_free / pool.num_blocks for name, pool in self.pools.items()}

    @property
    def num_sequences(self) -> int:
        return len(self._seqs)
