"""Block bookkeeping of the paged KV cache: which fixed-size blocks each sequence holds, per layer group.

The cache is cut into blocks of `block_size` token positions. Layers are grouped by what they keep:
full-attention layers keep every position of a sequence; sliding-window layers (window W) only the last
W - 1 positions before the current one, so they hold at most ceil((W - 1 + chunk) / block_size) + 1
blocks per sequence whatever its length, and blocks that fall out of the window go back to the pool. Each
group has its own pool and its own block table per sequence (block ids index the group's KV tensors, one
slot per layer of the group).

`BlockPool` hands out and takes back block ids (LIFO, so recently freed blocks are reused while warm in
cache) and refuses double frees. `KVBlockManager` keeps the tables: `allocate(seq, start, end)` makes room
for positions [start, end) of a sequence (all or nothing: on `NoFreeBlocks` nothing changed), `free(seq)`
returns everything. Invariant: a sliding group's table entry for a block out of the window is None.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["BlockPool", "GroupSpec", "KVBlockManager", "NoFreeBlocks"]


class NoFreeBlocks(RuntimeError):
    """The pool cannot give the blocks asked for (the scheduler preempts or waits)."""


class BlockPool:
    """`num_blocks` block ids, 0..num_blocks-1."""

    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 1:
            raise ValueError(f"num_blocks = {num_blocks}: expected >= 1")
        self.num_blocks = num_blocks
        self._free = list(range(num_blocks - 1, -1, -1))  # pop() hands out 0, 1, ... first
        self._is_free = [True] * num_blocks

    @property
    def num_free(self) -> int:
        return len(self._free)

    def take(self, count: int) -> list[int]:
        if count > len(self._free):
            raise NoFreeBlocks(f"{count} blocks asked, {len(self._free)} free of {self.num_blocks}")
        blocks = [self._free.pop() for _ in range(count)]
        for b in blocks:
            self._is_free[b] = False
        return blocks

    def give_back(self, blocks: list[int]) -> None:
        for b in blocks:
            if self._is_free[b]:
                raise ValueError(f"block {b} freed twice")
            self._is_free[b] = True
            self._free.append(b)


@dataclass(frozen=True)
class GroupSpec:
    """A group of layers sharing block tables: `window` None (full attention) or the sliding window."""

    name: str
    num_blocks: int
    window: int | None = None

    def __post_init__(self) -> None:
        if self.window is not None and self.window < 1:
            raise ValueError(f"group {self.name!r}: window = {self.window}: expected >= 1 or None")


@dataclass
class _Sequence:
    tables: dict[str, list[int | None]] = field(default_factory=dict)  # group -> block id per block index
    length: int = 0  # positions made room for


class KVBlockManager:
    """Per-sequence block tables over one `BlockPool` per layer group."""

    def __init__(self, groups: list[GroupSpec], block_size: int) -> None:
        if block_size < 1:
            raise ValueError(f"block_size = {block_size}: expected >= 1")
        if len({g.name for g in groups}) != len(groups) or not groups:
            raise ValueError(f"groups {[g.name for g in groups]}: expected at least one, with distinct names")
        self.block_size = block_size
        self.groups = {g.name: g for g in groups}
        self.pools = {g.name: BlockPool(g.num_blocks) for g in groups}
        self._seqs: dict[int, _Sequence] = {}

    def _first_needed(self, group: GroupSpec, start: int) -> int:
        """First position a query at or after `start` may attend to, in this group."""
        return 0 if group.window is None else max(0, start - group.window + 1)

    def _plan(self, seq: _Sequence, start: int, end: int) -> dict[str, tuple[int, list[int]]]:
        """Per group: (blocks to take, table indices to release) to hold positions needed by [start, end)."""
        plan = {}
        for name, group in self.groups.items():
            table = seq.tables.get(name, [])
            first_block = self._first_needed(group, start) // self.block_size
            last_block = (end - 1) // self.block_size
            release = [i for i, b in enumerate(table) if b is not None and i < first_block]
            missing = sum(1 for i in range(first_block, last_block + 1) if i >= len(table) or table[i] is None)
            plan[name] = (missing, release)
        return plan

    def can_allocate(self, seq_id: int, start: int, end: int) -> bool:
        """Whether `allocate(seq_id, start, end)` would succeed now."""
        plan = self._plan(self._seqs.get(seq_id, _Sequence()), start, end)
        return all(missing <= self.pools[name].num_free + len(release) for name, (missing, release) in plan.items())

    def allocate(self, seq_id: int, start: int, end: int) -> None:
        """Make room for positions [start, end) of `seq_id` (new sequences start at 0; `start` is where this
        step's tokens begin, so a sliding group releases blocks no query from `start` on can see). All or
        nothing: raises NoFreeBlocks and changes nothing when a pool is short."""
        if not 0 <= start < end:
            raise ValueError(f"positions [{start}, {end}): expected 0 <= start < end")
        seq = self._seqs.get(seq_id, _Sequence())
        if end < seq.length:
            raise ValueError(f"sequence {seq_id}: positions up to {end} asked, {seq.length} already held")
        plan = self._plan(seq, start, end)
        for name, (missing, release) in plan.items():  # check every group before changing any
            if missing > self.pools[name].num_free + len(release):
                raise NoFreeBlocks(f"group {name!r}: {missing} blocks needed for positions [{start}, {end}) of "
                                   f"sequence {seq_id}, {self.pools[name].num_free} free (+{len(release)} it "
                                   "releases)")
        for name, (missing, release) in plan.items():
            table = seq.tables.setdefault(name, [])
            pool = self.pools[name]
            pool.give_back([table[i] for i in release])
            for i in release:
                table[i] = None
            first_block = self._first_needed(self.groups[name], start) // self.block_size
            last_block = (end - 1) // self.block_size
            fresh = iter(pool.take(missing))
            while len(table) <= last_block:
                table.append(None)
            for i in range(first_block, last_block + 1):
                if table[i] is None:
                    table[i] = next(fresh)
        seq.length = end
        self._seqs[seq_id] = seq

    def free(self, seq_id: int) -> None:
        """Return every block of `seq_id` (finished, aborted or preempted); unknown ids are an error."""
        seq = self._seqs.pop(seq_id, None)
        if seq is None:
            raise KeyError(f"sequence {seq_id} holds no blocks")
        for name, table in seq.tables.items():
            self.pools[name].give_back([b for b in table if b is not None])

    def holds(self, seq_id: int) -> bool:
        return seq_id in self._seqs

    def block_table(self, seq_id: int, group: str) -> list[int | None]:
        """Block id per block index of the sequence (None: released, out of a sliding window)."""
        return list(self._seqs[seq_id].tables.get(group, []))

    def block_tables(self, seq_id: int) -> list[list[int | None]]:
        """The sequence's table in every group, in the order the groups were given (the cache's order)."""
        tables = self._seqs[seq_id].tables
        return [list(tables.get(name, [])) for name in self.groups]

    def usage(self) -> dict[str, float]:
        """Fraction of each group's blocks in use."""
        return {name: 1.0 - pool.num_free / pool.num_blocks for name, pool in self.pools.items()}

    @property
    def num_sequences(self) -> int:
        return len(self._seqs)
